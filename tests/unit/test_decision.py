"""The gate's decision rule: its error rates, computed exactly where the space is small and
by simulation through the real round loop where it is not (hypothesis picks the cases)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import binom, norm

from docdelta.results.layout import POWER_CACHE
from docdelta.results.models import Cell
from docdelta.scorecard import decision, power
from docdelta.scorecard.decision import AUTO_SPENT, Design, decide, from_strata, holm
from docdelta.scorecard.models import VerdictKind
from docdelta.scorecard.power import Scenario, ScoreModel, simulate, wilson
from docdelta.scorecard.sequential import round_cells, run_rounds

ALPHA = 0.05
SLOW = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _binary(passes: int, n: int) -> list[float]:
    return [1.0] * passes + [0.0] * (n - passes)


@SLOW
@given(n=st.integers(2, 9), p=st.floats(0.02, 0.98))
def test_one_task_false_regression_rate_is_at_most_alpha_exactly(n: int, p: float) -> None:
    """Every outcome of one pass/fail task, n runs a side, weighed by its A/A probability."""
    rate = 0.0
    for xh in range(n + 1):
        for xb in range(n + 1):
            d = decide(from_strata({"a": (_binary(xh, n), _binary(xb, n))}), Design.fixed(n))
            assert d is not None
            if d.kind == "regressed":
                rate += float(binom.pmf(xh, n, p) * binom.pmf(xb, n, p))
    assert rate <= ALPHA


@SLOW
@given(
    rates=st.lists(st.floats(0.1, 0.9), min_size=2, max_size=3),
    model=st.sampled_from(["bernoulli", "beta"]),
)
def test_a_a_prs_under_optional_stopping_keep_the_false_alarm_bound(
    rates: list[float], model: ScoreModel
) -> None:
    """Auto rounds stop and continue on what they see; identical arms must still be called
    regressed (or improved) in at most alpha of PRs: the Wilson interval must reach below it."""
    scenario = Scenario(tuple(rates), tuple(rates), model)
    sim = simulate(scenario, Design.auto(6), prs=100, band=0.1, seed=len(rates))
    kinds: tuple[VerdictKind, ...] = ("regressed", "improved")
    for kind in kinds:
        low, _ = wilson(sim.count(kind), sim.prs)
        assert low <= ALPHA, (kind, sim.verdicts)


def test_no_change_is_claimed_at_most_alpha_when_the_true_delta_sits_on_the_band() -> None:
    """TOST: a real drop of exactly the band must not be sold as "no change"."""
    band = 0.2
    sim = simulate(Scenario((0.6, 0.6), (0.4, 0.4)), Design.fixed(40), prs=200, band=band, seed=3)
    low, _ = wilson(sim.count("no_change"), sim.prs)
    assert low <= ALPHA, sim.verdicts
    # and a true zero is found to be one, often, at the near-certain rates reviewed tasks have
    # (every task's own interval must lie inside the band: at 0.6 that takes hundreds of runs)
    same = simulate(Scenario((0.9, 0.9), (0.9, 0.9)), Design.fixed(40), prs=100, band=band, seed=4)
    assert same.rate("no_change") >= 0.5


def test_a_dropped_task_is_found_on_its_own_and_stops_the_rounds_early() -> None:
    sim = simulate(Scenario((0.5, 0.5, 0.9), (0.5, 0.5, 0.0)), Design.auto(12), prs=40, seed=5)
    assert sim.rate("regressed") >= 0.9
    assert sim.mean_runs < sim.fixed_runs  # the loop stopped once the task regressed


def test_the_deciding_p_is_the_holm_adjusted_sequential_one() -> None:
    d = decide(
        from_strata({"a": (_binary(0, 8), _binary(8, 8)), "b": (_binary(4, 8), _binary(4, 8))}),
        Design.fixed(8),
    )
    assert d is not None and d.kind == "regressed" and d.decided_by[0] == "a"
    (a,) = [t for t in d.tasks if t.task == "a"]
    assert d.p_value == a.p_regressed <= ALPHA
    # one-sided mid-p of 0/8 vs 8/8 is half of 1/C(16, 8); Holm multiplies by 3 hypotheses
    assert a.p_regressed == pytest.approx(3 * 0.5 / 12870)


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.floats(0, 1), min_size=1, max_size=6))
def test_holm_adjusted_p_values_are_at_least_raw_and_keep_their_order(ps: dict[str, float]) -> None:
    adjusted = holm(ps)
    assert all(adjusted[k] >= ps[k] - 1e-12 and adjusted[k] <= 1 for k in ps)
    order = sorted(ps, key=lambda k: ps[k])
    assert [adjusted[k] for k in order] == sorted(adjusted[k] for k in order)


@given(st.integers(2, 60))
def test_auto_design_spends_at_most_alpha_and_ends_at_the_cap(cap: int) -> None:
    design = Design.auto(cap)
    assert design.looks[-1] == cap and list(design.looks) == sorted(set(design.looks))
    assert sum(design.weights) == pytest.approx(AUTO_SPENT[-1]) and sum(design.weights) <= 1.0
    assert design.weights[0] >= 0 and all(w > 0 for w in design.weights[1:])


def test_fewer_than_two_runs_an_arm_never_decide_no_change() -> None:
    d = decide(from_strata({"a": ([0.33], [0.33])}), Design.fixed(1), band=0.9)
    assert d is not None and d.kind == "inconclusive" and d.interval is None


def test_rounds_run_only_open_tasks_and_report_their_counts() -> None:
    seen: list[list[Cell]] = []
    scores = {"a": ([], []), "b": ([], [])}  # type: dict[str, tuple[list[tuple[int, float]], list[tuple[int, float]]]]

    def execute(cells: list[Cell]) -> str | None:
        seen.append(cells)
        for c in cells:  # task a: head always fails, base always passes; b: identical coin
            value = (0.0 if c.condition == "head" else 1.0) if c.task == "a" else float(c.repeat % 2)
            scores[c.task][0 if c.condition == "head" else 1].append((c.repeat, value))
        return None

    def observe() -> dict[str, decision.TaskRuns]:
        return {t: decision.TaskRuns(tuple(h), tuple(b)) for t, (h, b) in scores.items()}

    out = run_rounds(["a", "b"], ["head", "base"], Design.auto(12), execute, observe)
    assert out.decision is not None and out.decision.kind == "regressed"
    assert out.rounds["a"] < 12 and out.runs == sum(len(c) for c in seen) < out.fixed_runs
    assert round_cells({"a": 1}, ["head", "base"], 0) == round_cells({"a": 1}, ["head", "base"], 0)


@pytest.mark.parametrize(
    ("tasks", "design", "to", "seed"),
    [
        (1, Design.fixed(16), 0.05, 1),  # caught in exactly 80% of the PRs
        (1, Design.fixed(20), 0.15, 1),  # in 77%: one short
        (1, Design.fixed(20), 0.1, 0),
        (3, Design.fixed(5), 0.0, 0),
        (2, Design.auto(12), 0.1, 0),
    ],
)
def test_the_power_search_stops_early_with_the_full_simulations_answer(
    tasks: int, design: Design, to: float, seed: int
) -> None:
    """Stopping once the answer is settled gives the answer all PRs give, at the target too."""
    scenario = power.drop_scenario([power.PRIOR_RATE] * tasks, 0, to)
    full = simulate(scenario, design, prs=30, band=0.05, seed=seed).rate("regressed")
    assert power.catches(scenario, design, prs=30, band=0.05, seed=seed) == (full >= power.POWER_TARGET)


def test_power_up_front_shrinks_with_repeats_and_is_cached_by_design(tmp_path: Path) -> None:
    small, large = Design.fixed(4), Design.fixed(20)
    few, many = (power.detectable_drop(1, d, band=0.05) for d in (small, large))
    assert many is not None and (few is None or few >= many)
    cache = tmp_path / POWER_CACHE
    assert power.cached_drop(cache, 1, large, alpha=ALPHA, band=0.05) == many
    # the second call reads the file instead of simulating: a value written there comes back
    data = json.loads(cache.read_text())
    (key,) = data
    cache.write_text(json.dumps({key: 0.5}))
    assert power.cached_drop(cache, 1, large, alpha=ALPHA, band=0.05) == 0.5
    assert "caught in 80% of simulated PRs" in power.power_line(many, 1, large)


@settings(max_examples=300)
@given(z=st.floats(-12, 30), level=st.floats(1e-12, 0.5))
def test_the_normal_tail_and_quantile_are_scipys_norm(z: float, level: float) -> None:
    """The interval, TOST and needed-runs figures use the standard normal without scipy:
    its upper tail and quantile equal scipy.stats.norm's `sf` and `isf` to float rounding,
    down to tails where `NormalDist().cdf` would have rounded to 0, and the quantile is the
    `ppf(1 - level)` it replaced wherever 1 - level keeps the level's digits."""
    assert math.isclose(decision._upper_tail(z), float(norm.sf(z)), rel_tol=1e-12)
    assert math.isclose(decision._upper_quantile(level), float(norm.isf(level)), rel_tol=1e-12, abs_tol=1e-12)
    if level >= 1e-4:
        assert math.isclose(
            decision._upper_quantile(level), float(norm.ppf(1 - level)), rel_tol=1e-11, abs_tol=1e-12
        )
