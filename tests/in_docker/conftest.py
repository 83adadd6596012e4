"""Fixtures of the Docker tests: the engine, the base image, the gateway image and an
egress network with the scripted model server on it (all created here and removed after).

The server is the real one (`python3 -m modelserver`); a test module picks what
it replays by overriding the module-scoped `modelserver_script` fixture."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from docker_helpers import model_server_network
from modelserver.script import Script, TextTurn, TurnUsage

MODEL = "gpt-4o-mini-2024-07-18"


@pytest.fixture(scope="session")
def client() -> Any:
    import docker  # noqa: PLC0415 - imported only when a docker test runs

    return docker.from_env()


@pytest.fixture(scope="session")
def base_image() -> str:
    return os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")


@pytest.fixture(scope="session")
def gateway_image(client: Any, base_image: str) -> str:
    from docdelta.sandbox.gateway_container import gateway_image as build  # noqa: PLC0415

    return build(client, base_image).tag


@pytest.fixture(scope="module")
def modelserver_script() -> Script:
    """What the egress network's model server replays: a streamed answer whose usage has
    cached input (7 fresh + 4 cached in, 2 out), then a plain one (100 in, 20 out)."""
    return Script(
        name="docker-gateway",
        model=MODEL,
        turns=[
            TextTurn(text="Hello", usage=TurnUsage(input_tokens=7, cache_read_tokens=4, output_tokens=2)),
            TextTurn(text="Hello", usage=TurnUsage(input_tokens=100, output_tokens=20)),
        ],
    )


@pytest.fixture(scope="module")
def egress(client: Any, base_image: str, modelserver_script: Script) -> Iterator[str]:
    """A bridge network created by this test module, holding the scripted model server as
    `<network>-modelserver` (it doubles as the HTTP server the egress tests try to reach)."""
    with model_server_network(client, base_image, modelserver_script) as name:
        yield name
