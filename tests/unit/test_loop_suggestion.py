"""The suggestion's place on the PR (`loop_comment.place`) and the scorecard's section
(`offer`): a ```suggestion block only where GitHub can hang it on lines of one hunk of the
PR's diff, a diff block otherwise, and no offer at all when the patched run raised no task."""

from __future__ import annotations

import difflib

from docdelta.action.suggest_loop import NOT_IN_DIFF, Placed, Proven, offer, place
from docdelta.github.port import ReviewAnchor
from docdelta.improve.suggest import HEADING, DraftedRule, Measured, Suggestion, _patch

OLD = "# Notes\n\nBe brief.\n"
RULE = "Lint with `tox -e lint`."
RAISED = Measured(task="lint", before=0.0, after=1.0, runs=4, p_value=0.00714, raised=True)


def _suggestion(patch: str | None = None, rules: tuple[str, ...] = (RULE,)) -> Suggestion:
    drafted = [DraftedRule(task="lint", line=r, source="gold") for r in rules]
    patch = patch if patch is not None else _patch("AGENTS.md", OLD, drafted)[0]
    return Suggestion(
        condition="head",
        file="AGENTS.md",
        tasks={"lint": 0.0},
        rules=drafted,
        patch=patch,
        patched_sha256="x",
    )


def _diff(old: str, new: str) -> str:
    """`git diff`'s text of the change, with its marker for a last line without a newline."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), "a/AGENTS.md", "b/AGENTS.md"
    )
    marked = (ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines)
    return "diff --git a/AGENTS.md b/AGENTS.md\n" + "".join(marked)


def test_a_patch_appended_after_a_line_of_the_diff_is_a_suggestion_block_on_that_line() -> None:
    placed = place(_suggestion(), [frozenset({2, 3})])
    assert placed == Placed(
        anchor=ReviewAnchor(path="AGENTS.md", line=3), replacement=f"Be brief.\n\n{HEADING}\n\n- {RULE}\n"
    )
    section = offer(Proven(_suggestion(), [RAISED]), placed)
    claim = "adding this line raised lint from 0.00 to 1.00 in 4 runs, p = 0.00714"
    assert section.startswith(f"<details><summary>Suggested fix, measured: {claim}</summary>\n")
    assert "`AGENTS.md` line 3 (a review comment there with this block applies it)" in section
    # The block replaces line 3 with itself plus the added lines, as GitHub applies it.
    assert f"```suggestion\nBe brief.\n\n{HEADING}\n\n- {RULE}\n```" in section
    assert section.rstrip().endswith("</details>")


def test_lines_the_diff_does_not_show_get_a_diff_block_and_the_reason() -> None:
    suggestion = _suggestion()
    assert place(suggestion, [frozenset({1})]) is None
    section = offer(Proven(suggestion, [RAISED]), None, NOT_IN_DIFF)
    assert f"```diff\n{suggestion.patch}```" in section and "```suggestion" not in section
    assert NOT_IN_DIFF in section


def test_a_patch_rewriting_lines_is_a_multi_line_suggestion_within_one_hunk() -> None:
    old = "".join(f"{n}\n" for n in range(1, 11))
    new = old.replace("4\n5\n6\n", "four\nfive and a half\n")
    suggestion = _suggestion(_diff(old, new))

    placed = place(suggestion, [frozenset(range(1, 9))])

    assert placed is not None
    assert (placed.anchor.start_line, placed.anchor.line) == (4, 6)
    assert placed.replacement == "four\nfive and a half\n" and placed.where == "`AGENTS.md` lines 4-6"
    # GitHub wants both ends in the same hunk of the PR's diff.
    assert place(suggestion, [frozenset({1, 2, 3, 4}), frozenset({6, 7, 8})]) is None


def test_an_addition_at_the_top_of_a_file_hangs_on_the_line_after_it() -> None:
    suggestion = _suggestion(_diff(OLD, "<!-- generated -->\n" + OLD))
    placed = place(suggestion, [frozenset({1, 2})])
    assert placed == Placed(
        anchor=ReviewAnchor(path="AGENTS.md", line=1), replacement="<!-- generated -->\n# Notes\n"
    )


def test_a_new_file_or_a_patch_of_two_hunks_has_no_place() -> None:
    assert (
        place(_suggestion(_patch("AGENTS.md", "", [DraftedRule(task="t", line=RULE, source="gold")])[0]), [])
        is None
    )
    old = "".join(f"{n}\n" for n in range(1, 30))
    two = old.replace("2\n", "two\n").replace("27\n", "twenty-seven\n")
    assert place(_suggestion(_diff(old, two)), [frozenset(range(1, 30))]) is None


def test_a_file_without_a_final_newline_gives_a_block_of_whole_lines_and_no_diff_marker() -> None:
    suggestion = _suggestion(_diff("# Notes\nBe brief.", "# Notes\nBe brief!"))
    assert "\\ No newline at end of file" in suggestion.patch
    placed = place(suggestion, [frozenset({1, 2})])
    assert placed == Placed(anchor=ReviewAnchor(path="AGENTS.md", line=2), replacement="Be brief!\n")


def test_a_rule_holding_backticks_gets_a_longer_fence() -> None:
    rule = "Quote commands as ```sh blocks."
    suggestion = _suggestion(
        _patch("AGENTS.md", OLD, [DraftedRule(task="lint", line=rule, source="gold")])[0], (rule,)
    )
    section = offer(Proven(suggestion, [RAISED]), place(suggestion, [frozenset({3})]))
    assert f"````suggestion\nBe brief.\n\n{HEADING}\n\n- {rule}\n````" in section


def test_a_patched_run_that_raised_nothing_offers_nothing() -> None:
    flat = Measured(task="lint", before=0.0, after=0.25, runs=4, p_value=0.21, raised=False)
    section = offer(Proven(_suggestion(), [flat]), None)
    assert section.startswith("<details><summary>Suggested fix: not offered, the patched run raised no task")
    assert "not shown: lint went from 0.00 to 0.25 in 4 runs (p = 0.21)" in section
    assert "```" not in section
