"""One statistic, one hypothesis, one line: every estimate the gate prints lies inside its
interval, the p beside it agrees with that interval, the interval covers the true delta at
its nominal rate, and "no change" needs every task's own interval inside its margin."""

from __future__ import annotations

import random

import numpy as np
from factories import arm, summary_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docdelta.report import render_markdown
from docdelta.results.models import RunResult
from docdelta.scorecard.decision import OVERALL, Design, Interval, decide, from_strata, task_band
from docdelta.scorecard.power import Scenario, interval_coverage, power_line, simulate, wilson

ALPHA = 0.05
BAND = 0.2
EPS = 1e-9
RANDOM = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _agrees(estimate: float, iv: Interval, p_lower: float, p_higher: float) -> None:
    assert iv.low - EPS <= estimate <= iv.high + EPS, (estimate, iv)
    p = p_lower if estimate < 0 else p_higher
    if p <= ALPHA:
        excludes = iv.high <= EPS if estimate < 0 else iv.low >= -EPS
        assert excludes, (estimate, iv, p)
    else:
        assert iv.low < EPS and iv.high > -EPS, (estimate, iv, p)


scores = st.one_of(
    st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=10),
    st.lists(st.floats(0, 1), min_size=1, max_size=10),
)


@RANDOM
@given(
    strata=st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=3), st.tuples(scores, scores), min_size=1, max_size=6
    )
)
def test_no_line_prints_an_estimate_outside_its_interval_or_a_p_that_disagrees_with_it(
    strata: dict[str, tuple[list[float], list[float]]],
) -> None:
    repeats = max(max(len(t), len(c)) for t, c in strata.values())
    d = decide(from_strata(strata), Design.fixed(repeats), alpha=ALPHA, band=BAND)
    assert d is not None
    for task in d.tasks:
        if task.interval is not None:
            _agrees(task.delta, task.interval, task.p_regressed, task.p_improved)
    if d.interval is None:
        assert d.p_value is None  # no interval: no test can reject, so no p is printed
        return
    assert d.interval.low - EPS <= d.estimate <= d.interval.high + EPS
    assert d.p_value is not None
    if d.kind in ("regressed", "improved"):
        assert d.p_value <= ALPHA
        assert d.subject in d.decided_by
        side = d.interval.high if d.kind == "regressed" else -d.interval.low
        assert side <= EPS  # the interval excludes 0 on the side of the call
        assert (d.estimate < 0) == (d.kind == "regressed")  # never "regressed" beside a positive delta
        if d.subject != OVERALL:
            assert f"task {d.subject} {d.estimate:+.2f}" in d.reason  # the deciding task's own numbers
    elif d.kind == "no_change":
        assert d.interval.inside(BAND) and d.p_value <= ALPHA
        assert all(t.interval is not None and t.interval.inside(task_band(BAND)) for t in d.tasks)
    else:
        p_lower = d.p_value if d.estimate < 0 else 1.0
        p_higher = d.p_value if d.estimate >= 0 else 1.0
        _agrees(d.estimate, d.interval, p_lower, p_higher)
    assert f"{d.estimate:+.2f}" in d.reason


def test_a_one_task_drop_never_ends_as_no_change() -> None:
    """The case the overall mean hid: t3 fell 20/24 -> 11/24 while two tasks held; the
    overall interval alone fits a wide band, t3's does not."""
    same = [1.0] * 23 + [0.0]
    strata = {
        "t1": (same, same),
        "t2": (same, same),
        "t3": ([1.0] * 11 + [0.0] * 13, [1.0] * 20 + [0.0] * 4),
    }
    d = decide(from_strata(strata), Design.fixed(24), alpha=ALPHA, band=0.3)
    assert d is not None
    assert d.kind != "no_change"
    t3 = next(t for t in d.tasks if t.task == "t3")
    assert t3.interval is not None and not t3.interval.inside(0.3)


def test_the_issues_drop_never_ends_as_no_change_at_the_default_band_in_the_auto_design() -> None:
    """20/24 -> 11/24 on t3 at band 0.2: t3's own interval reaches past the task margin."""
    held = ([1.0] * 20 + [0.0] * 4, [1.0] * 20 + [0.0] * 4)
    strata = {"t1": held, "t2": held, "t3": ([1.0] * 11 + [0.0] * 13, [1.0] * 20 + [0.0] * 4)}
    d = decide(from_strata(strata), Design.auto(24), alpha=ALPHA, band=BAND)
    assert d is not None and d.kind != "no_change"
    t3 = next(t for t in d.tasks if t.task == "t3")
    assert t3.interval is not None and not t3.interval.inside(task_band(BAND))


def test_no_change_is_reachable_for_mid_rate_tasks_at_the_default_cap() -> None:
    """Tasks at 0.3 / 0.5 / 0.8 whose arms agree: no change at 24 runs per arm, which needs the
    task margin (at the band itself a 0.5 task's 90% half-width is 0.24 > 0.2)."""
    strata = {
        f"t{i}": ([1.0] * k + [0.0] * (24 - k), [1.0] * k + [0.0] * (24 - k))
        for i, k in enumerate((7, 12, 19), 1)
    }
    d = decide(from_strata(strata), Design.auto(24), alpha=ALPHA, band=BAND)
    assert d is not None and d.kind == "no_change", d and d.reason
    assert all(t.interval is not None and not t.interval.inside(BAND) for t in d.tasks if t.task == "t2")
    assert task_band(BAND) == 2 * BAND and "every task's own interval lies inside ±0.40" in d.reason


