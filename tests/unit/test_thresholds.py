"""Per-task pass thresholds: the task file's fields, each arm against its bar, the rule that
fails the check (head misses where base met it), and the scorecard lines a reader sees."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import arm, detection, manifest
from pydantic import ValidationError

from docdelta.report import render_comment_markdown, render_markdown
from docdelta.results.models import RunResult
from docdelta.scorecard import stats, thresholds
from docdelta.scorecard.history import History, record_of
from docdelta.scorecard.models import Summary
from docdelta.scorecard.summarize import summarize
from docdelta.tasks.load import task_json_schema
from docdelta.tasks.models import PassThreshold, Task
from docdelta.vocabulary import ConditionSpec

BAR = PassThreshold(fraction=0.8)


def _summary(runs: list[RunResult], bars: dict[str, PassThreshold], holdout: tuple[str, ...] = ()) -> Summary:
    tasks = sorted({r.cell.task for r in runs})
    conditions = sorted({r.cell.condition for r in runs})
    plan = manifest(tasks, conditions, repeats=5).model_copy(
        update={"thresholds": bars, "holdout": list(holdout)}
    )
    return summarize(plan, detection(), runs)


def test_a_task_file_sets_its_own_bar_and_pass_k_alone_is_refused() -> None:
    task = Task.model_validate({"id": "t", "prompt": "p", "pass_threshold": 0.8, "pass_k": 3})
    assert task.threshold == PassThreshold(fraction=0.8, k=3)
    assert Task.model_validate({"id": "t", "prompt": "p"}).threshold is None
    with pytest.raises(ValidationError, match="pass_k needs pass_threshold"):
        Task.model_validate({"id": "t", "prompt": "p", "pass_k": 3})
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        Task.model_validate({"id": "t", "prompt": "p", "pass_threshold": 80})
    props = task_json_schema()["properties"]
    assert {"pass_threshold", "pass_k"} <= set(props)  # `docdelta schema task` knows them


def test_the_tasks_own_bar_wins_over_the_runs_default() -> None:
    own = Task.model_validate({"id": "a", "prompt": "p", "pass_threshold": 1.0})
    plain = Task.model_validate({"id": "b", "prompt": "p"})
    assert thresholds.effective({"a": own, "b": plain}, BAR) == {"a": PassThreshold(fraction=1.0), "b": BAR}
    assert thresholds.effective({"a": own, "b": plain}, None) == {"a": PassThreshold(fraction=1.0)}


@pytest.mark.parametrize(
    ("head", "base", "blocks"),
    [
        ([1, 1, 1, 1, 0], [1, 1, 1, 1, 1], False),  # 4/5 = 80 %: met
        ([1, 1, 1, 0, 0], [1, 1, 1, 1, 1], True),  # head below, base met: the PR's doing
        ([1, 1, 1, 0, 0], [1, 1, 0, 0, 0], False),  # base missed too: not this PR's doing
        ([1, 1, 1, 0, 0], [], True),  # no base runs: no evidence the miss was there before
    ],
)
def test_the_check_fails_only_when_head_misses_and_base_did_not(
    head: list[int], base: list[int], blocks: bool
) -> None:
    scores = {"head": [float(s) for s in head], "base": [float(s) for s in base]}
    assert thresholds.summarize(BAR, scores, gate=True).blocks is blocks


def test_pass_k_judges_the_chance_that_k_runs_all_pass() -> None:
    bar = PassThreshold(fraction=0.5, k=3)
    four_of_five = [1.0, 1.0, 1.0, 1.0, 0.0]
    got = thresholds.arm_pass(four_of_five, bar)
    assert got.value == pytest.approx(stats.pass_k(four_of_five, 3)) == pytest.approx(0.4)
    assert got.met is False  # a pass rate of 0.8 is not "3 in a row more often than not"
    assert thresholds.arm_pass([1.0, 1.0], bar).met is None  # fewer runs than k: no value


def test_the_scorecard_shows_each_arm_against_the_bar_and_names_the_blocking_task() -> None:
    runs = [*arm("t1", "head", [1, 1, 1, 1, 0]), *arm("t1", "base", [1, 1, 1, 1, 1])]
    runs += [*arm("t2", "head", [1, 0, 0, 0, 0]), *arm("t2", "base", [1, 1, 1, 1, 1])]
    s = _summary(runs, {"t1": BAR, "t2": BAR})
    assert s.threshold_failures == ["t2"]
    card = render_markdown(s)
    assert "- t1 (≥ 80 %): head 4/5 ✓, base 5/5 ✓\n" in card
    assert "- t2 (≥ 80 %): head 1/5 ✗, base 5/5 ✓ — **fails the check**\n" in card
    assert "t2 (≥ 80 %)" in render_comment_markdown(s)
    reason = thresholds.gate_reason(s)
    assert reason is not None and "t2: head 1/5 ✗ ≥ 80 %, base 5/5 ✓" in reason and "t1" not in reason


def test_thresholds_fail_the_gate_whatever_fail_on_says() -> None:
    runs = [*arm("t", "head", [0, 0, 0, 0, 0]), *arm("t", "base", [1, 1, 1, 1, 1])]
    s = _summary(runs, {"t": BAR})
    passing = stats.GateDecision("neutral", "inconclusive: few runs (fail-on: never)")
    got = thresholds.with_thresholds(passing, s)
    assert got.conclusion == "failure" and got.reason.startswith("pass threshold missed by head")
    none_set = _summary(runs, {})
    assert thresholds.with_thresholds(passing, none_set) == passing
    assert "Pass thresholds" not in render_markdown(none_set)


def test_a_holdout_task_never_blocks_and_is_never_named() -> None:
    runs = [*arm("secret", "head", [0, 0, 0, 0, 0]), *arm("secret", "base", [1, 1, 1, 1, 1])]
    runs += [*arm("shown", "head", [1, 1, 1, 1, 1]), *arm("shown", "base", [1, 1, 1, 1, 1])]
    s = _summary(runs, {"secret": BAR, "shown": BAR}, holdout=("secret",))
    assert s.threshold_failures == []
    assert "secret" not in render_markdown(s)


def test_an_evaluation_a_threshold_failed_is_no_receipt_for_its_head_content(tmp_path: Path) -> None:
    """`receipt: true` merge gating must not pass a content whose check the bar failed: here
    the verdict is `improved` (task a), the bar of task b is missed."""
    runs = [*arm("a", "head", [1, 1, 1, 1, 1]), *arm("a", "base", [0, 0, 0, 0, 0])]
    runs += [*arm("b", "head", [1, 1, 1, 1, 0]), *arm("b", "base", [1, 1, 1, 1, 1])]
    s = _summary(runs, {"b": PassThreshold(fraction=1.0)})
    assert stats.gate(s.verdict, "regression").conclusion == "success"  # the verdict alone passes
    specs = [
        ConditionSpec(name=c, files={"AGENTS.md": f"{c}-digest"}, overlay_sha256=c) for c in ("base", "head")
    ]
    plan = manifest(["a", "b"], ["base", "head"], repeats=5).model_copy(update={"conditions": specs})
    history = History.at(tmp_path / "history")
    history.append(record_of(plan, s))
    receipt = history.receipt("head-digest")
    assert receipt is not None and len(receipt.evaluations) == 1
    assert receipt.passing("regression", "AGENTS.md") == []
    reason = receipt.evaluations[0].gate("regression").reason
    assert reason.startswith("pass threshold missed by head where base met it: b; verdict: improved")
