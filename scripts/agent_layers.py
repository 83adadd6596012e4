"""Build the images a release publishes and tag them with their registry names; print one
reference a line for the workflow to push (.github/workflows/release.yml).

It runs inside the Action image just built from the Dockerfile (`python - < this file`,
the Docker socket mounted), so the agent layers are built by the very docdelta being
released (`agents.images.agent_layer`, the builder a run falls back to) and the runner
needs no Python environment of its own. It tags:

- the Action image (`--action`, a local tag) as `<prefix>/docdelta:<version>`, the version
  being docdelta's own (`--tag`, the pushed git tag, must name it: `v<version>`);
- one layer per npm agent at its pin, `<prefix>/docdelta-agent-<agent>:<pin>`
  (`agents.images.published_ref`), where a run looks for it.

Bad arguments exit 2 with a message naming the flag.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import docker

from docdelta import __version__
from docdelta.action.job import ACTION_SANDBOX_BASE
from docdelta.agents import agent_class, agent_names
from docdelta.agents.base import GatewayAgent
from docdelta.agents.images import agent_layer, published_ref
from docdelta.errors import ExitCode


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agent_layers.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", required=True, help="registry and owner, e.g. ghcr.io/docdelta")
    parser.add_argument(
        "--action", required=True, help="the local tag of the Action image built from the Dockerfile"
    )
    parser.add_argument("--agents", default="", help="comma-separated agents (default: every npm agent)")
    parser.add_argument(
        "--base", default="", help=f"base of the layers' build (default: {ACTION_SANDBOX_BASE})"
    )
    parser.add_argument(
        "--extra-ca", default="", help="PEM bundle trusted while the layers are built (a proxy's CA)"
    )
    parser.add_argument("--tag", default="", help="the git tag being released (v<version>); empty: not a tag")
    args = parser.parse_args(argv)
    npm_agents = [name for name in agent_names() if issubclass(agent_class(name), GatewayAgent)]
    wanted = [name.strip() for name in args.agents.split(",") if name.strip()] or npm_agents
    unknown = sorted(set(wanted) - set(npm_agents))
    if unknown:
        parser.error(
            f"--agents: {', '.join(unknown)} has no published layer; choose from {', '.join(npm_agents)}"
        )
    if args.tag and args.tag != f"v{__version__}":
        parser.error(
            f"--tag: {args.tag} does not name docdelta {__version__}; tag the release v{__version__}"
        )
    extra_ca = Path(args.extra_ca) if args.extra_ca else None
    if extra_ca is not None and not extra_ca.is_file():
        parser.error(f"--extra-ca: {extra_ca} is not a file in this container; copy a PEM bundle in")
    refs = _build(args.prefix, args.action, wanted, args.base or ACTION_SANDBOX_BASE, extra_ca)
    print("\n".join(refs))
    return ExitCode.OK


def _build(prefix: str, action_image: str, agents: list[str], base: str, extra_ca: Path | None) -> list[str]:
    """Tag the Action image and build and tag each agent's layer; their references."""
    client = docker.from_env()
    action = f"{prefix}/docdelta:{__version__}"
    _tag(client, action_image, action)
    refs = [action]
    for name in agents:
        kind = agent_class(name)
        assert issubclass(kind, GatewayAgent)  # npm_agents holds only these
        ref = published_ref(prefix, name, kind.pinned)
        assert ref is not None  # --prefix is required, hence not empty
        layer = agent_layer(client, base=base, npm=kind.npm, extra_ca=extra_ca)
        _tag(client, layer.tag, ref)
        print(f"{name}: built {layer.tag}, tagged {ref}", file=sys.stderr)
        refs.append(ref)
    return refs


def _tag(client: docker.DockerClient, image: str, ref: str) -> None:
    name, _, tag = ref.rpartition(":")
    if not client.images.get(image).tag(name, tag=tag):
        raise SystemExit(f"tagging {image} as {ref} failed")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
