"""Plain-text helpers shared by the CLI's output and the report: a leaf, so `docdelta detect`
uses them without importing the report's template engine."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

LISTED = 10
"""Items of a long list (skipped tasks, near-miss files, files holding a gold item) named in
output; the rest are counted, so one repository's 150 entries do not bury what matters."""


def listing(items: Sequence[str], limit: int = LISTED) -> str:
    """`a, b, c and 142 more`: a long list named up to `limit`, the rest counted."""
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The one of `choices` that `name` most likely misspells (`noise_bnad` -> `noise_band`,
    `commandz` -> `command`), None when none is close: an error about a typo names the fix."""
    found = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


QUOTED = 300
"""Characters of an agent's error quoted in a one-line message (`quoted`)."""


def quoted(error: str, limit: int = QUOTED) -> str:
    """An error as one quoted line: whitespace collapsed, and when longer than `limit` its
    start and its end kept (a stderr tail's cause, `can't open file`, is often its last line)."""
    line = " ".join(error.split())
    if len(line) > limit:
        half = limit // 2
        line = f"{line[:half]} … {line[-half:]}"
    return f'"{line}"'
