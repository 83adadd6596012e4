"""The agent image: the environment image plus Node.js and one agent's pinned CLI.

Why this shape:

- **One Node for every CLI.** Claude Code 2.1 needs Node >= 22 and Gemini CLI >= 20, while
  Debian bookworm ships 18 and nodejs.org is not reachable from every build host. The
  npm registry is (it is where the CLIs come from anyway), and it carries the official
  Node binaries as the `node-linux-<arch>` packages. So a throwaway build stage installs
  Debian's node 18 + npm only to fetch, with npm itself, a pinned `node-linux-<arch>`
  (Node 22) and a pinned npm, then installs the CLI with that Node; the final image gets
  the Node binary and the installed CLI, never the bootstrap toolchain.
- **The repository's own toolchain stays as it was.** Node 22 lives in /opt and is not
  put on PATH: each CLI gets a /usr/local/bin launcher that names the Node binary
  explicitly (or, for a native CLI binary, a plain symlink). A repository whose setup
  installed its own `node` keeps running it in the agent's shell.
- **Built once.** Everything goes through `ensure_image`, so the tag is a content hash of
  the environment image, the pinned versions and the steps; a second call builds nothing.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from docker import DockerClient

from docdelta.errors import AgentError
from docdelta.sandbox.base import DockerImageConfig
from docdelta.sandbox.images import BuiltImage, ensure_image, environment_image

NODE_VERSION = "22.23.5"
"""The `node-linux-<arch>` package version (an official Node.js 22 build)."""
NPM_VERSION = "10.9.9"
NODE_HOME = "/opt/docdelta-node"
NODE = f"{NODE_HOME}/bin/node"
"""The Node binary the CLIs run on; not on PATH (see the module docstring)."""
_NODE_OUT = "/opt/docdelta-node.bin"
CLI_PREFIX = "/opt/docdelta-agent"
"""`npm install -g --prefix` of the CLIs: packages in lib/node_modules, bins in bin/."""

_PINNED = re.compile(r"^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*@\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")

# Build stage 0 (FROM the environment image): bootstrap npm, then Node 22 + npm, then the CLIs.
_BOOTSTRAP = (
    "set -eu; "
    "export DEBIAN_FRONTEND=noninteractive; "
    "apt-get update -qq; "
    "apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; "
    'case "$(uname -m)" in x86_64) arch=x64;; aarch64) arch=arm64;; '
    '*) echo "docdelta: no Node.js package for $(uname -m)" >&2; exit 1;; esac; '
    "npm install -g --no-fund --no-audit --prefix {node_home} "
    "node-linux-$arch@{node} npm@{npm}; "
    # The bin entry is a symlink into the package; COPY --from wants the real file.
    'cp "$(readlink -f {node_home}/bin/node)" {node_out}'
)
_INSTALL = (
    "set -eu; "
    "export PATH={node_home}/bin:$PATH; "
    'test "$(node --version)" = v{node}; '
    "npm install -g --no-fund --no-audit --prefix {prefix} {packages}; "
    "npm cache clean --force >/dev/null 2>&1"
)
# Final stage: a launcher per CLI bin that runs it on our Node without putting Node on PATH.
_LAUNCHERS = (
    "set -eu; "
    "for bin in {prefix}/bin/*; do "
    'target=$(readlink -f "$bin"); name=$(basename "$bin"); '
    'if head -c 128 "$target" | head -n 1 | grep -q "node"; then '
    'printf \'#!/bin/sh\\nexec {node} %s "$@"\\n\' "$target" > /usr/local/bin/$name; '
    "chmod 755 /usr/local/bin/$name; "
    'else ln -sf "$target" /usr/local/bin/$name; fi; '
    "done"
)


def agent_image(
    client: DockerClient, *, base: str, npm: Sequence[str], extra_ca: Path | None = None
) -> BuiltImage:
    """`base` (the environment image, or any Debian-based image with python3) plus Node.js
    22 and the pinned npm packages `npm` (e.g. `["@anthropic-ai/claude-code@2.1.332"]`).

    `extra_ca` is a PEM bundle trusted during the build and in the image, for networks
    whose TLS is intercepted. Raises AgentError for an unpinned package and SandboxError
    when the build fails (with the build log's tail).
    """
    loose = [spec for spec in npm if not _PINNED.match(spec)]
    if loose or not npm:
        raise AgentError(
            f"agent image: npm packages must be pinned to an exact version, got {list(npm)!r}",
            hint="name each package as name@X.Y.Z, e.g. @openai/codex@0.171.0",
        )
    env = environment_image(client, DockerImageConfig(base=base, extra_ca=extra_ca)).tag
    fill = {
        "node_home": NODE_HOME,
        "node_out": _NODE_OUT,
        "node": NODE_VERSION,
        "npm": NPM_VERSION,
        "prefix": CLI_PREFIX,
        "packages": " ".join(shlex.quote(spec) for spec in npm),
    }
    steps = [
        "USER root",
        _run(_BOOTSTRAP.format(**fill)),
        _run(_INSTALL.format(**fill)),
        f"FROM {env}",
        "USER root",
        f"COPY --from=0 {_NODE_OUT} {NODE}",
        f"COPY --from=0 {CLI_PREFIX} {CLI_PREFIX}",
        _run(_LAUNCHERS.format(prefix=CLI_PREFIX, node=NODE)),
    ]
    return ensure_image(client, name="docdelta-agent", base=env, steps=steps, network="bridge")


def _run(script: str) -> str:
    """A RUN step in exec form, so the script reaches /bin/sh unmangled."""
    return "RUN " + json.dumps(["/bin/sh", "-c", script])
