"""A change task's pass that only its test runner's report vouches for is named as a confound.

docdelta's pytest guard checks that pytest's own test-running code was not replaced; for
other runners (and a task's declared report) the runner's report is all the evidence, which
code under test can fake in its own process. The scorecard says so next to the delta.
"""

from __future__ import annotations

from factories import arm, summary_of

from docdelta.report import render_markdown
from docdelta.results.grades import HiddenTestResult
from docdelta.results.models import RunResult
from docdelta.tasks.models import RunnerKind


def _passed(runs: list[RunResult], *, guarded: bool) -> list[RunResult]:
    hidden = HiddenTestResult(status="pass", exit_code=0, runner=RunnerKind.go_test, guarded=guarded)
    return [r.model_copy(update={"hidden_tests": hidden}) for r in runs]


def test_a_pass_without_the_guard_is_a_confound() -> None:
    runs = _passed([*arm("fix-add", "head", [1.0, 1.0]), *arm("fix-add", "base", [1.0, 0.0])], guarded=False)
    s = summary_of(runs)
    assert s.confounds.unguarded == ["fix-add"]
    assert "change task `fix-add` passed on its test runner's own report" in render_markdown(s)


def test_a_guarded_pass_is_not() -> None:
    runs = _passed([*arm("fix-add", "head", [1.0, 1.0]), *arm("fix-add", "base", [1.0, 0.0])], guarded=True)
    s = summary_of(runs)
    assert s.confounds.unguarded == []
    assert "own report" not in render_markdown(s)
