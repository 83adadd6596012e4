"""The release workflow under act, pushing to a registry on 127.0.0.1, and a run of
docdelta pulling the agent layer it published instead of building it.

act plays the runner as in tests/e2e/test_act.py (read its docstring); what differs here:
* the workflow is .github/workflows/release.yml itself, on `workflow_dispatch`, with
  `registry` the local registry (`tests/registry.py`, Debian's docker-registry, started
  and removed by the test) in place of ghcr.io, no GITHUB_TOKEN (the registry takes
  anonymous pushes; the workflow says so and does not log in), `agents: claude_code`
  (one layer: each is an npm install of a CLI), `base-image` the local base that trusts
  this machine's TLS-intercepting proxy (no Docker Hub here; pip goes through the proxy),
  and the layers built on docdelta-base with this machine's CA bundle as
  `layers-ca-bundle` (a file the test adds to the checkout; the workflow copies it into the
  container that builds the layers), so npm's own Node trusts the
  proxy too. Those are the base and bundle the docker tier's agent-image tests build on,
  so the layer is built once per machine, whichever test comes first;
* the job image is the local base plus the docker CLI (`actionimage.docker_job_base`),
  which reaches this engine through the socket act mounts into job containers: the
  workflow's builds and pushes are this engine's;
* the checkout is a git repository holding the files the release needs, whose `origin`
  names an owner in capitals (the registry wants the lower-cased name).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from actionimage import ACT, ACTION_DIRS, ACTION_FILES, BASE_IMAGE, docker_job_base, local_base
from gitrepo import git
from registry import Registry, local_registry

from docdelta import __version__
from docdelta.agents.claude_code import VERSION, ClaudeCodeAgent
from docdelta.agents.images import FROM_LAYER_LABEL, agent_image

pytestmark = [pytest.mark.docker, pytest.mark.act, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
RELEASE_FILES = (".github/workflows/release.yml", "scripts/agent_layers.py")
OWNER = "DocDelta-Test"
LAYER = f"{OWNER.lower()}/docdelta-agent-claude_code"
ACTION = f"{OWNER.lower()}/docdelta"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
"""The bundle tests/in_docker's agent-image tests pass as `extra_ca`."""


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    with local_registry(tmp_path / "registry") as running:
        yield running


def _checkout(dest: Path) -> Path:
    """The repository as the release's checkout would see it (the files it reads)."""
    for name in (*ACTION_FILES, *RELEASE_FILES):
        if (ROOT / name).exists():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    for name in ACTION_DIRS:
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "release")
    git(dest, "remote", "add", "origin", f"https://github.com/{OWNER}/docdelta.git")
    return dest


USES_IMAGE = """\
on: workflow_dispatch
jobs:
  version:
    runs-on: ubuntu-latest
    steps:
      - uses: docker://{image}
        with:
          entrypoint: /opt/docdelta/bin/docdelta
          args: --version
"""
"""A workflow that runs the published Action image as `uses: docker://` does, pulled by act."""


def _act(checkout: Path, workflow: Path, event: Path, image: str, cache: Path) -> str:
    proc = subprocess.run(
        [str(ACT), "workflow_dispatch", "-W", str(workflow), "-e", str(event),
         "-C", str(checkout), "-P", f"ubuntu-latest={image}", "--pull=false", "--no-cache-server"],
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        capture_output=True, text=True, timeout=1400, check=False,
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    saved = event.with_name(f"{workflow.stem}.log")
    saved.write_text(log)
    assert proc.returncode == 0, f"{saved}:\n{log[-6000:]}"
    return log


def test_the_release_workflow_publishes_the_images_and_a_run_pulls_the_agent_layer(
    registry: Registry, tmp_path: Path
) -> None:
    client: Any = docker.from_env()
    checkout = _checkout(tmp_path / "docdelta")
    event = tmp_path / "dispatch.json"
    shutil.copy2(HOST_CA, checkout / "ca.pem")
    inputs = {"registry": registry.host, "agents": "claude_code", "base-image": local_base(),
              "layers-base": BASE_IMAGE, "layers-ca-bundle": "ca.pem"}  # fmt: skip
    event.write_text(json.dumps({"inputs": inputs, "ref": "refs/heads/main"}))
    action_ref = f"{registry.host}/{ACTION}:{__version__}"
    layer_ref = f"{registry.host}/{LAYER}:{VERSION}"
    started = time.monotonic()
    try:
        job_image = docker_job_base()
        log = _act(checkout, checkout / RELEASE_FILES[0], event, job_image, tmp_path / "cache")
        released = time.monotonic() - started

        assert "Traceback" not in log and "without logging in" in log
        assert registry.catalog() == [ACTION, LAYER]
        assert registry.tags(ACTION) == [__version__] and registry.tags(LAYER) == [VERSION]
        # the digests, in the job summary and images.txt, are the registry's
        pushed = {ref: client.images.get(ref).attrs["RepoDigests"] for ref in (action_ref, layer_ref)}
        for ref, digests in pushed.items():
            (digest,) = (d for d in digests if d.startswith(ref.rpartition(":")[0] + "@"))
            assert f"{ref} {digest}" in log and f"| `{ref}` | `{digest.partition('@')[2]}` |" in log

        # A fresh runner: neither image is here, so the layer is pulled by its pin. (A run
        # uses a layer of the same packages the engine has before it pulls, and this shared
        # engine may hold one from other tests: the pull is made here, and docdelta's own
        # pull is asserted on a stand-in layer in tests/in_docker/test_docker_agent_layers.py.)
        for ref in (action_ref, layer_ref):
            client.images.remove(ref, noprune=True)  # its layers stay: the next run builds from them
        started = time.monotonic()
        client.images.pull(layer_ref.rpartition(":")[0], tag=VERSION)
        image = agent_image(client, base=BASE_IMAGE, npm=ClaudeCodeAgent.npm, published=layer_ref)
        pulled = time.monotonic() - started
        layer_id = client.images.get(layer_ref).id
        assert client.images.get(image.tag).labels[FROM_LAYER_LABEL] == layer_id
        out = client.containers.run(
            image.tag, ["claude", "--version"], environment={"HOME": "/tmp"}, network_mode="none", remove=True
        )
        assert out.decode().strip() == f"{VERSION} (Claude Code)"

        # The Action image as a step pulls it: `uses: docker://` under act.
        uses = tmp_path / "uses.yml"
        uses.write_text(USES_IMAGE.format(image=action_ref))
        log = _act(checkout, uses, event, job_image, tmp_path / "cache")
        assert f"docdelta {__version__}" in log and client.images.get(action_ref)
        print(
            f"release workflow under act: {released:.0f} s; pulling the layer and copying it: {pulled:.1f} s"
        )
    finally:
        for ref in (action_ref, layer_ref):
            subprocess.run(["docker", "image", "rm", "--no-prune", ref], capture_output=True, check=False)
