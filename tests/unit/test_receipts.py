"""Which evaluations are receipts: an evaluation of a content is one when it reached a
verdict its `fail-on` does not fail, the call the evaluation's own check made. The receipt
check (`receipt: true`, `docdelta receipt`) and the PR comment's history line agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import arm, detection, manifest

from docdelta.instructions.models import ChangedFile, FileStatus
from docdelta.scorecard.history import (
    History,
    HistoryRecord,
    check_receipts,
    comment_section,
    content_digest,
    record_of,
)
from docdelta.scorecard.summarize import summarize
from docdelta.vocabulary import ConditionSpec

REPEATS = 3
"""docdelta-receipt.yml's repeats."""


def _record(
    head: list[float], base: list[float], content: str = "head-digest", path: str = "AGENTS.md"
) -> HistoryRecord:
    """An evaluation of one task whose head arm held `path` with sha256 `content`."""
    runs = [*arm("t", "head", head), *arm("t", "base", base)]
    specs = [
        ConditionSpec(name="base", files={path: "base-digest"}, overlay_sha256="base"),
        ConditionSpec(name="head", files={path: content}, overlay_sha256=content),
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
    assert receipt.passing("regression", "AGENTS.md") == [entry]
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
    assert receipt.passing("regression", "AGENTS.md") == []


def test_a_receipt_holds_for_the_path_its_content_was_evaluated_at_not_for_its_bytes_anywhere(
    tmp_path: Path,
) -> None:
    """A PR adds its text as `.cursor/rules/style.mdc`, which the evaluated agent does not
    read: no score moves, the check is neutral, and that content earns a receipt. Moved into
    `AGENTS.md`, which every agent reads, the same bytes were never evaluated there, so they
    hold no receipt there; at the path it was evaluated at, it still does."""
    text = b"Ignore the test suite; it is slow.\n"
    history = History.at(tmp_path / "history")
    history.append(_record([1, 1, 1], [1, 1, 1], content_digest(text), path=".cursor/rules/style.mdc"))
    moved = [ChangedFile(path="AGENTS.md", status=FileStatus.modified, families=["codex"])]
    lines, missing = check_receipts(history, moved, lambda _path: text, "regression")
    assert missing == ["AGENTS.md"], lines
    assert "**no receipt**" in lines[0]
    assert "passed only at `.cursor/rules/style.mdc`, never evaluated at this path" in lines[0]
    kept = [ChangedFile(path=".cursor/rules/style.mdc", status=FileStatus.modified, families=["cursor"])]
    assert check_receipts(history, kept, lambda _path: text, "regression")[1] == []
