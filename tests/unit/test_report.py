"""Summary numbers, the verdict and the rendered scorecard, from real result models (tests/factories.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import arm, detection, judged, manifest, result, ruling, summary_of
from gitrepo import GitRepo, Link
from jinja2 import UndefinedError

from docdelta.agents.models import RunStatus
from docdelta.git import Repo
from docdelta.grading.judged import with_judgements
from docdelta.instructions.detect import InstructionMatcher, detect_refs
from docdelta.instructions.models import NearMiss
from docdelta.report import render_comment_markdown, render_json, render_markdown
from docdelta.report.plain import SCORECARD_DOCS, lead
from docdelta.report.render import TEMPLATE_CACHE, cell, code, environment, mermaid_label, template_cache
from docdelta.results.models import AgentInfo, RunResult
from docdelta.scorecard import decision, stats
from docdelta.scorecard.models import PowerSummary, Summary
from docdelta.scorecard.summarize import summarize
from docdelta.vocabulary import DEFAULT_NOISE_BAND


# ------------------------------------------------------------------ summary
def test_infra_error_runs_do_not_lower_the_mean_and_are_counted() -> None:
    runs = [*arm("a", "head", [1.0, 1.0]), result("a", "head", None, 3, status=RunStatus.infra_error)]
    runs += arm("a", "base", [0.5, 0.5])
    s = summary_of(runs)
    head = s.tasks[0].conditions["head"]
    assert (head.mean_score, head.runs, head.infra_errors, head.runs_at_1) == (1.0, 2, 1, 2)
    assert head.statuses == {"infra_error": 1, "ok": 2}
    assert s.tasks[0].head_vs_base.value == 0.5


def test_timeout_runs_are_graded_as_the_agents_result() -> None:
    runs = [result("a", "head", 1.0), result("a", "head", 0.0, 2, status=RunStatus.timeout)]
    assert summary_of(runs).tasks[0].conditions["head"].mean_score == 0.5


@pytest.mark.parametrize(
    ("head", "repeats", "noise", "cell_text"),
    [
        (0.54, 2, True, "+0.04 (noise band)"),
        # the decision's own marks: two runs a side cannot reject, eight identical ones can
        (0.56, 2, False, "+0.06 (not significant)"),
        (0.56, 8, False, "+0.06 (significant)"),
    ],
)
def test_delta_noise_band_in_summary_and_table(
    head: float, repeats: int, noise: bool, cell_text: str
) -> None:
    runs = [*arm("a", "base", [0.5] * repeats), *arm("a", "head", [head] * repeats)]
    s = summarize(manifest(["a"], ["base", "head"], repeats=repeats), detection(), runs, noise=0.05)
    d = s.tasks[0].head_vs_base
    assert d.value == pytest.approx(head - 0.5)
    assert d.noise is noise
    row = next(line for line in render_markdown(s).splitlines() if line.startswith("| a |"))
    n = f"0/{repeats}"
    assert row.startswith(f"| a | 0.50 | {head:.2f} | {cell_text} | ")
    assert row.endswith(f" | — | {n} · {n} |")


def test_per_condition_medians_of_tokens_cost_turns_duration() -> None:
    runs = [
        result("a", "head", 1.0, 1, tokens=(100, 20), cost=0.02, turns=2, duration=1.0),
        result("a", "head", 1.0, 2, tokens=(300, 40), cost=0.04, turns=6, duration=3.0),
        result("a", "head", 1.0, 3, tokens=None, cost=None, turns=None, duration=5.0),
    ]
    h = summary_of(runs).tasks[0].conditions["head"]
    assert h.median_tokens == 230.0  # (120 + 340) / 2; the run without tokens is not a zero
    assert h.median_cost_usd == pytest.approx(0.03)
    assert h.total_cost_usd == pytest.approx(0.06)
    assert h.median_turns == 4.0
    assert h.median_duration_s == 3.0


def test_overall_means_and_delta_weigh_tasks_equally() -> None:
    runs = [*arm("a", "base", [0.0]), *arm("a", "head", [1.0, 1.0, 1.0])]
    runs += [*arm("b", "base", [0.5, 0.5, 0.5]), *arm("b", "head", [0.5])]
    s = summary_of(runs)
    assert s.overall["head"].mean_score == 0.75
    assert s.overall["base"].mean_score == 0.25
    assert s.head_vs_base.value == 0.5  # mean of +1.0 and 0.0
    assert s.head_vs_base.noise is False
    assert s.overall["head"].runs == 4


def test_missing_none_arm_gives_none_deltas_and_a_confound() -> None:
    s = summary_of([*arm("a", "base", [0.5, 0.5]), *arm("a", "head", [1.0, 1.0])])
    assert s.tasks[0].head_vs_none.value is None
    assert s.tasks[0].head_vs_none.noise is None
    assert s.head_vs_none.value is None
    assert s.confounds.missing_conditions == ["none"]
    md = render_markdown(s)
    # 0/2 -> 2/2 at 1.0, yet two runs a side of identical docs drawn from {0.5, 1.0} can do it:
    # not significant (mid-p 1/12, Holm over the task and the overall mean), so no flip mark
    assert "| a | 0.50 | 1.00 | +0.50 (not significant) | 0.17 | — | 0/2 · 2/2 |" in md
    assert "- condition `none` has no graded runs: its deltas are unavailable" in md


def test_no_results_at_all_does_not_crash() -> None:
    s = summarize(manifest(["a"]), detection(), [])
    assert s.head_vs_base.value is None
    assert s.confounds.missing_runs == 6
    assert s.confounds.missing_conditions == ["base", "head", "none"]
    md = render_markdown(s)
    assert "## docdelta scorecard: no verdict · head - base —" in md
    assert "**Verdict: none** — no task has graded runs in both head and base." in md


def test_missed_most_often_counts_runs_per_condition() -> None:
    runs = [
        result("a", "base", 0.0, 1, missed=["make test", "make lint"]),
        result("a", "base", 0.5, 2, missed=["make test"]),
        result("a", "head", 1.0, 1),
    ]
    s = summary_of(runs)
    assert [(m.expected, m.count, m.runs) for m in s.missed["base"]] == [
        ("make test", 2, 2),
        ("make lint", 1, 2),
    ]
    assert s.missed["head"] == []
    md = render_markdown(s)
    assert "  - a · command `make test` missed in 2/2 runs — never gave \\`make test\\`" in md


def test_confounds_isolation_near_misses_unscored_points_missing_runs() -> None:
    runs = [
        result("a", "base", 1.0, 1, points=2),
        result("a", "head", 1.0, 1, isolation="none", points=2),
        result("a", "head", None, 2, status=RunStatus.infra_error, isolation="unknown"),
    ]
    near = [NearMiss(path="docs/agents.md", reason="case-insensitive match of AGENTS.md")]
    s = summarize(manifest(["a"], ("base", "head")), detection(near), runs)
    k = s.confounds
    assert k.isolation == {"bwrap": 1, "none": 1}  # the infra_error run never ran the agent
    assert k.weak_isolation == ["none"]
    assert k.unscored_points == 2  # the same two points of task a, however many runs
    assert k.missing_runs == 1  # a/base/r2
    md = render_markdown(s)
    assert "- isolation: bwrap (1 run), none (1 run) — ⚠ not fully isolated: none" in md
    assert "- 2 key points unscored: judge not configured" in md
    assert "- ⚠ `docs/agents.md` may be loaded by some agents" in md
    assert "- ⚠ 1 planned run without a result: rerun to resume the matrix" in md


def test_full_uniform_isolation_is_stated_in_the_header_not_listed_as_a_confound() -> None:
    """Every run in bwrap is the normal case; only weak or mixed isolation is a confound."""
    uniform = summary_of([result("a", "base", 1.0, 1), result("a", "head", 1.0, 1)])
    full = render_markdown(uniform)
    assert "· isolation: bwrap ·" in full and "- isolation:" not in full
    assert "⚠ 1 confound a reader" in render_comment_markdown(uniform)  # the missing repeats only
    mixed = summary_of([result("a", "base", 1.0, 1), result("a", "head", 1.0, 1, isolation="docker-none")])
    assert mixed.confounds.isolation_confound()
    assert "- isolation: bwrap (1 run), docker-none (1 run) — ⚠ mixed" in render_markdown(mixed)
    assert "⚠ 2 confounds a reader" in render_comment_markdown(mixed)


def test_near_misses_with_one_reason_are_one_line_with_a_count() -> None:
    """A docs site's translated `agents.md` pages are one finding, not a line each."""
    runs = [result("a", "base", 1.0, 1), result("a", "head", 1.0, 1)]
    case = "differs only in case from AGENTS.md: where file names are case-insensitive ..."
    pages = [NearMiss(path=f"docs/{lang}/agents.md", reason=case) for lang in "abcdefghijkl"]
    near = [*pages, NearMiss(path="docs/copilot-instructions.md", reason="named like the instruction file")]
    md = render_markdown(summarize(manifest(["a"], ("base", "head")), detection(near), runs))
    (line,) = [x for x in md.splitlines() if "12 files" in x]
    assert line.startswith(
        "- ⚠ 12 files may be loaded by some agents although they are not instruction files"
    )
    assert "`docs/j/agents.md` and 2 more): differs only in case from AGENTS.md" in line
    assert "docs/k/agents.md" not in md
    assert "- ⚠ `docs/copilot-instructions.md` may be loaded by some agents" in md


