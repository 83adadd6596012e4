"""Pure statistics: exact numbers on small samples, invariants on random ones."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, fisher_exact, mannwhitneyu

from docdelta.scorecard import stats
from docdelta.scorecard.stats import ArmSample, compare

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
    c = compare(ArmSample("head", head), ArmSample("base", base), band=0.05)
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


# ------------------------------------------------------------ per-arm figures
def test_pass_k_majority_and_fisher() -> None:
    assert stats.pass_k([1.0, 1.0, 1.0]) == 1.0
    assert stats.pass_k([1.0, 1.0, 0.0]) == 0.0  # pass^k: one failed repeat is not reliable
    assert stats.pass_k([1.0, 1.0, 0.0], 2) == pytest.approx(1 / 3)
    assert stats.pass_k([]) is None
    assert stats.majority_passes([1.0, 0.0]) is False  # a tie is no majority
    assert stats.majority_passes([1.0, 1.0, 0.0]) is True
    assert stats.fisher_passes([1.0] * 3, [0.0] * 3) == pytest.approx(0.1)
    assert stats.fisher_passes([1.0], []) is None


@settings(max_examples=500)
@given(st.lists(st.integers(0, 150), min_size=4, max_size=4))
def test_fisher_is_scipys_fisher_exact(table: list[int]) -> None:
    """The two-sided p in integers equals scipy's to float rounding (a few ulps), on tables
    of every shape: empty rows and columns (p = 1), the observed table at the mode, ties."""
    a, b, c, d = table
    expected = float(fisher_exact(np.array([[a, b], [c, d]])).pvalue)
    assert math.isclose(stats.fisher_two_sided(a, b, c, d), expected, rel_tol=1e-13)


def test_rank_shift_is_the_hodges_lehmann_median_difference() -> None:
    test = stats.rank_shift([110.0, 120.0, 130.0, 5000.0], [100.0, 110.0, 120.0])
    assert test is not None
    assert test.shift == 15.0  # median of the 12 differences; the 5000-token runaway is one rank, not +1000
    assert 0.0 < test.p_value <= 1.0
    assert stats.rank_shift([], [1.0]) is None


usage_values = st.one_of(
    st.integers(0, 6).map(float),  # few distinct values: ties, the normal approximation
    st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_subnormal=False),  # mostly distinct
)
usage_arm = st.lists(usage_values, min_size=1, max_size=14)


@settings(max_examples=1000)
@given(usage_arm, st.one_of(usage_arm, st.lists(usage_values, min_size=9, max_size=40)))
def test_mann_whitney_is_scipys_mannwhitneyu(x: list[float], y: list[float]) -> None:
    """The hand-written test equals scipy's `mannwhitneyu` (two-sided, method 'auto') to
    float rounding: exact U distribution for a small sample without ties, the tie- and
    continuity-corrected normal approximation otherwise, one-sided sizes (3 vs 40) included."""
    expected = float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
    assert math.isclose(stats.mann_whitney_two_sided(x, y), expected, rel_tol=1e-12, abs_tol=1e-300)


def test_mann_whitney_exact_and_approximate_figures() -> None:
    """scipy's documented example (5 vs 4 ages, no ties: exact, p = 1/9); one tie switches
    to the normal approximation; all values tied is p = 1, never a division by zero."""
    males, females = [19.0, 22.0, 16.0, 29.0, 24.0], [20.0, 11.0, 17.0, 12.0]
    assert stats.mann_whitney_two_sided(males, females) == pytest.approx(1 / 9, rel=1e-15)
    tied = [*females[:-1], 19.0]
    assert stats.mann_whitney_two_sided(males, tied) == pytest.approx(
        float(mannwhitneyu(males, tied).pvalue), rel=1e-12
    )
    assert stats.mann_whitney_two_sided([5.0, 5.0], [5.0, 5.0, 5.0]) == 1.0


# ---------------------------------------------------------------- significance
small_arm = st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=4)
strata_st = st.lists(st.tuples(small_arm, small_arm), min_size=1, max_size=3)


def _brute_force_p(strata: list[tuple[list[float], list[float]]]) -> float:
    """Every relabelling of every task, enumerated the slow obvious way."""
    observed = stats.stratified_delta(strata)
    assert observed is not None
    per_task = []
    for t, c in strata:
        pooled = t + c
        splits = []
        for chosen in itertools.combinations(range(len(pooled)), len(t)):
            rest = [pooled[i] for i in range(len(pooled)) if i not in chosen]
            splits.append(sum(pooled[i] for i in chosen) / len(t) - sum(rest) / len(rest))
        per_task.append(splits)
    combos = list(itertools.product(*per_task))
    hits = sum(1 for combo in combos if abs(sum(combo) / len(strata)) >= abs(observed) - 1e-9)
    return hits / len(combos)


@settings(deadline=None)  # the brute force is slow on a busy machine, not wrong
@given(strata_st)
def test_exact_permutation_p_matches_brute_force(strata: list[tuple[list[float], list[float]]]) -> None:
    test = stats.permutation_test(strata)
    assert test is not None and test.exact
    assert test.p_value == pytest.approx(_brute_force_p(strata), abs=1e-9)


@settings(deadline=None)
@given(strata_st)
def test_directional_mid_p_matches_brute_force(strata: list[tuple[list[float], list[float]]]) -> None:
    """lower = P(delta < observed) + P(delta = observed) / 2 over every relabelling; the two
    one-sided mid-p values add up to 1."""
    observed = stats.stratified_delta(strata)
    assert observed is not None
    per_task = []
    for t, c in strata:
        pooled = t + c
        per_task.append(
            [
                sum(pooled[i] for i in chosen) / len(t)
                - sum(pooled[i] for i in range(len(pooled)) if i not in chosen) / len(c)
                for chosen in itertools.combinations(range(len(pooled)), len(t))
            ]
        )
    deltas = [sum(combo) / len(strata) for combo in itertools.product(*per_task)]
    below = sum(d < observed - 1e-7 for d in deltas) / len(deltas)
    tie = sum(abs(d - observed) <= 1e-7 for d in deltas) / len(deltas)
    test = stats.directional_test(strata)
    assert test is not None and test.exact
    assert test.lower == pytest.approx(below + tie / 2, abs=1e-9)
    assert test.lower + test.higher == pytest.approx(1.0, abs=1e-9)


@given(strata_st, st.integers(0, 2**32 - 1))
def test_swapping_arms_negates_the_estimate_and_keeps_p(
    strata: list[tuple[list[float], list[float]]], seed: int
) -> None:
    swapped = [(c, t) for t, c in strata]
    ab, ba = stats.verdict(strata, seed=seed), stats.verdict(swapped, seed=seed)
    assert ab is not None and ba is not None
    assert ab.estimate == pytest.approx(-ba.estimate)
    assert ab.p_value == pytest.approx(ba.p_value)
    assert 0.0 < ab.p_value <= 1.0
    assert ab.ci_low <= ab.ci_high
    assert min(a for t, c in strata for a in (t + c)) - 1 <= ab.ci_low


def test_sampled_permutation_is_seeded_and_near_the_truth() -> None:
    rng = random.Random(1)
    strata = [([rng.random() for _ in range(8)], [rng.random() + 0.2 for _ in range(8)]) for _ in range(3)]
    a = stats.permutation_test(strata, seed=5)
    b = stats.permutation_test(strata, seed=5)
    assert a is not None and b is not None
    assert not a.exact  # 12,870^3 arrangements: sampled
    assert a == b
    more = stats.permutation_test(strata, resamples=20_000, seed=6)
    assert more is not None and abs(more.p_value - a.p_value) < 0.03


def test_tasks_missing_an_arm_are_left_out() -> None:
    assert stats.permutation_test([([1.0], [])]) is None
    assert stats.verdict([([], [0.0])]) is None
    with_gap = stats.permutation_test([([1.0, 1.0], [0.0, 0.0]), ([1.0], [])])
    assert with_gap is not None and with_gap.statistic == 1.0


def test_bootstrap_interval_of_constant_arms_is_the_delta() -> None:
    assert stats.bootstrap_interval([([0.75, 0.75], [0.5])]) == pytest.approx((0.25, 0.25))


# --------------------------------------------------------------------- verdict
@given(
    st.floats(-1, 1),
    st.floats(0, 1),
    st.tuples(st.floats(-1, 1), st.floats(-1, 1)).map(sorted),
    st.floats(0.001, 0.2),
    st.floats(0, 0.3),
)
def test_classify_calls_only_significant_effects_beyond_the_band(
    estimate: float, p: float, ci: list[float], alpha: float, band: float
) -> None:
    kind, reason = stats.classify(estimate, p, (ci[0], ci[1]), alpha=alpha, band=band)
    assert reason
    if kind in ("improved", "regressed"):
        assert p <= alpha + 1e-9 and abs(estimate) > band
        assert (kind == "improved") == (estimate > 0)
    elif kind == "no_change":
        assert abs(ci[0]) <= band + 1e-9 and abs(ci[1]) <= band + 1e-9
    if p > alpha + 1e-9:
        assert kind in ("no_change", "inconclusive")


def _v(kind: str) -> stats.Verdict:
    return stats.Verdict(kind, 0.0, 0.0, 0.0, 0.95, 0.5, True, 0.05, 0.05, 1, "because")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "policy", "conclusion"),
    [
        ("regressed", "regression", "failure"),
        ("regressed", "no-improvement", "failure"),
        ("regressed", "never", "neutral"),
        ("no_change", "regression", "success"),
        ("no_change", "no-improvement", "failure"),
        ("no_change", "never", "neutral"),
        ("improved", "regression", "success"),
        ("improved", "no-improvement", "success"),
        ("improved", "never", "success"),
        ("inconclusive", "regression", "neutral"),
        ("inconclusive", "no-improvement", "neutral"),
        ("inconclusive", "never", "neutral"),
    ],
)
def test_gate_fails_only_on_a_confident_result(kind: str, policy: str, conclusion: str) -> None:
    decision = stats.gate(_v(kind), policy)  # type: ignore[arg-type]
    assert decision.conclusion == conclusion
    assert "because" in decision.reason


def test_gate_without_a_verdict_is_neutral() -> None:
    decision = stats.gate(None, "regression")
    assert decision.conclusion == "neutral"
    assert "no verdict" in decision.reason


def _exact_aa_band(pool: list[float], repeats: int, quantile: float = 0.95) -> tuple[float, float, float]:
    """For a pass/fail pool: the smallest |delta| whose exact A/A probability of not being
    exceeded reaches `quantile`, with that CDF just below and at it (X, Y ~ Bin(repeats, p))."""
    p = sum(pool) / len(pool)
    pmf = [float(binom.pmf(x, repeats, p)) for x in range(repeats + 1)]
    cdf = 0.0
    for k in range(repeats + 1):
        below = cdf
        cdf += sum(pmf[x] * pmf[y] for x in range(repeats + 1) for y in range(repeats + 1) if abs(x - y) == k)
        if cdf >= quantile:
            return k / repeats, below, cdf
    raise AssertionError("unreachable: the CDF ends at 1")


@pytest.mark.parametrize(
    ("pool", "repeats"),
    [([0.0, 1.0], 3), ([0.0, 1.0], 5), ([0.0, 1.0, 1.0, 1.0], 4), ([0.0, 1.0, 1.0, 1.0], 8)],
)
def test_aa_band_of_a_pass_fail_task_is_the_exact_binomial_quantile(pool: list[float], repeats: int) -> None:
    expected, below, at = _exact_aa_band(pool, repeats)
    assert below < 0.94 and at > 0.955  # far enough from 0.95 that 2,000 simulations cannot miss it
    assert stats.aa_noise_band([pool], repeats, seed=3) == pytest.approx(expected)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=5), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_aa_band_is_zero_when_every_run_of_each_task_scores_alike(
    constants: list[float], repeats: int, seed: int
) -> None:
    pools = [[c] * (i + 2) for i, c in enumerate(constants)]  # tasks differ, runs within a task do not
    assert stats.aa_noise_band(pools, repeats, seed=seed) == 0.0


aa_pool = st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=2, max_size=10)


@settings(max_examples=40, deadline=None)
@given(st.lists(aa_pool, min_size=1, max_size=4), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_aa_band_shrinks_as_repeats_grow(pools: list[list[float]], repeats: int, seed: int) -> None:
    bands = [stats.aa_noise_band(pools, r, seed=seed) for r in (repeats, 4 * repeats, 16 * repeats)]
    assert all(b is not None and 0.0 <= b <= 1.0 for b in bands)
    assert bands == sorted(bands, reverse=True)  # type: ignore[type-var]


def test_aa_band_shrinks_with_more_tasks_and_is_seeded() -> None:
    pool = [0.0, 1.0, 0.5, 1.0]
    one, ten = stats.aa_noise_band([pool], 5), stats.aa_noise_band([pool] * 10, 5)
    assert one is not None and ten is not None and ten < one / 2  # noise averages out over tasks
    assert stats.aa_noise_band([pool] * 3, 5, seed=9) == stats.aa_noise_band([pool] * 3, 5, seed=9)


def test_aa_band_needs_runs() -> None:
    assert stats.aa_noise_band([], 5) is None
    assert stats.aa_noise_band([[]], 5) is None
    assert stats.aa_noise_band([[1.0]], 0) is None
