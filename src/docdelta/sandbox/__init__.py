"""Sandbox providers, chosen by name.

Providers are imported only when asked for, so a local run never pays for importing
the Docker SDK. Registering a provider is one line in `_PROVIDERS`.
"""

from __future__ import annotations

import importlib
from typing import Any

from docdelta.errors import ConfigError
from docdelta.sandbox.base import ExecResult, Sandbox, SandboxProvider, SandboxSpec

__all__ = ["ExecResult", "Sandbox", "SandboxProvider", "SandboxSpec", "get_provider", "provider_names"]

_PROVIDERS: dict[str, str] = {
    "local": "docdelta.sandbox.local:LocalProvider",
    "docker": "docdelta.sandbox.docker:DockerProvider",
}


def provider_names() -> list[str]:
    return sorted(_PROVIDERS)


def get_provider(name: str, **options: Any) -> SandboxProvider:
    """Build the provider registered as `name` with its options (e.g. `allow_network=True`)."""
    target = _PROVIDERS.get(name)
    if target is None:
        raise ConfigError(
            f"unknown sandbox {name!r}",
            hint=f"choose one of: {', '.join(provider_names())}",
        )
    module, _, attr = target.partition(":")
    cls: type[SandboxProvider] = getattr(importlib.import_module(module), attr)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(
            f"bad options for sandbox {name!r}: {exc}", hint="check the sandbox settings"
        ) from exc
