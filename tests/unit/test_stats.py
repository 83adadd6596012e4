"""Pure statistics: exact numbers on small samples, invariants on random ones."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docdelta import stats
from docdelta.stats import ArmSample, compare

values = st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=30)
scores = st.lists(st.floats(min_value=0, max_value=1, allow_nan=False), min_size=1, max_size=12)


def test_empty_input_gives_none_not_zero() -> None:
    assert stats.mean([]) is None
    assert stats.median([]) is None
    assert stats.spread([]) is None
    assert stats.pass_rate([]) is None
    assert stats.mean_delta([None, None]) is None


def test_small_sample_numbers() -> None:
    xs = [0.0, 0.5, 1.0, 1.0]
    assert stats.mean(xs) == 0.625
    assert stats.median(xs) == 0.75
    assert stats.passes(xs) == 2
    assert stats.pass_rate(xs) == 0.5
    s = stats.spread(xs)
    assert s is not None
    assert (s.low, s.q1, s.q3, s.high) == (0.0, 0.375, 1.0, 1.0)
    assert s.iqr == 0.625


@pytest.mark.parametrize(
    ("head", "base", "noise"),
    [
        ((0.54,), (0.5,), True),
        ((0.56,), (0.5,), False),
        ((0.55,), (0.5,), True),  # exactly the band, despite 0.55 - 0.5 = 0.05000000000000004
        ((0.44,), (0.5,), False),
        ((1.0, 0.0), (0.5, 0.5), True),
    ],
)
def test_noise_band_is_inclusive(head: tuple[float, ...], base: tuple[float, ...], noise: bool) -> None:
    c = compare(ArmSample("head", head), ArmSample("base", base))
    assert c.noise is noise


def test_missing_arm_gives_no_delta() -> None:
    c = compare(ArmSample("head", (1.0,)), ArmSample("none", ()))
    assert c.delta is None
    assert c.noise is None


def test_mean_delta_ignores_tasks_without_both_arms() -> None:
    assert stats.mean_delta([0.2, None, 0.0]) == pytest.approx(0.1)


@given(values)
def test_mean_and_median_within_range(xs: list[float]) -> None:
    m, med = stats.mean(xs), stats.median(xs)
    assert m is not None and med is not None
    assert min(xs) <= m <= max(xs)
    assert min(xs) <= med <= max(xs)


@given(values)
def test_spread_is_ordered(xs: list[float]) -> None:
    s = stats.spread(xs)
    assert s is not None
    assert s.low <= s.q1 <= s.q3 <= s.high


@given(scores)
def test_pass_rate_is_a_fraction(xs: list[float]) -> None:
    rate = stats.pass_rate(xs)
    assert rate is not None
    assert 0.0 <= rate <= 1.0


@given(scores, scores, st.floats(min_value=0, max_value=0.5))
def test_delta_is_antisymmetric_and_noise_symmetric(a: list[float], b: list[float], band: float) -> None:
    ab = compare(ArmSample("head", tuple(a)), ArmSample("base", tuple(b)), band=band)
    ba = compare(ArmSample("base", tuple(b)), ArmSample("head", tuple(a)), band=band)
    assert ab.delta is not None and ba.delta is not None
    assert ab.delta == pytest.approx(-ba.delta)
    assert ab.noise == ba.noise


@given(scores)
def test_an_arm_compared_with_itself_is_noise(a: list[float]) -> None:
    c = compare(ArmSample("head", tuple(a)), ArmSample("base", tuple(a)), band=0.0)
    assert c.delta == 0.0
    assert c.noise is True