def test_a_drop_of_the_task_margin_is_called_no_change_at_most_alpha() -> None:
    """TOST at the task margin: one of three tasks dropping by exactly task_band(0.2) = 0.4 (the
    overall mean by 0.13, inside the band) ends as no change in at most alpha of PRs."""
    sim = simulate(Scenario((0.9, 0.5, 0.9), (0.9, 0.5, 0.5)), Design.fixed(24), prs=200, band=BAND, seed=7)
    low, _ = wilson(sim.count("no_change"), sim.prs)
    assert low <= ALPHA, sim.verdicts


def test_the_headline_of_a_task_regression_is_that_tasks_numbers() -> None:
    drop = ([1.0] * 2 + [0.0] * 10, [1.0] * 12)
    up = ([1.0] * 12, [1.0] * 10 + [0.0] * 2)
    d = decide(from_strata({"a": drop, "b": up, "c": up}), Design.fixed(12), alpha=ALPHA, band=0.05)
    assert d is not None and d.kind == "regressed"
    assert d.subject == "a" and d.decided_by == ("a",)
    assert d.estimate < 0 and d.interval is not None and d.interval.high < 0
    assert "task a -0.83" in d.reason


def test_one_repeat_prints_no_interval_and_no_p() -> None:
    d = decide(from_strata({"a": ([1.0], [1.0]), "b": ([0.0], [1.0])}), Design.fixed(1))
    assert d is not None and d.kind == "inconclusive"
    assert d.interval is None and d.p_value is None and d.overall_p is None
    assert "p =" not in d.reason and "no test can reject" in d.reason


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tasks=st.sampled_from([3, 5, 12, 40]),
    repeats=st.sampled_from([2, 3, 6, 12, 24]),
    seed=st.integers(0, 1 << 20),
)
def test_task_intervals_cover_the_true_delta_at_least_at_their_nominal_rate(
    tasks: int, repeats: int, seed: int
) -> None:
    """90 % intervals, 3-40 tasks x 2-24 repeats, rates 0.02-0.98, some tasks truly changed by
    0.3: the Wilson interval of the measured coverage (task rows and the overall line) must
    reach 0.90; bench/bench_gate.py prints the same table at a larger size."""
    covered, total = interval_coverage(tasks, repeats, prs=max(4, 160 // tasks), seed=seed)
    _, high = wilson(covered, total)
    assert high >= 1 - 2 * ALPHA, (covered, total)


def test_the_overall_interval_covers_the_true_mean_delta() -> None:
    rng = random.Random(7)
    rates = [rng.uniform(0.02, 0.98) for _ in range(8)]
    truth = 0.0
    covered = 0
    prs = 200
    nprng = np.random.default_rng(8)
    for _ in range(prs):
        strata = {
            f"t{i}": ([float(x) for x in nprng.random(3) < r], [float(x) for x in nprng.random(3) < r])
            for i, r in enumerate(rates)
        }
        d = decide(from_strata(strata), Design.fixed(3), alpha=ALPHA, band=BAND)
        assert d is not None and d.interval is not None
        covered += d.interval.low - EPS <= truth <= d.interval.high + EPS
    _, high = wilson(covered, prs)
    assert high >= 1 - 2 * ALPHA, covered


def test_one_repeat_reports_no_power_figure_no_band_and_no_p() -> None:
    runs = [*arm("a", "base", [1.0]), *arm("a", "head", [1.0])]
    s = summary_of(runs, repeats=1)
    assert s.verdict is not None and s.verdict.p_value is None and s.aa_noise is None
    assert s.tasks[0].head_vs_base.aa_noise is None
    md = render_markdown(s)
    assert "Holm-adjusted p" not in md and "±0.00" not in md.split("deltas within")[0]
    assert s.tasks[0].head_vs_base.p_value is None and s.head_vs_base.p_value is None
    assert "1 task x 2 conditions x 1 repeat ·" in md
    assert "no test can reject" in power_line(None, 1, Design.fixed(1))


def test_a_task_whose_gold_is_only_unjudged_key_points_scores_nothing() -> None:
    """A no-op agent once scored 1.00 in every arm on key points no judge ruled on."""
    points = [*arm("explain", "base", [1.0] * 3, points=2), *arm("explain", "head", [1.0] * 3, points=2)]
    measured = [*arm("tests", "base", [1.0, 0.0, 1.0]), *arm("tests", "head", [1.0, 1.0, 0.0])]
    s = summary_of([*points, *measured], repeats=3)
    assert s.unmeasured == ["explain"]
    explain = next(t for t in s.tasks if t.task == "explain")
    assert explain.conditions["head"].mean_score is None and explain.head_vs_base.value is None
    assert s.verdict is not None and s.verdict.tasks == 1  # only the measured task is tested
    md = render_markdown(s)
    assert "left out of the statistics, nothing measured: explain" in md
    assert "| explain | 1.00" not in md


def test_the_title_of_a_task_regression_shows_that_tasks_delta_not_the_mean() -> None:
    runs: list[RunResult] = []
    for t, base, head in (("a", [1.0] * 8, [0.0] * 8), ("b", [0.0] * 8, [1.0] * 4 + [0.0] * 4)):
        runs += [*arm(t, "base", base), *arm(t, "head", head)]
    s = summary_of(runs, repeats=8)
    assert s.verdict is not None and s.verdict.kind == "regressed" and s.verdict.subject == "a"
    title = render_markdown(s).splitlines()[0]
    assert title == "## docdelta scorecard: regressed · a: head - base -1.00 (significant)"
