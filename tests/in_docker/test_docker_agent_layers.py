"""The agent layer from a registry: a published layer is pulled and used instead of running
npm, and one that cannot be pulled or does not fit is built here, as before."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from registry import local_registry

from docdelta.agents.claude_code import VERSION, ClaudeCodeAgent
from docdelta.agents.images import (
    CLI_PREFIX,
    FROM_LAYER_LABEL,
    LAYER_LABEL,
    NODE,
    NODE_VERSION,
    agent_image,
    agent_layer,
    published_ref,
)

pytestmark = pytest.mark.docker

CA = Path("/etc/ssl/certs/ca-certificates.crt")


def _stand_in_layer(client: Any, tag: str, node_version: str) -> str:
    """A layer as the release workflow publishes it, FROM scratch, whose `node` is a shell
    script that says it came from the registry (no npm, no Node: built in a second)."""
    files = {
        "Dockerfile": (
            f"FROM scratch\nCOPY node {NODE}\nCOPY claude {CLI_PREFIX}/bin/claude\n"
            f"LABEL {LAYER_LABEL}={node_version}\n"
        ).encode(),
        "node": b'#!/bin/sh\necho "published layer: $(basename "$1") $2"\n',
        "claude": b"#!/usr/bin/env node\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    image, _ = client.images.build(fileobj=io.BytesIO(buf.getvalue()), custom_context=True, tag=tag)
    return str(image.id)


def _publish(client: Any, ref: str, node_version: str) -> str:
    """Build the stand-in as `ref`, push it, and drop the local tag (a fresh runner has none)."""
    image_id = _stand_in_layer(client, ref, node_version)
    name, _, tag = ref.rpartition(":")
    for event in client.images.push(name, tag=tag, stream=True, decode=True):
        assert "error" not in event, event
    client.images.remove(ref)
    return image_id


def test_a_published_layer_is_pulled_instead_of_built(client: Any, base_image: str, tmp_path: Path) -> None:
    with local_registry(tmp_path / "registry") as registry:
        ref = published_ref(f"{registry.host}/owner", ClaudeCodeAgent.name, VERSION)
        assert ref == f"{registry.host}/owner/docdelta-agent-claude_code:{VERSION}"
        pushed = _publish(client, ref, NODE_VERSION)
        assert registry.tags("owner/docdelta-agent-claude_code") == [VERSION]
        try:
            started = time.monotonic()
            image = agent_image(client, base=base_image, npm=ClaudeCodeAgent.npm, published=ref)
            took = time.monotonic() - started

            assert client.images.get(ref).id == pushed  # pulled from the registry ...
            assert client.images.get(image.tag).labels[FROM_LAYER_LABEL] == pushed  # ... and copied from
            out = client.containers.run(image.tag, ["claude", "--version"], network_mode="none", remove=True)
            assert out.decode().strip() == "published layer: claude --version"
            assert took < 60, took  # a pull and a copy, no npm
        finally:
            client.images.remove(ref)


def test_a_layer_that_cannot_be_pulled_or_does_not_fit_is_built_here(
    client: Any, base_image: str, tmp_path: Path
) -> None:
    built = agent_layer(client, base=base_image, npm=ClaudeCodeAgent.npm, extra_ca=CA)
    with local_registry(tmp_path / "registry") as registry:
        owner = f"{registry.host}/owner"
        missing = published_ref(owner, ClaudeCodeAgent.name, VERSION)  # never pushed
        other_node = published_ref(owner, ClaudeCodeAgent.name, "0.0.1")
        assert missing is not None and other_node is not None
        _publish(client, other_node, "18.0.0")
        try:
            for ref in (missing, other_node, None):
                image = agent_image(
                    client, base=base_image, npm=ClaudeCodeAgent.npm, extra_ca=CA, published=ref
                )
                assert client.images.get(image.tag).labels[FROM_LAYER_LABEL] == built.digest, ref
        finally:
            client.images.remove(other_node)
    assert published_ref("", ClaudeCodeAgent.name, VERSION) is None  # `docker.agent_registry: ""`
