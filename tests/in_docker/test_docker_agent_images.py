"""The agent image builder: Node 22 from the npm registry, the pinned CLI on PATH, the
repository's toolchain untouched, built once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from docdelta.agents.claude_code import VERSION, ClaudeCodeAgent
from docdelta.agents.images import NODE, NODE_VERSION, agent_image
from docdelta.errors import AgentError

pytestmark = pytest.mark.docker

CA = Path("/etc/ssl/certs/ca-certificates.crt")


def test_the_image_runs_the_pinned_cli_on_node_22_without_node_on_path(client: Any, base_image: str) -> None:
    image = agent_image(client, base=base_image, npm=ClaudeCodeAgent.npm, extra_ca=CA)
    started = time.monotonic()
    again = agent_image(client, base=base_image, npm=ClaudeCodeAgent.npm, extra_ca=CA)
    assert again == image and time.monotonic() - started < 10  # content-hash tag: no rebuild
    probe = (
        f"{NODE} --version; claude --version; command -v node || echo no-node; command -v npm || echo no-npm"
    )
    out = (
        client.containers.run(
            image.tag,
            ["sh", "-c", probe],
            user="1000:1000",
            environment={"HOME": "/tmp"},
            network_mode="none",
            remove=True,
        )
        .decode()
        .splitlines()
    )
    assert out == [f"v{NODE_VERSION}", f"{VERSION} (Claude Code)", "no-node", "no-npm"]


def test_an_unpinned_package_is_refused_before_any_build(client: Any, base_image: str) -> None:
    with pytest.raises(AgentError, match="pinned") as caught:
        agent_image(client, base=base_image, npm=["@openai/codex@latest"])
    assert "name@X.Y.Z" in caught.value.hint
