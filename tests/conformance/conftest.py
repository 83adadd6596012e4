"""The `provider` fixture: every test in this folder runs once per provider in providers.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.providers import PROVIDERS, ProviderFactory
from docdelta.sandbox import SandboxProvider


@pytest.fixture(params=list(PROVIDERS.values()))
def provider_factory(request: pytest.FixtureRequest) -> ProviderFactory:
    factory: ProviderFactory = request.param
    return factory


@pytest.fixture
def provider(provider_factory: ProviderFactory, tmp_path: Path) -> Iterator[SandboxProvider]:
    made = provider_factory(tmp_path)
    yield made
    made.close()
