"""The sandbox providers the conformance suite runs against: name -> factory.

A factory takes a fresh root directory (and optionally the toolchain options every
provider honours, `ro_paths` and `env`) and returns a provider. Adding a provider
to the suite is one entry here (mark it, e.g. `marks=pytest.mark.docker`, when it
needs something the machine may lack).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from docdelta.sandbox import SandboxProvider, get_provider

ProviderFactory = Callable[..., SandboxProvider]


def _local(root: Path, **toolchain: Any) -> SandboxProvider:
    return get_provider("local", root=root / "sandboxes", **toolchain)


def _docker(root: Path, **toolchain: Any) -> SandboxProvider:
    import docker  # noqa: PLC0415 - only docker runs pay for the SDK

    image = os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")
    return get_provider("docker", client=docker.from_env(), image=image, **toolchain)


PROVIDERS: dict[str, object] = {
    "local": pytest.param(_local, id="local"),
    "docker": pytest.param(_docker, id="docker", marks=pytest.mark.docker),
}
