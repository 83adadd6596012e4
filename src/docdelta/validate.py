"""Pure validators for what a user passes beside `RunOptions` (whose pydantic fields
refuse NaN, infinity and out-of-range limits): repeats, the condition list, the plan's
size, and the costs agents report.

Each parser takes the raw text and returns the parsed value or raises `ValueError` with a
message that says what was expected; the CLI turns that into a usage error naming the
flag (exit 2). Why so strict: every comparison with NaN is False, so a NaN cost silently
switches the spend cap off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_RUNS_WITHOUT_CONFIRMATION = 1000
"""Planned runs (tasks x conditions x repeats) above which `docdelta run` asks for
`--yes`: a typo in --repeats must not start an unbounded bill. 1000 runs is a few
hundred tasks x 3 conditions x a handful of repeats, more than any PR check needs."""


def whole_at_least(low: int, text: str) -> int:
    """A whole number >= low."""
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"expected a whole number, got {text!r}") from None
    if number < low:
        raise ValueError(f"expected a whole number >= {low}, got {text!r}")
    return number


def condition_list(text: str) -> list[str]:
    """Comma-separated condition names, each once (a repeated name would run duplicate cells)."""
    names = [c.strip() for c in text.split(",") if c.strip()]
    if not names:
        raise ValueError("expected a comma-separated list such as base,head,none")
    return unique_conditions(names)


def unique_conditions(names: Sequence[str]) -> list[str]:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"condition {', '.join(dupes)} is listed more than once; name each condition once")
    return list(names)


def valid_cost(value: float | None) -> bool:
    """A cost an agent reported that the spend cap can add up: None (not reported) or a
    finite number >= 0. NaN, infinity and negative costs are not spend."""
    return value is None or (math.isfinite(value) and value >= 0)
