"""One sandbox provider per worker thread, for `--jobs N` with providers that hold one
live sandbox at a time (the local provider's slot)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from docdelta.errors import SandboxError
from docdelta.sandbox.base import Sandbox, SandboxProvider, SandboxSpec


class PerThreadProvider(SandboxProvider):
    """Hands each thread's `create` to that thread's own provider, made on first use by
    `factory(slot)` with slots counted from 0, so parallel runs never share a slot; every
    one is closed by `close`, the last made first (a later slot's provider may use what the
    first one owns, e.g. its private root)."""

    def __init__(self, factory: Callable[[int], SandboxProvider]) -> None:
        self._factory = factory
        self._providers: dict[int, SandboxProvider] = {}
        self._lock = threading.Lock()
        self._closed = False

    def mine(self) -> SandboxProvider:
        """The calling thread's provider, made on its first call."""
        me = threading.get_ident()
        with self._lock:
            if self._closed:
                # A worker still winding down after close must not make a provider (and its
                # temporary root) that nothing would remove.
                raise SandboxError("the sandbox providers are closed", hint="start a new run")
            if me not in self._providers:
                self._providers[me] = self._factory(len(self._providers))
            return self._providers[me]

    def create(self, checkout: Path, spec: SandboxSpec) -> Sandbox:
        return self.mine().create(checkout, spec)

    def environment(self) -> str:
        return self.mine().environment()  # every slot's provider is made alike

    def close(self) -> None:
        with self._lock:
            self._closed = True
            providers, self._providers = list(self._providers.values()), {}
        for provider in reversed(providers):
            provider.close()