# ---------------------------------------------------------------- rendering
def test_scorecard_header_usage_and_changed_files() -> None:
    runs = [*arm("a", "base", [0.5, 0.5], cost=0.02), *arm("a", "head", [0.75, 0.75], tokens=(1000, 234))]
    md = render_markdown(summary_of(runs))
    lines = md.splitlines()
    assert lines[0] == "## docdelta scorecard: inconclusive · head - base +0.25 (not significant)"
    assert "| base | 2 | 150 | $0.02 | $0.04 | 3 | 2.0s | 0 | 0 | 0 |" in lines
    assert "| head | 2 | 1,234 (+723%) | $0.01 (-50%) | $0.02 | 3 | 2.0s (+0%) | 0 | 0 | 0 |" in lines
    assert (
        "| **all tasks** | **0.50** | **0.75** | **+0.25 (not significant)** | 0.17 | **—** | 0/2 · 0/2 |"
        in lines
    )
    assert "- `AGENTS.md` (modified; read by codex, opencode)" in lines


def test_agent_text_cannot_break_the_markdown() -> None:
    runs = [result("a", "head", 0.0, missed=["a | b\nrm -rf `x`"])]
    md = render_markdown(summary_of(runs))
    (bullet,) = [line for line in md.splitlines() if "missed in" in line]
    assert bullet.startswith("  - a · command `` a | b rm -rf `x` `` missed in 1/1 runs")
    assert cell("x | y\nz") == "x \\| y z"
    assert code("`") == "`` ` ``"


