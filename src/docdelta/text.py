"""Plain-text helpers shared by the CLI's output and the report: a leaf, so `docdelta detect`
uses them without importing the report's template engine."""

from __future__ import annotations

from collections.abc import Sequence

LISTED = 10
"""Items of a long list (skipped tasks, near-miss files, files holding a gold item) named in
output; the rest are counted, so one repository's 150 entries do not bury what matters."""


def listing(items: Sequence[str], limit: int = LISTED) -> str:
    """`a, b, c and 142 more`: a long list named up to `limit`, the rest counted."""
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")
