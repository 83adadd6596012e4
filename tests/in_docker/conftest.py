"""Fixtures of the Docker tests: the engine, the base image, the gateway image and an
egress network with the scripted model API on it (all created here and removed after)."""

from __future__ import annotations

import inspect
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import scripted_upstream
from docker_helpers import UPSTREAM_PORT, control

from docdelta.sandbox.dockerapi import LABEL, RUN_LABEL

CheckoutFactory = Callable[..., Path]
"""Same alias as tests/conftest.py: both files are imported as `conftest`, so whichever
one `from conftest import CheckoutFactory` meets, it finds the name."""


@pytest.fixture(scope="session")
def client() -> Any:
    import docker  # noqa: PLC0415 - imported only when a docker test runs

    return docker.from_env()


@pytest.fixture(scope="session")
def base_image() -> str:
    return os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")


@pytest.fixture(scope="session")
def gateway_image(client: Any, base_image: str) -> str:
    from docdelta.gateway.runtime import gateway_image as build  # noqa: PLC0415

    return build(client, base_image).tag


@pytest.fixture(scope="module")
def egress(client: Any, base_image: str) -> Iterator[str]:
    """A bridge network created by this test module, holding the scripted model API as
    `modelserver` (it doubles as the HTTP server the egress tests try to reach)."""
    name = f"docdelta-test-{uuid.uuid4().hex[:8]}"
    labels = {LABEL: "1", RUN_LABEL: name}
    network = client.networks.create(name, labels=labels)
    server = client.containers.run(
        base_image,
        ["python3", "-c", inspect.getsource(scripted_upstream), str(UPSTREAM_PORT)],
        name=f"{name}-modelserver",
        network=name,
        labels=labels,
        detach=True,
    )
    try:
        network.reload()
        assert control(client, base_image, name, f"http://{server.name}:{UPSTREAM_PORT}/") == "target ok\n"
        yield name
    finally:
        server.remove(force=True)
        network.remove()