def test_partials_render_alone_for_reuse_and_are_strict() -> None:
    """The GitHub comment renders the same partials with its own header around them."""
    env = environment()
    assert {"_table.md.j2", "_missed.md.j2", "_confounds.md.j2"} <= set(env.list_templates())
    s = summary_of([*arm("a", "base", [0.5]), *arm("a", "head", [1.0])])
    table = env.get_template("_table.md.j2").render(s=s)
    assert table.splitlines()[0] == "| task | base | head | head-base | p | head-none | at 1.0 (base/head) |"
    with pytest.raises(UndefinedError):
        env.get_template("_table.md.j2").render()


def test_json_has_the_same_numbers_and_round_trips() -> None:
    s = summary_of([*arm("a", "base", [0.5, 0.5]), *arm("a", "head", [0.54, 0.54])])
    text = render_json(s)
    data = json.loads(text)
    assert data["schema_version"] == 1
    assert data["tasks"][0]["head_vs_base"]["noise"] is True
    assert data["overall"]["head"]["mean_score"] == 0.54
    assert Summary.model_validate_json(text) == s


@pytest.mark.parametrize(
    ("isolation", "weak"),
    [
        ("bwrap", False),
        ("bwrap+host-network", True),
        ("netns+mounts", True),
        ("docker-internal", False),
        ("none", True),
        ("docker-open", True),
    ],
)
def test_isolation_values_of_the_sandboxes_are_classified(isolation: str, weak: bool) -> None:
    s = summary_of([result("a", "head", 1.0, isolation=isolation)])
    assert (s.confounds.weak_isolation == [isolation]) is weak


# ------------------------------------------------------------------ verdict
def _clear_improvement() -> list[RunResult]:
    runs: list[RunResult] = []
    for t in ("a", "b", "c"):
        runs += [*arm(t, "base", [0.0, 0.0, 0.0], tokens=(900, 100)), *arm(t, "head", [1.0, 1.0, 1.0])]
    return runs


