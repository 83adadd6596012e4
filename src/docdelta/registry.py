"""Name -> class tables whose entries are imported only when asked for.

Agents and sandbox providers are chosen by name from the CLI and the Action; a
table of `"module:Class"` strings keeps `docdelta --help` from importing the Docker
SDK or every agent adapter, and registering one more is one line.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, TypeVar

from docdelta.errors import DocdeltaError
from docdelta.text import closest

T = TypeVar("T")


def lookup(
    table: Mapping[str, str], name: str, *, base: type[T], kind: str, error: type[DocdeltaError]
) -> type[T]:
    """Import the class registered as `name` (its class attributes, without constructing it)."""
    target = table.get(name)
    if target is None:
        near = closest(name, table)
        choose = f"choose one of: {', '.join(sorted(table))}"
        raise error(f"unknown {kind} {name!r}", hint=f"did you mean {near!r}? ({choose})" if near else choose)
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise TypeError(f"{target} is not a {base.__name__}")
    return cls


def build(
    table: Mapping[str, str],
    name: str,
    options: Mapping[str, Any],
    *,
    base: type[T],
    kind: str,
    error: type[DocdeltaError],
) -> T:
    """Import the class registered as `name` and construct it with `options`."""
    cls = lookup(table, name, base=base, kind=kind, error=error)
    try:
        return cls(**options)
    except TypeError as exc:
        raise error(f"bad options for {kind} {name!r}: {exc}", hint=f"check the {kind} settings") from exc
