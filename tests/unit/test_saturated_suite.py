"""A suite in which no score can move measures nothing, so it gets no verdict.

An agent that cannot answer the tasks (the bundled grep agent on a layout it does not read)
scores 0 in every run of every condition; tasks every agent passes without any instruction
file score 1 everywhere. Either way the equivalence test, fed identical arms, would call it
a confident "no change" with a tiny p. The scorecard must instead lead with what happened
and give no verdict (a neutral gate), as `tasks audit --results` already says.
"""

from __future__ import annotations

from factories import arm, summary_of

from docdelta.report import render_comment_markdown, render_markdown
from docdelta.report.plain import next_line
from docdelta.results.models import RunResult
from docdelta.scorecard import stats

CONDITIONS = ("base", "head", "none")


def _everywhere(tasks: str, score: float, repeats: int = 12) -> list[RunResult]:
    return [r for t in tasks for c in CONDITIONS for r in arm(t, c, [score] * repeats)]


def test_every_run_at_zero_gives_no_verdict_and_says_the_agent_cannot_answer() -> None:
    s = summary_of(_everywhere("abcd", 0.0))
    assert s.verdict is None and s.verdict_vs_none is None
    assert s.saturated is not None and s.broken is None  # the harness worked: not broken
    assert "no run in any condition (base, head, none) passed any task" in s.saturated
    assert "docdelta agent-check" in s.saturated and "docdelta tasks audit" in s.saturated
    assert "docdelta suggest" in s.saturated  # or the files say nowhere what the tasks ask
    assert stats.gate(s.verdict, "regression", refused=s.verdict_refused).conclusion == "neutral"
    for md in (render_markdown(s), render_comment_markdown(s)):
        assert "no change" not in md.lower()
        assert "TOST" not in md
        assert "no run in any condition" in md
    assert "agent-check" in next_line(s)
    assert "outcome.error" not in next_line(s)


def test_every_run_at_one_gives_no_verdict_and_says_the_tasks_are_too_easy() -> None:
    s = summary_of(_everywhere("ab", 1.0))
    assert s.verdict is None and s.saturated is not None
    assert "every run in every condition (base, head, none) passed every task" in s.saturated
    assert "no change" not in render_markdown(s).lower()


def test_tasks_each_stuck_at_their_own_extreme_are_uninformative_too() -> None:
    s = summary_of([*_everywhere("a", 0.0), *_everywhere("b", 1.0)])
    assert s.verdict is None and s.saturated
    assert "every task scored the same in every run" in s.saturated


def test_passing_everywhere_without_a_none_arm_keeps_the_verdict() -> None:
    """At 1 a task can still show a drop; only passing without instruction files too (none)
    says the score never depended on them."""
    s = summary_of([r for t in "ab" for c in ("base", "head") for r in arm(t, c, [1.0] * 12)])
    assert s.saturated is None and s.broken is None and s.verdict is not None


def test_one_task_that_moves_keeps_the_verdict() -> None:
    runs = [*_everywhere("a", 0.0), *arm("b", "base", [1.0] * 12), *arm("b", "head", [0.0] * 12)]
    runs += arm("b", "none", [0.0] * 12)
    s = summary_of(runs)
    assert s.saturated is None and s.broken is None
    assert s.verdict is not None and s.verdict.kind == "regressed"


def test_a_stable_suite_off_the_extremes_can_still_show_no_change() -> None:
    runs = [r for t in "abcd" for c in CONDITIONS for r in arm(t, c, [1.0, 0.0] * 12)]
    s = summary_of(runs, repeats=24)
    assert s.saturated is None and s.broken is None
    assert s.verdict is not None and s.verdict.kind == "no_change"