def test_a_clear_improvement_is_called_improved_with_its_numbers() -> None:
    s = summary_of(_clear_improvement(), repeats=3)
    v = s.verdict
    assert v is not None
    assert (v.kind, v.estimate, v.exact, v.tasks, v.decided_by) == ("improved", 1.0, True, 3, ["overall"])
    # the overall mid-p: half the one most extreme of 20^3 splits; Holm over 3 tasks + overall
    assert v.p_value == pytest.approx(4 * 0.5 / 20**3)
    assert v.ci_low is not None and v.ci_high is not None and 0 < v.ci_low < v.estimate == v.ci_high == 1
    # one task alone (0/3 -> 3/3: mid-p 1/40, x3 by Holm) is not significant: no flip is sold
    assert [t.head_vs_base.flip for t in s.tasks] == [False, False, False]
    assert s.tasks[0].head_vs_base.p_value == pytest.approx(3 / 40)
    assert s.tasks[0].decision is not None and s.tasks[0].decision.kind == "inconclusive"
    assert s.overall["head"].pass_all == 1.0 and s.overall["base"].pass_all == 0.0
    md = render_markdown(s)
    assert md.splitlines()[0] == "## docdelta scorecard: improved · head - base +1.00 (significant)"
    assert (
        "**Verdict: improved** — all tasks: head - base +1.00, 90% interval [+0.53, +1.00], "
        "p < 0.001 vs alpha 0.05, decided by overall"
    ) in md
    assert "- significant flips (open these first): none: no task's pass/fail majority changed" in md
    assert "- tokens, head vs base: -850 tokens per run (Hodges-Lehmann; Mann-Whitney p < 0.001)" in md


def test_a_broken_task_fails_on_its_own_and_is_listed_as_a_flip() -> None:
    """One task of three drops 8/8 -> 0/8 while the others stay put: the task's own test
    decides, where the old overall-only verdict weighed the mean of -0.33 alone."""
    runs: list[RunResult] = []
    for t, base, head in (("a", [1.0] * 8, [0.0] * 8), ("b", [1.0, 0.0] * 4, [1.0, 0.0] * 4)):
        runs += [*arm(t, "base", base), *arm(t, "head", head)]
    runs += [*arm("c", "base", [0.0, 1.0] * 4), *arm("c", "head", [0.0, 1.0] * 4)]
    s = summary_of(runs, repeats=8)
    v = s.verdict
    assert v is not None and v.kind == "regressed" and "a" in v.decided_by
    assert [t.head_vs_base.flip for t in s.tasks] == [True, False, False]
    a = s.tasks[0].decision
    assert a is not None and a.kind == "regressed" and a.p_regressed <= 0.05
    assert v.p_value == a.p_regressed  # the p shown is the one the decision used
    md = render_markdown(s)
    assert "- significant flips (open these first): a (base 8/8 → head 0/8 at 1.0, Holm-adjusted p" in md


def test_the_power_line_is_the_cached_one_and_absent_without_a_cache() -> None:
    """The scorecard shows what the run cached (`power.json`) and computes nothing itself."""
    runs = _clear_improvement()
    assert summary_of(runs, repeats=3).power is None
    line = "power: 3 tasks, fixed 3 repeats: even a drop of 0.5 on one task is missed in over 20% of PRs"
    cached = PowerSummary(
        tasks=3, design="fixed 3 repeats", drop=None, rate=0.5, target=0.8, largest=0.5, text=line
    )
    s = summarize(manifest(["a", "b", "c"], ["base", "head"], repeats=3), detection(), runs, power=cached)
    assert f"- {line}" in render_markdown(s)


def test_identical_arms_are_no_change_only_when_the_runs_can_show_it() -> None:
    few = summary_of([*arm("a", "base", [1.0, 1.0, 1.0]), *arm("a", "head", [1.0, 1.0, 1.0])])
    # three passes a side do not rule out a 0.3 drop: the adjusted interval is wide
    assert few.verdict is not None and few.verdict.kind == "inconclusive"
    assert few.verdict.repeats_needed is not None and few.verdict.repeats_needed > 3
    many = [*arm("a", "base", [0.0, 1.0] * 30), *arm("a", "head", [1.0, 0.0] * 30)]
    same = summarize(manifest(["a"], ["base", "head"], repeats=60), detection(), many, noise=0.3)
    assert same.verdict is not None and same.verdict.kind == "no_change"
    md = render_markdown(same)
    assert md.startswith("## docdelta scorecard: no change (noise) · head - base 0.00")
    assert "none: no task's pass/fail majority changed significantly" in md


