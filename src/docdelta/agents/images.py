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
- **The agent layer is an image of its own, published per pin.** Node and the installed
  CLI are a `FROM scratch` image (`agent_layer`) that any environment image copies from, so
  the release workflow publishes one per agent at its pin
  (`<registry>/docdelta-agent-<agent>:<pin>`, `published_ref`) and a fresh runner pulls it
  instead of running npm; a repository with its own environment image reuses the same
  layer. When the pull fails (no registry, a fork's pin never published, another CPU
  architecture or Node version) the layer is built here, as it always was.
- **The engine first, then the registry.** A layer carries its Node version and its npm
  packages as labels, and an agent image what it was made for, so one the engine already
  has (pulled, built here on any base, or loaded from an image cache) is found and used
  with no registry call: a pin that was never published costs one build, not a failed
  pull in every later process.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

import docker.errors
from docker import DockerClient
from docker.models.images import Image

from docdelta.errors import AgentError
from docdelta.sandbox.base import DockerImageConfig
from docdelta.sandbox.image_cache import ImageCache
from docdelta.sandbox.images import BuiltImage, ensure_image, environment_image, find_image
from docdelta.vocabulary import sha256_hex

NODE_VERSION = "22.23.5"
"""The `node-linux-<arch>` package version (an official Node.js 22 build)."""
NPM_VERSION = "10.9.9"
NODE_HOME = "/opt/docdelta-node"
NODE = f"{NODE_HOME}/bin/node"
"""The Node binary the CLIs run on; not on PATH (see the module docstring)."""
_NODE_OUT = "/opt/docdelta-node.bin"
_LAYER_NAME = "docdelta-agent-layer"
_AGENT_NAME = "docdelta-agent"
CLI_PREFIX = "/opt/docdelta-agent"
"""`npm install -g --prefix` of the CLIs: packages in lib/node_modules, bins in bin/."""

LAYER_LABEL = "org.docdelta.agent-node"
"""Label of an agent layer image: the Node version it carries (a pulled layer of another
Node version is not used)."""
NPM_LABEL = "org.docdelta.agent-npm"
"""Label of an agent layer image: the pinned npm packages it holds (`_npm_key`), so a layer
built here is found again whatever base it was built on and whatever it is tagged."""
MADE_FOR_LABEL = "org.docdelta.agent-made-for"
"""Label of an agent image: a hash of its packages, Node version, environment image and
steps (`_made_for`), so the image is found again without its layer: an image cache holds
the agent image and not the layer (0.5 GB less to save and load), and a process whose layer
is not on the engine does not look for it."""
FROM_LAYER_LABEL = "org.docdelta.agent-layer"
"""Label of an agent image: the image ID of the layer it was copied from, so the agent
image's content-hash tag changes when a re-published layer does, and a test can tell a
pulled layer from a built one."""

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


def published_ref(registry: str, agent: str, pin: str) -> str | None:
    """Where the release workflow publishes `agent`'s layer at `pin` under `registry`
    (`docker.agent_registry`, e.g. ghcr.io/docdelta); None when `registry` is empty."""
    return f"{registry.rstrip('/')}/docdelta-agent-{agent}:{pin}" if registry else None


def agent_layer(
    client: DockerClient, *, base: str, npm: Sequence[str], extra_ca: Path | None = None
) -> BuiltImage:
    """Node.js 22 and the pinned npm packages `npm` alone, `FROM scratch` (what the release
    workflow publishes), installed with `base`'s environment image's apt and `extra_ca`.
    Raises AgentError for an unpinned package and SandboxError when the build fails."""
    _check_pinned(npm)
    env = environment_image(client, DockerImageConfig(base=base, extra_ca=extra_ca)).tag
    return ensure_image(client, name=_LAYER_NAME, base=env, steps=_layer_steps(npm), network="bridge")


def _layer_steps(npm: Sequence[str]) -> list[str]:
    fill = {
        "node_home": NODE_HOME,
        "node_out": _NODE_OUT,
        "node": NODE_VERSION,
        "npm": NPM_VERSION,
        "prefix": CLI_PREFIX,
        "packages": " ".join(shlex.quote(spec) for spec in npm),
    }
    return [
        "USER root",
        _run(_BOOTSTRAP.format(**fill)),
        _run(_INSTALL.format(**fill)),
        "FROM scratch",
        f"COPY --from=0 {_NODE_OUT} {NODE}",
        f"COPY --from=0 {CLI_PREFIX} {CLI_PREFIX}",
        f"LABEL {LAYER_LABEL}={NODE_VERSION} {NPM_LABEL}={_npm_key(npm)}",
    ]


