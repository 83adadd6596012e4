"""The scorecard's lead and its one vocabulary of certainty, from real result models."""

from __future__ import annotations

from factories import arm, detection, manifest, summary_of

from docdelta.agents.models import RunStatus
from docdelta.github.annotations import added_lines, line_annotations
from docdelta.github.port import AnnotationLevel, PrFile
from docdelta.instructions.models import FileStatus
from docdelta.report import render_comment_markdown, render_markdown
from docdelta.report.plain import lead
from docdelta.results.models import RunResult
from docdelta.scorecard.models import ArmUse, Certainty, ChangedLine, InstructionRef, PowerSummary
from docdelta.scorecard.summarize import summarize


def _issue_case() -> list[RunResult]:
    """The issue's demo: improved overall while no task is significant alone at 2 runs per arm."""
    runs: list[RunResult] = []
    for task, base, head in (
        ("run-tests", [0.0, 0.0], [1.0, 1.0]),
        ("force-push", [0.0, 0.0], [1.0, 1.0]),
        ("currency-sync", [0.0, 0.5], [1.0, 0.5]),
        ("install-dev", [1.0, 1.0], [1.0, 1.0]),
    ):
        runs += [*arm(task, "base", base), *arm(task, "head", head), *arm(task, "none", base)]
    return runs


def test_no_mark_contradicts_the_verdicts_basis_in_the_issues_case() -> None:
    s = summary_of(_issue_case())
    assert s.verdict is not None and s.verdict.kind == "improved" and s.verdict.decided_by == ["overall"]
    marks = {t.task: t.head_vs_base.certainty for t in s.tasks}
    # the deltas that carry the verdict are not called noise: they are not significant alone
    assert marks == {
        "currency-sync": Certainty.not_significant,
        "force-push": Certainty.not_significant,
        "install-dev": Certainty.noise_band,
        "run-tests": Certainty.not_significant,
    }
    assert s.head_vs_base.certainty is Certainty.significant  # the hypothesis that decided
    md = render_comment_markdown(s)
    visible = md.split("<details>", 1)[0]  # per-task marks are statistics: folded, never under the total
    assert "| run-tests | 0/2 → 2/2 | +1.00 |" in visible and "significant" not in visible
    assert "| run-tests | 0.00 | 1.00 | 0.00 | +1.00 (not significant) | 0.33 |" in md  # folded
    assert "A/A noise)" not in md and "(noise)" not in md
    words = lead(s).certainty
    assert words.startswith(
        "**Significant** (improved): decided by all tasks together; all tasks +0.62, 90% interval ["
    )
    assert "Holm-adjusted p = " in words
    assert words.endswith("no single task is significant on its own at 2 runs per arm.")


def test_a_task_that_decides_is_the_one_marked_significant_and_named() -> None:
    runs: list[RunResult] = []
    for t, base, head in (("a", [1.0] * 8, [0.0] * 8), ("b", [1.0, 0.0] * 4, [1.0, 0.0] * 4)):
        runs += [*arm(t, "base", base), *arm(t, "head", head)]
    s = summary_of(runs, repeats=8)
    assert s.verdict is not None and s.verdict.kind == "regressed" and "a" in s.verdict.decided_by
    assert [t.head_vs_base.certainty for t in s.tasks] == [Certainty.significant, Certainty.noise_band]
    said = lead(s)
    assert "decided by *a*" in said.certainty
    assert said.next == "**Next:** open the transcripts of *a* (linked below) before merging."
    assert "worse on 1 task: *a* 0/8 (was 8/8)" in said.changed


def test_no_change_is_said_as_the_noise_band_with_its_interval() -> None:
    runs = [*arm("a", "base", [0.0, 1.0] * 30), *arm("a", "head", [1.0, 0.0] * 30)]
    s = summarize(manifest(["a"], ["base", "head"], repeats=60), detection(), runs, noise=0.3)
    assert s.verdict is not None and s.verdict.kind == "no_change"
    said = lead(s)
    assert said.certainty.startswith("**Within the noise band:** all tasks +0.00, 90% interval [")
    assert said.next == ""  # decisive: nothing to do
    assert s.tasks[0].head_vs_base.certainty is Certainty.noise_band


