"""Score a change task's run: hidden tests first, then the task's hard checks.

A run passes (score 1.0) only when the hidden tests pass AND every hard check holds;
failing tests score 0 whatever else the diff got right, because "touched the right
files" is not a partial fix. With passing tests, the score is the share of hard
checks that hold, so a maintainer sees which rule the agent bent.
"""

from __future__ import annotations

from docdelta.results.grades import ChecksResult, HiddenTestResult, Score, ScoreItem


def score_change(hidden: HiddenTestResult, checks: ChecksResult) -> Score:
    passed = hidden.status == "pass"
    items = [
        ScoreItem(
            kind="tests",
            expected="hidden tests pass",
            hit=passed,
            note="" if passed else ("; ".join(hidden.notes) or "the hidden tests failed"),
        ),
        *(ScoreItem(kind="check", expected=c.name, hit=c.passed, note=c.note) for c in checks.checks),
    ]
    if not passed:
        return Score(value=0.0, items=items)
    held = [c.passed for c in checks.checks]
    return Score(value=sum(held) / len(held) if held else 1.0, items=items)
