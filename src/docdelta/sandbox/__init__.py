"""Sandbox providers, chosen by name.

Providers are imported only when asked for, so a local run never pays for importing
the Docker SDK. Registering a provider is one line in `_PROVIDERS`.
"""

from __future__ import annotations

from typing import Any

from docdelta.errors import ConfigError
from docdelta.registry import build
from docdelta.sandbox.base import ExecResult, Sandbox, SandboxProvider, SandboxSpec

__all__ = ["ExecResult", "Sandbox", "SandboxProvider", "SandboxSpec", "get_provider", "provider_names"]

_PROVIDERS: dict[str, str] = {
    "local": "docdelta.sandbox.local:LocalProvider",
    "docker": "docdelta.sandbox.docker:DockerProvider",
    "none": "docdelta.sandbox.local:NoneProvider",
}


def provider_names() -> list[str]:
    return sorted(_PROVIDERS)


def get_provider(name: str, **options: Any) -> SandboxProvider:
    """Build the provider registered as `name` with its options (e.g. `allow_network=True`)."""
    # mypy refuses an abstract class for type[T] (python/mypy#4717); it is only an isinstance check.
    return build(_PROVIDERS, name, options, base=SandboxProvider, kind="sandbox", error=ConfigError)  # type: ignore[type-abstract]