def test_one_run_per_arm_is_never_no_change() -> None:
    """1 task x 1 repeat once printed "no change" from a zero-width bootstrap."""
    runs = [*arm("a", "base", [0.33]), *arm("a", "head", [0.33])]
    s = summarize(manifest(["a"], ["base", "head"], repeats=1), detection(), runs, noise=0.5)
    assert s.verdict is not None and s.verdict.kind == "inconclusive"
    assert s.verdict.ci_low is None and "1 graded run" in s.verdict.reason
    assert "no interval and no p (too few runs per arm: no test can reject)" in render_markdown(s)


def test_infra_error_rate_counts_every_result() -> None:
    runs = [*arm("a", "base", [1.0, 1.0]), *arm("a", "head", [1.0])]
    runs.append(result("a", "head", None, 2, status=RunStatus.infra_error))
    s = summary_of(runs)
    assert s.infra_error_rate == 0.25
    assert "- infra errors: 25% of runs (excluded from scores, retried on rerun)" in render_markdown(s)


def test_usage_spreads_per_arm() -> None:
    runs = [result("a", "head", 1.0, i, tokens=(t, 0)) for i, t in enumerate([100, 200, 300, 400, 500], 1)]
    q = summary_of(runs).tasks[0].conditions["head"].spreads["tokens"]
    assert (q.low, q.q1, q.q3, q.high) == (100.0, 200.0, 400.0, 500.0)


@pytest.mark.parametrize(("agent", "flagged"), [("claude_code", True), ("codex", False), ("fake", False)])
def test_a_changed_file_the_agent_does_not_read_is_called_out(agent: str, flagged: bool) -> None:
    results = arm("t", "base", [0.5, 0.5]) + arm("t", "head", [0.5, 0.5])
    plan = manifest(["t"], ["base", "head"]).model_copy(update={"agent": AgentInfo(name=agent, version="1")})
    summary = summarize(plan, detection(), results)  # the PR edits only AGENTS.md
    assert summary.confounds.unread_changes == (["AGENTS.md"] if flagged else [])
    line = f"`AGENTS.md` changed, but `{agent}` does not read it natively"
    assert (line in render_markdown(summary)) is flagged


# ------------------------------------------------------------------ A/A noise band
def _four_tasks_each_2_of_5_to_4_of_5() -> list[RunResult]:
    runs: list[RunResult] = []
    for t in "abcd":
        runs += [*arm(t, "base", [0.0, 1.0, 0.0, 1.0, 0.0]), *arm(t, "head", [1.0, 1.0, 0.0, 1.0, 1.0])]
    return runs


def test_aa_band_marks_each_task_as_noise_but_not_the_whole_and_leaves_the_verdict_alone() -> None:
    runs = _four_tasks_each_2_of_5_to_4_of_5()
    s = summarize(
        manifest(list("abcd"), sorted({r.cell.condition for r in runs}), repeats=5),
        detection(),
        runs,
        noise=0.05,
    )
    a = s.aa_noise
    assert a is not None and (a.tasks, a.repeats, a.quantile, a.simulations) == (4, 5, 0.95, 2000)
    pools = [[0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]] * 4
    assert a.band == stats.aa_noise_band(pools, 5, seed=7)  # the manifest's seed
    assert a.band < 0.4
    # 2/5 -> 4/5 on one task is what identical docs often do; on four tasks at once it is not
    assert [t.head_vs_base.aa_noise for t in s.tasks] == [True] * 4
    assert s.head_vs_base.aa_noise is False
    assert s.head_vs_base.noise is False and s.tasks[0].head_vs_base.noise is False
    # the verdict is still `decision.decide` + configured band, as without the A/A band
    direct = decision.decide(
        decision.from_strata({t: (_scores(runs, t, "head"), _scores(runs, t, "base")) for t in "abcd"}),
        decision.Design.fixed(5),
        band=0.05,
        seed=7,
    )
    assert direct is not None and s.verdict is not None
    assert direct.kind == s.verdict.kind == "improved"
    assert (s.verdict.p_value, s.verdict.band) == (direct.p_value, 0.05)
    md = render_markdown(s)
    # each task alone is not significant (Holm-adjusted p 0.57, no flip mark); all four at once
    # decide, and the marks say exactly that: none calls a task "noise" (the A/A band is words only)
    assert "| a | 0.40 | 0.80 | +0.40 (not significant) | 0.57 | — | 2/5 · 4/5 |" in md
    assert "| **all tasks** | **0.40** | **0.80** | **+0.40 (significant)** | 0.042 |" in md
    assert md.splitlines()[0] == "## docdelta scorecard: improved · head - base +0.40 (significant)"
    assert (
        f"- A/A noise at this size: ±{a.band:.2f} — differences up to this are what identical docs "
        "produce (95% of 2,000 simulated A/A experiments of 4 tasks x 5 repeats, drawn from each task's "
        "observed scores, stay within it); head - base +0.40 lies outside it; each task's delta is held "
        "to its own, wider band. The verdict does not use this band: it stays the significance test and "
        "the configured ±0.05."
    ) in md.splitlines()


