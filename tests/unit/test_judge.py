"""The judge's rules that need no model: the quote rule, scoring, rubric identity, fixtures, gates."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest
from factories import detection, manifest, result

from docdelta.errors import ConfigError, InfraError, TaskError
from docdelta.grading.calibration import calibration_problem, save_record
from docdelta.grading.judge import parse_rulings, quote_found, rubric_sha256
from docdelta.grading.judged import apply_judgement, refuse_same_model, with_judgements
from docdelta.grading.rubrics import Rubric, load_fixtures, rubric_of
from docdelta.results.grades import CalibrationRecord, JudgeInfo, Score, ScoreItem
from docdelta.results.models import AgentInfo, JudgedResult
from docdelta.scorecard.summarize import summarize
from docdelta.tasks.load import load_tasks
from docdelta.tasks.models import Gold, MistakeRule, Task

POINT = "fix a bad commit on main with a revert pull request"
RULE = "never recommend force-pushing to main"
TASK = Task(
    id="force-push",
    prompt="Is it OK to force-push to main?",
    gold=Gold(
        verdict="no",
        points=[POINT],
        mistakes=[
            MistakeRule(id="no-force", pattern="push --force", description=RULE),
            MistakeRule(id="silent", pattern="rm -rf"),  # no description: not for the judge
        ],
    ),
)
RUBRIC = rubric_of(TASK)
ANSWER = "No.  Never force-push;\nfix the bad commit with a revert pull request instead."
JUDGE = JudgeInfo(provider="openai", model="judge-model")
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def reply(*rulings: Mapping[str, object]) -> str:
    return "Here you go:\n```json\n" + json.dumps({"rulings": list(rulings)}) + "\n```"


def test_quote_must_stand_verbatim_up_to_whitespace() -> None:
    assert quote_found("fix the bad commit with a revert   pull request", ANSWER)
    assert quote_found("No. Never force-push; fix the bad", ANSWER)  # across the line break
    assert not quote_found("fix the bad commit with a revert PR", ANSWER)  # paraphrase
    assert not quote_found("Fix the bad commit", ANSWER)  # case counts
    assert not quote_found("   ", ANSWER)


def test_a_point_is_credited_only_with_a_quote_found_in_the_answer() -> None:
    real = parse_rulings(RUBRIC, reply({"id": "P1", "met": True, "quote": "a revert pull request"}), ANSWER)
    made_up = parse_rulings(
        RUBRIC, reply({"id": "P1", "met": True, "quote": "open a revert PR against main"}), ANSWER
    )
    unquoted = parse_rulings(RUBRIC, reply({"id": "P1", "met": True}), ANSWER)
    assert [real[0].hit, real[0].supported] == [True, True]
    assert [made_up[0].hit, made_up[0].supported, made_up[0].met] == [False, False, True]
    assert [unquoted[0].hit, unquoted[0].supported] == [False, False]


def test_rules_are_respected_unless_broken_and_a_break_needs_a_quote() -> None:
    broken = "Yes: run git push --force."
    rulings = parse_rulings(
        RUBRIC,
        reply({"id": "P1", "met": False}, {"id": "R1", "met": False, "quote": "git push --force"}),
        broken,
    )
    assert [(r.kind, r.hit, r.supported) for r in rulings] == [("point", False, True), ("rule", False, True)]
    respected = parse_rulings(RUBRIC, reply({"id": "R1", "met": True}), ANSWER)
    assert respected[1].hit and respected[1].supported
    unbacked = parse_rulings(RUBRIC, reply({"id": "R1", "met": False, "quote": "push --force now"}), ANSWER)
    assert not unbacked[1].hit and not unbacked[1].supported


def test_a_skipped_criterion_is_a_miss_and_a_reply_without_rulings_is_an_infra_error() -> None:
    skipped = parse_rulings(RUBRIC, reply({"id": "R1", "met": True}), ANSWER)
    assert skipped[0].expected == POINT and not skipped[0].hit and not skipped[0].supported
    with pytest.raises(InfraError, match=r"force-push.*rulings"):
        parse_rulings(RUBRIC, "I think the answer is good.", ANSWER)


def test_the_rubric_hash_follows_points_rules_and_question_only() -> None:
    same = rubric_of(TASK.model_copy(update={"reviewed": True}))
    changed_point = Rubric(RUBRIC.task, RUBRIC.question, (RUBRIC.criteria[0].__class__("point", "other"),))
    changed_question = Rubric(RUBRIC.task, "Can I force-push?", RUBRIC.criteria)
    assert rubric_sha256(same) == rubric_sha256(RUBRIC)
    assert rubric_sha256(changed_point) != rubric_sha256(RUBRIC)
    assert rubric_sha256(changed_question) != rubric_sha256(RUBRIC)
    assert [c.text for c in RUBRIC.criteria] == [POINT, RULE]


def test_same_model_judge_is_refused_whatever_the_spelling() -> None:
    with pytest.raises(ConfigError, match="agent's own model") as exc:
        refuse_same_model(AgentInfo(name="openai", version="1", model="openai/Judge-Model"), JUDGE)
    assert exc.value.hint
    refuse_same_model(AgentInfo(name="openai", version="1", model="gpt-agent"), JUDGE)
    refuse_same_model(AgentInfo(name="fake", version="1"), JUDGE)


def _judged(task: str, condition: str, *rulings: tuple[str, str, bool]) -> JudgedResult:
    raw = [{"id": cid, "met": met, "quote": "revert pull request" if met else ""} for cid, _, met in rulings]
    parsed = parse_rulings(RUBRIC, reply(*raw), ANSWER)
    return JudgedResult(
        cell=result(task, condition, 1.0).cell,
        judge=JUDGE,
        rubric_sha256=rubric_sha256(RUBRIC),
        answer_sha256="a",
        rulings=parsed,
        judged_at=T0,
    )


def test_judgement_replaces_unscored_points_and_rescores() -> None:
    score = Score(
        value=1.0,
        items=[
            ScoreItem(kind="verdict", expected="no", hit=True),
            ScoreItem(kind="point", expected="an old point", hit=None),
        ],
    )
    judged = _judged("force-push", "head", ("P1", POINT, False), ("R1", RULE, True))
    folded = apply_judgement(score, judged)
    assert [(i.kind, i.expected, i.hit) for i in folded.items] == [
        ("verdict", "no", True),
        ("point", POINT, False),
        ("rule", RULE, True),
    ]
    assert folded.value == pytest.approx(2 / 3)
    assert "judge: not made" in folded.items[1].note


def test_the_summary_counts_judged_points_instead_of_leaving_them_unscored() -> None:
    runs = [result("t", "head", 1.0, points=1), result("t", "base", 1.0, points=1)]
    judged = {"t/head/r1": _judged("t", "head", ("P1", POINT, True), ("R1", RULE, True))}
    before = summarize(manifest(["t"], ("base", "head"), repeats=1), detection(), runs)
    after = summarize(
        manifest(["t"], ("base", "head"), repeats=1), detection(), with_judgements(runs, judged)
    )
    assert before.confounds.unscored_points == 1
    assert after.tasks[0].conditions["head"].mean_score == 1.0
    # unjudged key points only: nothing was measured, so the base arm has no score at all
    assert after.tasks[0].conditions["base"].mean_score is None and after.unmeasured == []
    assert before.unmeasured == ["t"] and before.tasks[0].conditions["head"].mean_score is None
    missed_judged = _judged("t", "head", ("P1", POINT, False), ("R1", RULE, True))
    low = summarize(
        manifest(["t"], ("base", "head"), repeats=1),
        detection(),
        with_judgements(runs, {"t/head/r1": missed_judged}),
    )
    assert low.tasks[0].conditions["head"].mean_score == pytest.approx(0.5)
    assert [m.expected for m in low.missed["head"]] == [POINT]


def _write_fixtures(tmp_path: Path, text: str) -> Path:
    (tmp_path / "force-push.yaml").write_text(text)
    return tmp_path


def test_fixtures_must_label_real_criteria_in_both_classes(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="no labeled fixtures"):
        load_fixtures(tmp_path, RUBRIC)
    _write_fixtures(tmp_path, "task: force-push\nfixtures:\n- answer: x\n  labels: {'a typo': pass}\n")
    with pytest.raises(TaskError, match="'a typo', which is not a key point or rule") as exc:
        load_fixtures(tmp_path, RUBRIC)
    assert POINT in exc.value.hint
    one_sided = (
        f"task: force-push\nfixtures:\n- answer: x\n  labels: {{'{POINT}': pass, '{RULE}': pass}}\n"
        f"- answer: y\n  labels: {{'{RULE}': fail}}\n"
    )
    _write_fixtures(tmp_path, one_sided)
    with pytest.raises(TaskError, match=f"point '{POINT}' has no fixture labeled 'fail'"):
        load_fixtures(tmp_path, RUBRIC)


def _record(pass_accuracy: float, fail_accuracy: float, judge: JudgeInfo = JUDGE) -> CalibrationRecord:
    return CalibrationRecord(
        task="force-push",
        judge=judge,
        rubric_sha256=rubric_sha256(RUBRIC),
        fixtures_sha256="f",
        pass_accuracy=pass_accuracy,
        fail_accuracy=fail_accuracy,
        pass_labels=10,
        fail_labels=10,
        calibrated_at=T0,
    )


def test_calibration_gate_names_the_task_and_the_failing_class(tmp_path: Path) -> None:
    assert "is missing" in str(calibration_problem(tmp_path, RUBRIC, JUDGE))
    save_record(tmp_path, _record(1.0, 0.8))
    problem = str(calibration_problem(tmp_path, RUBRIC, JUDGE))
    assert "'force-push'" in problem and "fail-class accuracy 0.80 < 0.90" in problem
    assert "pass-class" not in problem
    save_record(tmp_path, _record(0.9, 0.9))
    assert calibration_problem(tmp_path, RUBRIC, JUDGE) is None
    other = JudgeInfo(provider="anthropic", model="judge-model")
    assert "stale calibration" in str(calibration_problem(tmp_path, RUBRIC, other))
    save_record(tmp_path, _record(0.5, 1.0, other))  # a second judge's record does not replace the first
    assert calibration_problem(tmp_path, RUBRIC, JUDGE) is None
    assert "pass-class accuracy 0.50" in str(calibration_problem(tmp_path, RUBRIC, other))
    edited = Rubric(RUBRIC.task, RUBRIC.question, RUBRIC.criteria[:1])
    assert "stale calibration" in str(calibration_problem(tmp_path, edited, JUDGE))


def test_the_demo_ships_valid_fixtures_for_every_key_point() -> None:
    demo = Path(__file__).parents[2] / "examples" / "demo"
    for loaded in load_tasks(demo / "repo" / ".docdelta" / "tasks"):
        rubric = rubric_of(loaded.task)
        fixtures = load_fixtures(demo / "rubrics", rubric)
        labeled = {text for f in fixtures.fixtures for text in f.labels}
        assert labeled == {c.text for c in rubric.criteria}, loaded.task.id
