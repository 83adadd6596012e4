"""The agent layer: one the engine has (pulled before, or built here) is used with no registry
call; otherwise a published layer is pulled instead of running npm, and one that cannot be
pulled or does not fit is built here, as before."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import stand_in_layer, stand_in_npm
from registry import Registry, local_registry

from docdelta.agents.claude_code import VERSION, ClaudeCodeAgent
from docdelta.agents.images import (
    FROM_LAYER_LABEL,
    NODE_VERSION,
    agent_image,
    agent_layer,
    published_ref,
)
from docdelta.errors import SandboxError

pytestmark = pytest.mark.docker

CA = Path("/etc/ssl/certs/ca-certificates.crt")


def _publish(client: Any, ref: str, node_version: str, npm: list[str]) -> str:
    """Build the stand-in as `ref`, push it, and drop the local tag (a fresh runner has none)."""
    image_id = stand_in_layer(client, ref, node_version, npm)
    name, _, tag = ref.rpartition(":")
    for event in client.images.push(name, tag=tag, stream=True, decode=True):
        assert "error" not in event, event
    client.images.remove(ref)
    return image_id


def _asked_for(registry: Registry, pin: str) -> bool:
    """Whether the registry was asked for the claude_code layer's manifest at `pin` (a pull)."""
    return any(r.endswith(f"/owner/docdelta-agent-claude_code/manifests/{pin}") for r in registry.requests())


def test_a_published_layer_is_pulled_instead_of_built(client: Any, base_image: str, tmp_path: Path) -> None:
    with local_registry(tmp_path / "registry") as registry:
        ref = published_ref(f"{registry.host}/owner", ClaudeCodeAgent.name, VERSION)
        assert ref == f"{registry.host}/owner/docdelta-agent-claude_code:{VERSION}"
        npm = stand_in_npm()
        pushed = _publish(client, ref, NODE_VERSION, npm)
        assert registry.tags("owner/docdelta-agent-claude_code") == [VERSION]
        try:
            started = time.monotonic()
            image = agent_image(client, base=base_image, npm=npm, published=ref)
            took = time.monotonic() - started

            assert client.images.get(ref).id == pushed  # pulled from the registry ...
            assert client.images.get(image.tag).labels[FROM_LAYER_LABEL] == pushed  # ... and copied from
            assert _asked_for(registry, VERSION)
            out = client.containers.run(image.tag, ["claude", "--version"], network_mode="none", remove=True)
            assert out.decode().strip() == "published layer: claude --version"
            assert took < 60, took  # a pull and a copy, no npm

            # The next process finds the pulled layer here: the registry is not asked again.
            asked = len(registry.requests())
            assert agent_image(client, base=base_image, npm=npm, published=ref) == image
            assert registry.requests()[asked:] == []
        finally:
            client.images.remove(ref)


def test_a_layer_built_here_is_used_without_a_registry_call(
    client: Any, base_image: str, tmp_path: Path
) -> None:
    """A pin that was never published: the layer built here by an earlier process (on any
    base) is found on the engine, and no process pays a failed pull for it."""
    npm = stand_in_npm()
    local = f"docdelta-agent-layer:test-{uuid.uuid4().hex[:12]}"
    built = stand_in_layer(client, local, NODE_VERSION, npm)
    with local_registry(tmp_path / "registry") as registry:
        never_published = published_ref(f"{registry.host}/owner", ClaudeCodeAgent.name, "0.0.0-unpublished")
        try:
            image = agent_image(client, base=base_image, npm=npm, published=never_published)
            assert client.images.get(image.tag).labels[FROM_LAYER_LABEL] == built
            assert registry.requests() == []
        finally:
            client.images.remove(local)


def test_a_layer_here_that_does_not_fit_is_not_used(client: Any, base_image: str, tmp_path: Path) -> None:
    """A layer of the same packages built for another Node version is passed over: the
    published one is pulled."""
    npm = stand_in_npm()
    old = f"docdelta-agent-layer:test-{uuid.uuid4().hex[:12]}"
    stale = stand_in_layer(client, old, "18.0.0", npm)
    with local_registry(tmp_path / "registry") as registry:
        ref = published_ref(f"{registry.host}/owner", ClaudeCodeAgent.name, VERSION)
        assert ref is not None
        pushed = _publish(client, ref, NODE_VERSION, npm)
        try:
            image = agent_image(client, base=base_image, npm=npm, published=ref)
            assert client.images.get(image.tag).labels[FROM_LAYER_LABEL] == pushed != stale
            assert _asked_for(registry, VERSION)
        finally:
            client.images.remove(ref)
            client.images.remove(old)


def test_a_layer_that_cannot_be_pulled_or_does_not_fit_is_built_here(
    client: Any, base_image: str, tmp_path: Path
) -> None:
    built = agent_layer(client, base=base_image, npm=ClaudeCodeAgent.npm, extra_ca=CA)
    with local_registry(tmp_path / "registry") as registry:
        owner = f"{registry.host}/owner"
        missing = published_ref(owner, ClaudeCodeAgent.name, VERSION)  # never pushed
        for ref in (missing, None):
            image = agent_image(client, base=base_image, npm=ClaudeCodeAgent.npm, extra_ca=CA, published=ref)
            assert client.images.get(image.tag).labels[FROM_LAYER_LABEL] == built.digest, ref
        assert registry.requests() == []  # built here before: found here, no pull tried

        # A published layer for another Node version is pulled, not used, and the layer is
        # built: packages no registry has, so the build is seen failing in npm (the bootstrap
        # step is the one `built` ran, from the build cache).
        npm = stand_in_npm()
        other_node = published_ref(owner, ClaudeCodeAgent.name, "0.0.1")
        assert other_node is not None
        _publish(client, other_node, "18.0.0", npm)
        try:
            with pytest.raises(SandboxError, match="building image docdelta-agent-layer:") as failed:
                agent_image(client, base=base_image, npm=npm, extra_ca=CA, published=other_node)
            assert npm[0].split("@")[0] in str(failed.value)
            assert _asked_for(registry, "0.0.1")
        finally:
            client.images.remove(other_node)
    assert published_ref("", ClaudeCodeAgent.name, VERSION) is None  # `docker.agent_registry: ""`
