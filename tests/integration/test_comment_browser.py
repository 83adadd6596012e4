"""The posted comment as a reader first sees it: rendered as GitHub renders a comment, folds
collapsed, at a PR comment's width, in a real headless Chromium. The screenshot is kept in
the test's output directory for review."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import arm, summary_of
from ghrender import look

from docdelta.github.comment import render_comment
from docdelta.report import render_comment_markdown
from docdelta.report.plain import SCORECARD_DOCS
from docdelta.results.models import RunResult
from docdelta.scorecard.models import Summary

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

STATISTICS_WORDS = ("Holm", "hypothes", "look", "noise band", "significant", "interval", "alpha", "p =")
"""Statistics vocabulary: folded, never in the collapsed view."""
COLLAPSED_HEIGHT = 700
"""Pixels: the collapsed comment fits in one laptop screen beside GitHub's own chrome."""
PASSED = {"t1": (22, 22), "t2": (18, 19), "t3": (20, 11), "t4": (24, 24), "t5": (21, 12), "t6": (15, 16)}
"""Runs passed of 24 (base, head) per task: t3 and t5 dropped, the rest did not move."""


def _passed(k: int, n: int = 24) -> list[float]:
    return [1.0] * k + [0.0] * (n - k)


def _two_of_eight_dropped() -> Summary:
    runs: list[RunResult] = []
    for t, (base, head) in {**PASSED, "t7": (23, 23), "t8": (12, 12)}.items():
        runs += arm(t, "base", _passed(base), cost=0.010)
        runs += arm(t, "head", _passed(head), cost=0.012)
        runs += arm(t, "none", _passed(base // 2))
    return summary_of(runs, repeats=24)


def test_the_collapsed_comment_reads_verdict_change_sureness_cost_and_next_without_statistics(
    tmp_path: Path,
) -> None:
    summary = _two_of_eight_dropped()
    body = render_comment("docdelta", render_comment_markdown(summary), full_report_url="https://x.test")
    (tmp_path / "comment.md").write_text(body)

    seen = look(body, tmp_path / "comment.png")

    lines = seen.text.splitlines()
    assert lines[0] == "docdelta scorecard: regressed"
    assert (
        "2 of 8 tasks got worse with AGENTS.md (runs passed, base → head): "
        "t3 20/24 → 11/24, t5 21/24 → 12/24; 6 unchanged." in seen.text
    )
    assert "How sure: confident" in seen.text
    assert "Cost (medians, base → head): cost $0.010 → $0.012 per run" in seen.text
    assert "Next: open the transcripts of t3 and t5" in seen.text
    assert not [w for w in STATISTICS_WORDS if w.lower() in seen.text.lower()]
    assert "How sure: the statistics and the design (what the terms mean)" in seen.text  # a closed fold
    assert seen.height < COLLAPSED_HEIGHT
    assert SCORECARD_DOCS in body