def _scores(runs: list[RunResult], task: str, condition: str) -> list[float]:
    return [r.score.value for r in runs if (r.cell.task, r.cell.condition) == (task, condition) and r.score]


def test_an_overall_delta_inside_the_aa_band_is_called_noise_in_words() -> None:
    runs = [r for r in _four_tasks_each_2_of_5_to_4_of_5() if r.cell.task != "d"]
    s = summary_of(runs, repeats=5)
    assert s.aa_noise is not None and s.head_vs_base.value is not None
    assert s.head_vs_base.aa_noise is True and abs(s.head_vs_base.value) <= s.aa_noise.band
    md = render_markdown(s)
    assert md.splitlines()[0].endswith("head - base +0.40 (not significant)")
    assert "head - base +0.40 lies inside it;" in md


def test_no_aa_band_without_a_task_in_both_arms() -> None:
    s = summary_of([*arm("a", "head", [1.0, 0.0])])
    assert s.aa_noise is None and s.head_vs_base.aa_noise is None
    assert "A/A noise" not in render_markdown(s)


# ---------------------------------------------------------------- judged points
def test_judged_point_hit_rate_per_task_and_arm_in_one_line() -> None:
    base = arm("t", "base", [1.0, 1.0], points=2)
    head = arm("t", "head", [1.0, 1.0], points=2)
    unjudged = arm("u", "base", [1.0], points=1) + arm("u", "head", [1.0], points=1)
    rulings = {
        base[0].cell.key: judged(
            base[0], ruling("point", "P1", met=True, quote="q"), ruling("point", "P2", met=False)
        ),
        base[1].cell.key: judged(base[1], ruling("point", "P1", met=False), ruling("point", "P2", met=False)),
        head[0].cell.key: judged(
            head[0], ruling("point", "P1", met=True, quote="q"), ruling("point", "P2", met=True, quote="r")
        ),
        head[1].cell.key: judged(
            head[1],
            ruling("point", "P1", met=True, quote="q"),
            ruling("point", "P2", met=True, quote="made up", supported=False),
            ruling("rule", "never force-push", met=True),
        ),
    }
    s = summary_of(with_judgements([*base, *head, *unjudged], rulings))
    t, u = s.tasks
    assert {c: (j.hits, j.rulings, j.runs) for c, j in t.judged.items()} == {
        "base": (1, 4, 2),
        "head": (4, 5, 2),  # the unsupported claim earns nothing
    }
    assert u.judged == {}
    md = render_markdown(s).splitlines()
    assert md.count("- t: base 1/4 (25%, 2 runs) · head 4/5 (80%, 2 runs)") == 1
    assert not [line for line in md if line.startswith("- u:")]
    assert any(line.startswith("**Judged key points**") for line in md)


def test_no_judged_section_when_nothing_was_judged() -> None:
    s = summary_of([*arm("t", "base", [1.0], points=2), *arm("t", "head", [1.0], points=2)])
    assert all(t.judged == {} for t in s.tasks)
    assert "Judged key points" not in render_markdown(s)


