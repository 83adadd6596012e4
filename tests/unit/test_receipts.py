"""Which evaluations are receipts: an evaluation of a content is one when it reached a
verdict its `fail-on` does not fail, the call the evaluation's own check made. The receipt
check (`receipt: true`, `docdelta receipt`) and the PR comment's history line agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import arm, detection, manifest

from docdelta.scorecard.history import History, HistoryRecord, comment_section, record_of
from docdelta.scorecard.summarize import summarize
from docdelta.vocabulary import ConditionSpec

REPEATS = 3
"""docdelta-receipt.yml's repeats."""


def _record(head: list[float], base: list[float], content: str = "head-digest") -> HistoryRecord:
    """An evaluation of one task whose head arm held AGENTS.md with sha256 `content`."""
    runs = [*arm("t", "head", head), *arm("t", "base", base)]
    specs = [
        ConditionSpec(name="base", files={"AGENTS.md": "base-digest"}, overlay_sha256="base"),
        ConditionSpec(name="head", files={"AGENTS.md": content}, overlay_sha256=content),
    ]
    plan = manifest(["t"], ["base", "head"], repeats=REPEATS).model_copy(update={"conditions": specs})
    return record_of(plan, summarize(plan, detection(), runs))


def test_an_edit_that_changes_no_score_is_a_receipt_as_its_neutral_check_let_it_through(
    tmp_path: Path,
) -> None:
    """At 3 repeats an edit that keeps every score is inconclusive: a neutral check, which a
    required check lets through. A receipt check refusing it would keep the PR red however
    often that content were evaluated."""
    history = History.at(tmp_path / "history")
    history.append(_record([0, 0, 0], [1, 1, 1], content="older-digest"))  # an earlier edit, failed
    current = _record([1, 1, 1], [1, 1, 1])
    history.append(current)

    receipt = history.receipt("head-digest")
    assert receipt is not None
    (entry,) = receipt.evaluations
    assert entry.verdict is not None and entry.verdict.kind == "inconclusive"
    assert entry.gate("regression").conclusion == "neutral"
    assert receipt.passing("regression") == [entry]
    section = comment_section(
        history, [("AGENTS.md", "head-digest")], current, saved=True, policy="regression"
    )
    assert (
        "Head's content `head-digest` had no passing evaluation; this one passed: it is its receipt."
        in section
    )


@pytest.mark.parametrize(
    ("head", "base", "kind"),
    [
        ([0, 0, 0], [1, 1, 1], "regressed"),  # the check failed
        ([1, 1, 1], [], None),  # no base runs: nothing compared, no verdict
    ],
    ids=["regressed", "no-verdict"],
)
def test_an_evaluation_its_gate_failed_or_that_measured_nothing_is_no_receipt(
    tmp_path: Path, head: list[float], base: list[float], kind: str | None
) -> None:
    history = History.at(tmp_path / "history")
    history.append(_record(head, base))
    receipt = history.receipt("head-digest")
    assert receipt is not None
    (entry,) = receipt.evaluations
    assert (entry.verdict.kind if entry.verdict is not None else None) == kind
    assert receipt.passing("regression") == []
