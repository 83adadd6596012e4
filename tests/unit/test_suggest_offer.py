"""`suggest.offer`: the PR comment's folded suggestion, from a drafted patch and its measured
run. A ```suggestion block only where GitHub can hang it on a line of the PR's diff, a diff
block otherwise, and no offer at all when the patched run raised no task."""

from __future__ import annotations

from docdelta.suggest import HEADING, DraftedRule, Measured, Suggestion, _patch, offer

OLD = "# Notes\n\nBe brief.\n"
RULE = "Lint with `tox -e lint`."


def _suggestion() -> Suggestion:
    rules = [DraftedRule(task="lint", line=RULE, source="gold")]
    patch, _ = _patch("AGENTS.md", OLD, rules)
    return Suggestion(
        condition="head", file="AGENTS.md", tasks={"lint": 0.0}, rules=rules, patch=patch, patched_sha256="x"
    )


RAISED = Measured(task="lint", before=0.0, after=1.0, runs=4, p_value=0.00714, raised=True)


def test_a_patch_appended_after_a_line_of_the_diff_is_a_suggestion_block_on_that_line() -> None:
    section = offer(_suggestion(), [RAISED], diff_lines={3})
    claim = "adding this line raised lint from 0.00 to 1.00 in 4 runs, p = 0.00714"
    assert section.startswith(f"<details><summary>Suggested fix, measured: {claim}</summary>\n")
    assert "`AGENTS.md` line 3 (a review comment there with this block applies it)" in section
    # The block replaces line 3 with itself plus the added lines, as GitHub applies it.
    assert f"```suggestion\nBe brief.\n\n{HEADING}\n\n- {RULE}\n```" in section
    assert section.rstrip().endswith("</details>")


def test_lines_the_diff_does_not_show_get_a_diff_block() -> None:
    suggestion = _suggestion()
    section = offer(suggestion, [RAISED], diff_lines={1})
    assert f"```diff\n{suggestion.patch}```" in section and "```suggestion" not in section


def test_a_patched_run_that_raised_nothing_offers_nothing() -> None:
    flat = Measured(task="lint", before=0.0, after=0.25, runs=4, p_value=0.21, raised=False)
    section = offer(_suggestion(), [flat], diff_lines={3})
    assert section.startswith("<details><summary>Suggested fix: not offered, the patched run raised no task")
    assert "not shown: lint went from 0.00 to 0.25 in 4 runs (p = 0.21)" in section
    assert "```" not in section
