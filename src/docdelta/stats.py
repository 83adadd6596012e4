"""Pure statistics over per-run values: no I/O, no models, only numbers in and numbers out.

The report never computes a number itself; it asks this module, so the same
definition of "mean", "pass" and "noise" serves the markdown, the JSON, the badge
and (later) the check gate. Functions take an `ArmSample` (the per-run values of
one arm of one task) so significance tests — Fisher on passes, a stratified
permutation test, a bootstrap interval — can be added beside `compare` without
changing its callers. Empty input gives `None`, never a made-up 0.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_NOISE_BAND = 0.05
PASS_SCORE = 1.0
_EPS = 1e-9
"""Tolerance for float rounding: 0.55 - 0.50 is 0.05000000000000004, still inside a 0.05 band."""


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, kept inside [min, max] even when float rounding would step out."""
    if not values:
        return None
    return min(max(math.fsum(values) / len(values), min(values)), max(values))


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class Spread:
    """Min, quartiles and max: enough to tell 0.5 from "half 0, half 1"."""

    low: float
    q1: float
    q3: float
    high: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    if len(values) == 1:
        (v,) = values
        return Spread(v, v, v, v)
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return Spread(min(values), q1, q3, max(values))


def passes(scores: Sequence[float], threshold: float = PASS_SCORE) -> int:
    """Runs that scored at least `threshold` (by default a perfect 1.0)."""
    return sum(1 for s in scores if s >= threshold - _EPS)


def pass_rate(scores: Sequence[float], threshold: float = PASS_SCORE) -> float | None:
    return passes(scores, threshold) / len(scores) if scores else None


def is_noise(delta: float, band: float = DEFAULT_NOISE_BAND) -> bool:
    """A delta whose magnitude is within the band (inclusive) is noise, not an effect."""
    return abs(delta) <= band + _EPS


@dataclass(frozen=True)
class ArmSample:
    """The graded per-run scores of one arm (one condition) of one task."""

    condition: str
    scores: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float | None:
        return mean(self.scores)

    @property
    def passes(self) -> int:
        return passes(self.scores)


@dataclass(frozen=True)
class Comparison:
    """treatment vs control of one task. `delta` is None when either arm is empty."""

    treatment: str
    control: str
    delta: float | None
    band: float

    @property
    def noise(self) -> bool | None:
        return None if self.delta is None else is_noise(self.delta, self.band)


def compare(treatment: ArmSample, control: ArmSample, *, band: float = DEFAULT_NOISE_BAND) -> Comparison:
    """Difference of mean scores, treatment minus control (e.g. head - base)."""
    t, c = treatment.mean, control.mean
    delta = None if t is None or c is None else t - c
    return Comparison(treatment.condition, control.condition, delta, band)


def mean_delta(deltas: Sequence[float | None]) -> float | None:
    """Overall effect as the mean of per-task deltas, over tasks where both arms ran.

    Averaging within tasks first (rather than pooling runs) keeps a task with more
    repeats from dominating and is the same stratification a permutation test uses.
    """
    return mean([d for d in deltas if d is not None])
