"""The model API keys of one entry: upstream name -> key, in one typed holder.

A key is read once, where the entry resolves it (`docdelta.wiring.resolve_keys`: from the
environment, or the Action's `api-key` input for its one upstream), and keeps this one shape
all the way to where it is used: the gateway's stdin (its container or the local process),
the judge's auth header, and redaction. Nothing in between turns it back into environment
variables, so nothing reads it out of them again.

The values are held as SecretStr and only `get`, `reveal` and `secrets` hand them out; `repr`, `str`
and every serialiser see upstream names at most, and pickling is refused, so a key cannot
reach a log line, a manifest or a worker process by accident.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NoReturn

from pydantic import SecretStr


class Keys:
    """Upstream name -> key; upstreams without a key are left out."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Mapping[str, str] | None = None) -> None:
        held = {name: SecretStr(value) for name, value in (keys or {}).items() if value}
        self._keys: Mapping[str, SecretStr] = MappingProxyType(held)

    @property
    def upstreams(self) -> list[str]:
        """The upstreams that have a key, sorted: safe to print."""
        return sorted(self._keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __repr__(self) -> str:
        return f"Keys({', '.join(self.upstreams)})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("Keys are never pickled: they stay in the process that resolved them")

    def get(self, upstream: str) -> str | None:
        """The key of `upstream` (the judge's auth header), or None when it has none."""
        key = self._keys.get(upstream)
        return None if key is None else key.get_secret_value()

    def reveal(self) -> dict[str, str]:
        """Upstream name -> key, for the one message that carries them: the gateway's stdin."""
        return {name: key.get_secret_value() for name, key in self._keys.items()}

    def secrets(self) -> list[str]:
        """The values alone, for `docdelta.redaction.redact`."""
        return [key.get_secret_value() for key in self._keys.values()]