def test_an_inconclusive_verdict_says_what_to_run_next_from_the_decision_and_the_power_simulation() -> None:
    runs = [*arm("a", "base", [1.0, 0.0]), *arm("a", "head", [0.0, 1.0])]
    power = PowerSummary(
        tasks=1, design="fixed 2", drop=0.4, rate=0.5, target=0.8, largest=0.5, text="power: …"
    )
    s = summary_of(runs).model_copy(update={"power": power})
    assert s.verdict is not None and s.verdict.kind == "inconclusive" and s.verdict.repeats_needed
    n = s.verdict.repeats_needed
    said = lead(s)
    assert said.certainty.startswith("**Not significant** (inconclusive)")
    assert said.next == (
        f"**Next:** rerun with `repeats: {n}`: this spread would then show no change if there is none; "
        "at 2 repeats one task has to drop by 0.4 to be caught in 80% of simulated PRs."
    )
    assert f"`--repeats {n}`" in render_markdown(s)  # the CLI's scorecard spells the flag
    one = summary_of([*arm("a", "base", [1.0]), *arm("a", "head", [1.0])], repeats=1)
    assert lead(one).next.startswith(
        "**Next:** rerun with `repeats: 2` or more: the spread of an arm needs at least 2 runs"
    )
    missed = s.model_copy(update={"power": power.model_copy(update={"drop": None})})
    assert "even a drop of 0.5 on one task is missed in over 20% of simulated PRs" in lead(missed).next


def test_cost_is_money_and_percent_when_priced_and_tokens_said_so_when_not() -> None:
    priced = [*arm("a", "base", [1.0, 1.0], cost=0.010), *arm("a", "head", [1.0, 1.0], cost=0.0126)]
    assert lead(summary_of(priced)).cost == (
        "**Cost** (medians, base → head): cost $0.010 → $0.013 per run (+26%, +$0.0026); "
        "time 2.0s → 2.0s (+0%)."
    )
    free = [
        *arm("a", "base", [1.0, 1.0], cost=None),
        *arm("a", "head", [1.0, 1.0], cost=None, tokens=(150, 39)),
    ]
    said = lead(summary_of(free)).cost
    assert "tokens 150 → 189 per run (+26%), not priced: the gateway priced none of these calls" in said
    md = render_comment_markdown(summary_of(free))
    assert "| head | 2 | 189 (+26%) | — |" in md and "the gateway priced none of that arm's calls" in md


def test_a_refused_verdict_carries_no_mark() -> None:
    runs = [*arm("a", "base", [1.0, 1.0]), *arm("a", "head", [0.0, 0.0])]
    runs += arm("a", "head", [0.0, 0.0], status=RunStatus.infra_error)
    s = summary_of(runs)
    assert s.verdict is None and s.verdict_refused
    assert s.tasks[0].head_vs_base.certainty is None and s.head_vs_base.certainty is None
    assert lead(s).certainty.startswith("**No verdict:**")


# ----------------------------------------------------------------- annotations
PATCH = (
    "@@ -1,3 +1,4 @@\n # Agents\n-Run `python setup.py test`.\n+Run `make check`.\n+See `docs/style.md`.\n \n"
)


def _ref(line: int, ref: str, head: int, base: int, p: float, change: str = "added") -> InstructionRef:
    return InstructionRef(
        kind="command", ref=ref, lines=[ChangedLine(file="AGENTS.md", line=line, change=change, text="x")],
        arms={"head": ArmUse(used=head, runs=8), "base": ArmUse(used=base, runs=8)}, p_value=p,
    )  # fmt: skip


def test_only_lines_the_prs_diff_adds_are_annotated_notice_unless_significant() -> None:
    diff = added_lines([PrFile(path="AGENTS.md", status=FileStatus.modified, patch=PATCH)])
    assert diff == {"AGENTS.md": {2, 3}}
    refs = [
        _ref(2, "make check", 8, 0, 0.0002),
        _ref(3, "docs/style.md", 0, 0, 1.0),
        _ref(9, "make lint", 8, 0, 0.0002),  # docdelta's docs diff has it, the PR's diff does not
        _ref(2, "python setup.py test", 0, 3, 0.2, change="removed"),
    ]
    notes = line_annotations(refs, diff, alpha=0.05)
    assert [(a.start_line, a.level) for a in notes] == [
        (2, AnnotationLevel.warning),
        (3, AnnotationLevel.notice),
    ]
    assert notes[0].message.startswith("`make check`: named or used in 8/8 head runs, 0/8 base runs")
    assert notes[1].message.startswith(
        "`docs/style.md`: never used in 16 runs (head and base): candidate to cut"
    )
    # Holm over all references: one 0.04 among four is not significant
    weak = [_ref(2, "make check", 4, 0, 0.04), *(_ref(3, f"r{i}", 1, 1, 1.0) for i in range(3))]
    assert {a.level for a in line_annotations(weak, diff, alpha=0.05)} == {AnnotationLevel.notice}


def test_with_report_url_each_task_row_links_straight_to_its_transcripts() -> None:
    s = summary_of(_issue_case())
    md = render_comment_markdown(
        s, report_url="https://example.test/report.html", files_url="https://example.test/pull/2/files"
    )
    assert (
        "[transcripts](https://example.test/report.html#task-run-tests) · [diff](https://example.test/pull/2/files)"
        in md
    )
    assert "[full report](https://example.test/report.html)" in md
