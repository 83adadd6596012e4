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
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TypeVar

MAX_RUNS_WITHOUT_CONFIRMATION = 1000
"""Planned runs (tasks x conditions x repeats) above which `docdelta run` asks for
`--yes`: a typo in --repeats must not start an unbounded bill. 1000 runs is a few
hundred tasks x 3 conditions x a handful of repeats, more than any PR check needs."""

# Defaults the CLI's parser shows. They live here, in a module that imports nothing, so that
# building the parser (for every command, `detect` included) imports neither scipy nor an
# agent adapter: `docdelta detect` must start in well under a second.
AUTO = "auto"
"""`--repeats auto`: rounds of runs until each task is decided (docdelta.scorecard.sequential)."""
DEFAULT_MAX_REPEATS = 24
ACTION_MAX_REPEATS = 100
"""The most `repeats` (and `max-repeats`) the Action accepts: a next step never proposes more."""
"""The cap of `--repeats auto`, per arm and task (its looks: `decision.AUTO_LOOK_SHARES`)."""
POOL_SKIP_BASE_FROM = 30
"""The Action's `skip-base-from`: with this many pooled base runs per task a PR runs head only.
At 30, bench/bench_gate.py's head-only design at 5 repeats has about the power of a fixed
10-repeat base+head design on a 0.8 -> 0.3 drop (42% against 44%) at a quarter of its runs."""
DEFAULT_MAX_OUTPUT_TOKENS = 4096
"""The openai agent's per-turn output cap (`max_tokens`) unless `--max-output-tokens` says otherwise."""
DEFAULT_MAX_PARALLEL = 20
"""GitHub's concurrent-job limit on its free plan: more jobs than run at once only add
each job's start-up (checkout, image build) to the wall time."""


class AblationUnit(StrEnum):
    """`docdelta ablate --unit` (docdelta.improve.ablation.Unit): here, so the parser needs no scipy."""

    heading = "heading"
    bullets = "bullets"


class AblationDesign(StrEnum):
    """`docdelta ablate --design` (docdelta.improve.ablation.Design)."""

    factorial = "factorial"
    """Fractional factorial (resolution IV): each condition removes about half the units."""
    single = "single"
    """One condition per removed unit."""


_N = TypeVar("_N", int, float)


def _number(
    text: str, kind: Callable[[str], _N], fits: Callable[[_N], bool], *, expected: str, fitting: str
) -> _N:
    """`text` read by `kind`; a `ValueError` saying what was `expected` when it does not read,
    and what `fitting` value when `fits` refuses it."""
    try:
        number = kind(text)
    except ValueError:
        raise ValueError(f"expected {expected}, got {text!r}") from None
    if not fits(number):
        raise ValueError(f"expected {fitting}, got {text!r}")
    return number


def whole_at_least(low: int, text: str) -> int:
    """A whole number >= low."""
    return _number(
        text, int, lambda n: n >= low, expected="a whole number", fitting=f"a whole number >= {low}"
    )


def repeats(text: str) -> int | str:
    """`--repeats N` (N >= 1) or `--repeats auto`."""
    if text == AUTO:
        return AUTO
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"expected a number of repeats or 'auto', got {text!r}") from None
    if number < 1:
        raise ValueError(f"expected at least 1 repeat (or 'auto'), got {number}")
    return number


def fraction(text: str) -> float:
    """A share in (0, 1], e.g. a pass threshold of 0.8."""
    return _number(
        text,
        float,
        lambda n: 0 < n <= 1,  # also refuses NaN
        expected="a share between 0 and 1 like 0.8",
        fitting="a share above 0 and at most 1 like 0.8",
    )


def noise_band(text: str) -> float:
    """`--noise-band B`: a score difference, 0 <= B < 1 (a band of 1 would call nothing a change)."""
    return _number(
        text,
        float,
        lambda n: 0 <= n < 1,
        expected="a score difference such as 0.2",
        fitting="a score difference from 0 up to (not including) 1",
    )


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