def test_the_pr_comment_adds_a_mermaid_chart_diff_links_and_folds_details() -> None:
    results = arm("t-one", "base", [0.25, 0.75]) + arm("t-one", "head", [1.0, 1.0])
    summary = summary_of(results)
    link = "https://github.com/o/r/pull/7/files#diff-abc"
    body = render_comment_markdown(summary, diff_links={"AGENTS.md": link})
    chart = body.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert 'x-axis ["t-one base", "t-one head"]' in chart
    assert "bar [0.50, 1.00]" in chart
    assert f"[`AGENTS.md`]({link})" in body
    assert body.count("<details><summary>") == body.count("</details>") >= 2
    assert "| t-one" in body  # the table stays unfolded
    assert "(" + link + ")" not in render_markdown(summary)  # the CLI scorecard has no PR links


def test_mermaid_labels_cannot_break_the_chart() -> None:
    assert mermaid_label('a "quoted" [task]\nname') == "a  quoted   task  name"


@pytest.mark.parametrize(
    ("agent", "files", "unread"),
    [
        ("opencode", {"AGENTS.md": "agents\n"}, True),  # shadowed: OpenCode takes AGENTS.md only
        ("opencode", {}, False),
        ("claude_code", {"AGENTS.md": "agents\n"}, False),
        ("codex", {"AGENTS.md": "agents\n"}, True),
        ("codex", {"AGENTS.md": Link("CLAUDE.md")}, False),  # AGENTS.md -> CLAUDE.md: Codex reads it
    ],
)
def test_unread_changes_follow_the_instruction_graph(
    tmp_path: Path, agent: str, files: dict[str, str | Link], unread: bool
) -> None:
    """The scorecard's "does not read it" comes from each side's instruction graph."""
    git = GitRepo.init(tmp_path / "proj")
    git.commit({"CLAUDE.md": "run the tests with make check\n", **files})
    head = git.commit({"CLAUDE.md": "run the tests with make test\n"})
    found = detect_refs(Repo(git.path), "HEAD~1", head, InstructionMatcher())
    results = arm("t", "base", [0.5, 0.5]) + arm("t", "head", [0.5, 0.5])
    plan = manifest(["t"], ["base", "head"]).model_copy(update={"agent": AgentInfo(name=agent, version="1")})
    assert summarize(plan, found, results).confounds.unread_changes == (["CLAUDE.md"] if unread else [])


@pytest.mark.parametrize(("claude_md", "unread"), [("@AGENTS.md\n", False), ("Be brief.\n", True)])
def test_an_agents_md_edit_that_claude_md_imports_is_not_called_unread_by_claude_code(
    tmp_path: Path, claude_md: str, unread: bool
) -> None:
    """With CLAUDE.md = `@AGENTS.md` the scorecard said "AGENTS.md changed, but
    claude_code does not read it", which is false there; without the import it is true."""
    git = GitRepo.init(tmp_path / "proj")
    git.commit({"CLAUDE.md": claude_md, "AGENTS.md": "run the tests with make check\n"})
    head = git.commit({"AGENTS.md": "run the tests with make test\n"})
    found = detect_refs(Repo(git.path), "HEAD~1", head, InstructionMatcher())
    results = arm("t", "base", [0.5, 0.5]) + arm("t", "head", [0.5, 0.5])
    plan = manifest(["t"], ["base", "head"]).model_copy(
        update={"agent": AgentInfo(name="claude_code", version="1")}
    )
    text = render_markdown(summarize(plan, found, results))
    assert ("`AGENTS.md` changed, but `claude_code` does not read it natively" in text) is unread


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("h" * 40, "every condition ran on head's code, so base's instruction files were evaluated on code"),
        ("b" * 40, "every condition ran on base's code, so head's instruction files were evaluated on code"),
    ],
)
def test_code_changed_in_the_range_is_stated_with_the_commit_that_ran(source: str, says: str) -> None:
    results = arm("t", "base", [0.5, 0.5]) + arm("t", "head", [0.5, 0.5])
    plan = manifest(["t"], ["base", "head"]).model_copy(update={"source_sha": source})
    found = detection().model_copy(update={"other_changed": [f"src/m{i}.py" for i in range(19)]})
    text = render_markdown(summarize(plan, found, results))
    assert "19 other files (code, tests, docs) changed between base and head" in text
    assert says in text
    assert "other file" not in render_markdown(summarize(plan, detection(), results))