def agent_image(
    client: DockerClient,
    *,
    base: str,
    npm: Sequence[str],
    extra_ca: Path | None = None,
    published: str | None = None,
    cache: ImageCache | None = None,
) -> BuiltImage:
    """`base` (the environment image, or any Debian-based image with python3) plus Node.js
    22 and the pinned npm packages `npm` (e.g. `["@anthropic-ai/claude-code@2.1.332"]`).

    The image is found rather than made when the engine has it: copied from `published`
    when that layer is here, else any agent image for the same packages, Node version and
    environment image. Otherwise its layer is the first that fits this engine (this Node
    version and CPU architecture) of: one built here for the same packages (on any base),
    `published` pulled, one built here now (`agent_layer`). Looking on the engine first is
    what spares every process of a run whose pin was never published a failed pull.
    `cache` keeps the image for the next job (`image_cache`; the caller restores it before
    this). `extra_ca` is a PEM bundle trusted during the build and in the image, for
    networks whose TLS is intercepted. Raises AgentError for an unpinned package and
    SandboxError when the build fails (with the build log's tail).
    """
    _check_pinned(npm)
    env = environment_image(client, DockerImageConfig(base=base, extra_ca=extra_ca), cache)
    made_for = _made_for(npm, env.digest)
    layer = _here(client, published) if published else None
    built = None if layer is not None else _ready_image(client, made_for)
    if built is None:
        layer = (
            layer
            or _local_layer(client, npm, env.tag)
            or (_pulled_layer(client, published) if published else None)
            or agent_layer(client, base=base, npm=npm, extra_ca=extra_ca)
        )
        steps = [
            "USER root",
            f"COPY --from={layer.tag} {NODE} {NODE}",
            f"COPY --from={layer.tag} {CLI_PREFIX} {CLI_PREFIX}",
            _run(_LAUNCHERS.format(prefix=CLI_PREFIX, node=NODE)),
            f"LABEL {FROM_LAYER_LABEL}={layer.digest} {MADE_FOR_LABEL}={made_for}",
        ]
        built = ensure_image(client, name=_AGENT_NAME, base=env.tag, steps=steps)
    if cache is not None:
        cache.keep(built.tag)
    return built


def _check_pinned(npm: Sequence[str]) -> None:
    loose = [spec for spec in npm if not _PINNED.match(spec)]
    if loose or not npm:
        raise AgentError(
            f"agent image: npm packages must be pinned to an exact version, got {list(npm)!r}",
            hint="name each package as name@X.Y.Z, e.g. @openai/codex@0.171.0",
        )


def _here(client: DockerClient, ref: str) -> BuiltImage | None:
    """The layer `ref` when the engine has it and it fits; None otherwise (no pull)."""
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    return BuiltImage(tag=ref, digest=str(image.id)) if _fits(client, image) else None


def _ready_image(client: DockerClient, made_for: str) -> BuiltImage | None:
    """An agent image the engine has for the same packages, Node version and environment
    image (`MADE_FOR_LABEL`), whatever layer it was copied from; None when there is none."""
    for image in client.images.list(filters={"label": f"{MADE_FOR_LABEL}={made_for}"}):
        if own := sorted(t for t in image.tags if t.rpartition(":")[0] == _AGENT_NAME):
            return BuiltImage(tag=own[0], digest=str(image.id))
    return None


def _layer_tag(tag: str) -> bool:
    """Whether `tag` is one docdelta gives a layer it built (`docdelta-agent-layer:<content
    hash>`) or pulled (`<registry>/docdelta-agent-<agent>:<pin>`, `published_ref`).

    Why a tag and not only the labels: labels are data any Dockerfile sets. A pull request's
    own image built on a shared engine (a self-hosted runner whose CI runs `docker build -t
    app:pr-7 .`) can carry this module's labels, but not a tag its workflow did not give it;
    so a label alone never makes an image the agent's (`_ready_image` asks the same of an
    agent image: `docdelta-agent:<content hash>`)."""
    repository = tag.rpartition(":")[0]
    registry, _, name = repository.rpartition("/")
    return repository == _LAYER_NAME or bool(registry and name.startswith(f"{_AGENT_NAME}-"))


def _local_layer(client: DockerClient, npm: Sequence[str], env: str) -> BuiltImage | None:
    """A layer of `npm` the engine has that fits it, without a registry call: the one built
    here on `env`, then one built here on another base (the layer is the same whatever base
    installed it); None when there is none."""
    found: dict[str, Image] = {}
    own = find_image(client, name=_LAYER_NAME, base=env, steps=_layer_steps(npm))
    if own is not None:
        found[own.tag] = client.images.get(own.tag)
    for image in client.images.list(filters={"label": f"{NPM_LABEL}={_npm_key(npm)}"}):
        for tag in sorted(image.tags):
            if _layer_tag(tag):
                found.setdefault(tag, image)
    for ref, image in found.items():
        if _fits(client, image):
            return BuiltImage(tag=ref, digest=str(image.id))
    return None


def _pulled_layer(client: DockerClient, ref: str) -> BuiltImage | None:
    """The published layer `ref` pulled; None when it cannot be pulled or does not fit
    (another Node version or CPU architecture): the caller builds."""
    name, _, tag = ref.rpartition(":")
    try:
        image = client.images.pull(name, tag=tag)
    except docker.errors.DockerException:
        return None
    return BuiltImage(tag=ref, digest=str(image.id)) if _fits(client, image) else None


def _fits(client: DockerClient, image: Image) -> bool:
    arch = client.version().get("Arch")
    return bool(
        (image.labels or {}).get(LAYER_LABEL) == NODE_VERSION and image.attrs.get("Architecture") == arch
    )


def _made_for(npm: Sequence[str], env_id: str) -> str:
    """`MADE_FOR_LABEL`'s value: what an agent image holds, but for the layer's image ID."""
    recipe = [sorted(npm), NODE_VERSION, env_id, _LAUNCHERS, NODE, CLI_PREFIX]
    return sha256_hex(json.dumps(recipe).encode())[:16]


def _npm_key(npm: Sequence[str]) -> str:
    """`NPM_LABEL`'s value: the pinned packages, sorted (pinned specs hold no comma)."""
    return ",".join(sorted(npm))


def _run(script: str) -> str:
    """A RUN step in exec form, so the script reaches /bin/sh unmangled."""
    return "RUN " + json.dumps(["/bin/sh", "-c", script])
