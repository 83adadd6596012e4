"""A PR whose docs make the agent fail in head cannot turn a failing check neutral.

More than a quarter of failed runs makes the evaluation "broken" (no verdict, a `neutral`
check, which GitHub lets pass as a required check). When the agent's own failures
(agent_error, timeout) concentrate in head, they are the result: head regressed. Failures
that hit both arms alike, and the harness's own (infra errors), still give no verdict.
"""

from __future__ import annotations

from factories import arm, result, summary_of

from docdelta.agents.models import RunStatus
from docdelta.report import render_markdown
from docdelta.results.models import RunResult
from docdelta.scorecard import stats


def _conclusion(runs: list[RunResult]) -> str:
    s = summary_of(runs)
    return stats.gate(s.verdict, "regression", refused=s.verdict_refused).conclusion


def test_agent_failing_only_in_head_fails_the_check() -> None:
    runs = [
        *arm("a", "head", [0.0] * 4, status=RunStatus.agent_error),
        *arm("a", "base", [1.0] * 4),
        *arm("a", "none", [1.0] * 4),
    ]
    s = summary_of(runs)
    assert s.broken is None
    assert s.verdict is not None and s.verdict.kind == "regressed"
    assert "4 of 4 head runs against 0 of 4 base runs" in s.verdict.reason
    assert _conclusion(runs) == "failure"
    assert "regressed" in render_markdown(s).splitlines()[0]


def test_timeouts_in_head_count_as_the_arm_s_failures() -> None:
    runs = [
        *arm("a", "head", [0.0] * 4, status=RunStatus.timeout),
        *arm("b", "head", [0.0] * 4, status=RunStatus.timeout),
        *arm("a", "base", [0.5] * 4),
        *arm("b", "base", [0.5] * 4),
    ]
    assert _conclusion(runs) == "failure"


def test_failures_in_both_arms_alike_stay_neutral() -> None:
    runs = [
        *[result("a", c, 0.0, r, status=RunStatus.agent_error) for c in ("head", "base") for r in (1, 2)],
        *[result("a", c, 1.0, r) for c in ("head", "base") for r in (3, 4)],
    ]
    s = summary_of(runs)
    assert s.broken is not None and s.verdict is None
    assert _conclusion(runs) == "neutral"


def test_infra_errors_in_head_are_the_harness_s_and_stay_neutral() -> None:
    runs = [
        *[result("a", "head", None, r, status=RunStatus.infra_error) for r in (1, 2, 3, 4)],
        *[result("a", "head", 1.0, r) for r in (5, 6)],
        *arm("a", "base", [1.0] * 4),
    ]
    s = summary_of(runs)
    assert s.verdict is None
    assert _conclusion(runs) == "neutral"


def test_a_broken_evaluation_quotes_the_most_common_error_of_its_failed_runs() -> None:
    """The cause of a matrix of failures belongs on the scorecard, not only in a result.json."""
    error = "no JSON object in the agent's output; python3: can't open file '/x/agent.py': [Errno 2]"
    failed = [*arm("a", "head", [0.0] * 3, status=RunStatus.agent_error)]
    failed += arm("a", "base", [0.0] * 3, status=RunStatus.agent_error)
    runs = [r.model_copy(update={"outcome": r.outcome.model_copy(update={"error": error})}) for r in failed]
    runs += arm("a", "base", [0.0], status=RunStatus.timeout)
    s = summary_of(runs)
    assert s.broken is not None and s.verdict is None
    assert f'The most common error (6 of 7 failed runs): "{error}"' in s.broken
    assert "can't open file" in render_markdown(s)