def test_a_matrix_mostly_failed_for_the_harness_leads_with_it_and_gives_no_verdict() -> None:
    """Agent errors and timeouts score 0 in every arm: without this rule they read as a
    confident "no change" and a green check."""
    runs = [
        *arm("a", "base", [0.0, 0.0, 1.0], status=RunStatus.agent_error),
        *arm("a", "head", [0.0, 0.0, 0.0], status=RunStatus.timeout),
    ]
    s = summary_of(runs)
    assert s.verdict is None and s.faults == {"agent_error": 3, "timeout": 3}
    assert s.broken is not None and s.broken.startswith("6 of 6 runs (100%) failed")
    md = render_markdown(s).splitlines()
    assert md[0].startswith("## docdelta scorecard: no verdict")
    assert md[4].startswith("> ⚠ **This evaluation is broken, so there is no verdict.** 6 of 6 runs")
    assert "**Verdict: refused** — the evaluation is broken (see above)." in md
    decision = stats.gate(s.verdict, "never", refused=s.verdict_refused)
    assert decision.conclusion == "neutral"


def test_a_few_faults_do_not_refuse_the_verdict() -> None:
    ok = [1.0] * 7
    runs = [
        *arm("a", "base", [0.0] * 8),
        *arm("a", "head", ok),
        result("a", "head", 0.0, 8, status=RunStatus.timeout),
    ]
    s = summary_of(runs)
    assert s.faults == {"timeout": 1} and s.broken is None and s.verdict is not None


def test_a_holdout_task_counts_in_the_verdict_but_is_never_named_or_shown() -> None:
    runs = [
        *arm("seen", "head", [1, 1, 1, 1, 1]),
        *arm("seen", "base", [1, 1, 1, 1, 1]),
        *arm("hidden", "head", [1, 1, 1, 1, 1], missed=()),
        *arm("hidden", "base", [0, 0, 0, 0, 0], missed=("make check",)),
    ]
    plan = manifest(["hidden", "seen"], ("base", "head"), repeats=5).model_copy(
        update={"holdout": ["hidden"]}
    )
    summary = summarize(plan, detection(), runs)
    assert [t.task for t in summary.tasks] == ["seen"] and summary.holdout_tasks == 1
    assert summary.verdict is not None and summary.verdict.kind == "improved"
    assert "hidden" not in summary.verdict.decided_by and "a holdout task" in summary.verdict.decided_by
    assert not any(m.task == "hidden" for items in summary.missed.values() for m in items)
    text = render_markdown(summary)
    assert "hidden" not in text and "counts 1 holdout task whose own results are not shown" in text


def test_a_report_uses_the_band_the_run_was_planned_with() -> None:
    """The same runs, re-reported: the band comes from the manifest, never from a later default."""
    runs = [*arm("a", "base", [0.5] * 4), *arm("a", "head", [0.6] * 4)]
    planned = manifest(["a"], ["base", "head"], repeats=4).model_copy(update={"noise_band": 0.05})
    s = summarize(planned, detection(), runs)
    assert s.noise_band == 0.05 and s.tasks[0].head_vs_base.noise is False
    unrecorded = summarize(manifest(["a"], ["base", "head"], repeats=4), detection(), runs)
    assert unrecorded.noise_band == DEFAULT_NOISE_BAND and unrecorded.tasks[0].head_vs_base.noise is True


def test_compiled_templates_are_kept_privately_and_render_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scorecard rendered from the cached compiled templates is the one compiled afresh; an
    environment compiled differently never shares them; a directory others can write is unused."""
    monkeypatch.setenv(TEMPLATE_CACHE, str(tmp_path / "templates"))
    s = summary_of(_clear_improvement(), repeats=3)
    expected = render_markdown(s)
    env = environment()
    cache = template_cache(env)
    assert cache is not None
    for _ in range(2):  # the first writes the cache, the second reads it
        fresh = env.overlay(bytecode_cache=template_cache(env), cache_size=0)  # nothing compiled yet
        lines = lead(s, repeats_flag="--repeats {n}")
        assert (
            fresh.get_template("scorecard.md.j2").render(s=s, links={}, lead=lines, terms=SCORECARD_DOCS)
            == expected
        )
    assert list(Path(cache.directory).iterdir())
    other = template_cache(env.overlay(trim_blocks=False))
    assert other is not None and other.directory != cache.directory
    Path(cache.directory).chmod(0o777)
    assert template_cache(env) is None
