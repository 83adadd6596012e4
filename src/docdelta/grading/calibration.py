"""Calibration: measure a judge on labeled fixtures before its rulings count.

`calibrate` runs the judge (the very code path that judges runs) on every fixture of a
task and records, per class, how often it agreed with the labels. The record is keyed
to the rubric's content hash (criteria, question and the judge's system prompt) and to
the judge (provider and model), and stored in `<calibration dir>/<task id>.json`, one
record per judge; the default directory is `.docdelta/calibration/` beside
`.docdelta/tasks/`, so a project can commit it and CI need not pay to recalibrate.

`require_calibrated` is the gate `docdelta judge` passes first: a rubric whose record
is missing, was made for another rubric hash or another judge, or is below
`THRESHOLD` on either class is refused, naming the task and the class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from docdelta.atomic import atomic_write
from docdelta.errors import ConfigError, InfraError
from docdelta.grading.judge import rubric_sha256, rule_answer
from docdelta.grading.judge_api import JudgeAPI
from docdelta.grading.rubrics import FixtureSet, Rubric, load_fixtures
from docdelta.results.grades import CalibrationFile, CalibrationRecord, JudgeInfo

THRESHOLD = 0.9
"""Minimum accuracy on each class (pass-labeled and fail-labeled) separately."""
Clock = Callable[[], datetime]


def default_dirs(tasks_dir: Path) -> tuple[Path, Path]:
    """(fixtures dir, calibration dir) beside the tasks dir: `.docdelta/rubrics`, `.docdelta/calibration`."""
    return tasks_dir.parent / "rubrics", tasks_dir.parent / "calibration"


def calibration_path(calibration_dir: Path, task_id: str) -> Path:
    return calibration_dir / f"{task_id}.json"


def calibrate(
    api: JudgeAPI, rubric: Rubric, fixtures: FixtureSet, *, now: Clock = lambda: datetime.now(UTC)
) -> CalibrationRecord:
    """Judge every fixture and count agreement with its labels, pass and fail separately."""
    right = {"pass": 0, "fail": 0}
    total = {"pass": 0, "fail": 0}
    errors: list[str] = []
    for i, fixture in enumerate(fixtures.fixtures, 1):
        rulings, _ = rule_answer(api, rubric, fixture.answer)
        for ruling in rulings:
            label = fixture.labels.get(ruling.expected)
            if label is None:
                continue
            total[label] += 1
            if ruling.hit == (label == "pass"):
                right[label] += 1
                continue
            said = "credited it" if ruling.hit else "did not credit it"
            why = "" if ruling.supported else f" (quote {ruling.quote!r} is not in the answer)"
            errors.append(
                f"fixture {i}, {ruling.kind} {ruling.expected!r}: labeled {label}, the judge {said}{why}"
            )
    return CalibrationRecord(
        task=rubric.task,
        judge=api.judge,
        rubric_sha256=rubric_sha256(rubric),
        fixtures_sha256=fixtures.sha256(),
        pass_accuracy=right["pass"] / total["pass"],
        fail_accuracy=right["fail"] / total["fail"],
        pass_labels=total["pass"],
        fail_labels=total["fail"],
        errors=errors,
        calibrated_at=now(),
    )


def calibrate_tasks(
    api: JudgeAPI, rubrics: Sequence[Rubric], fixtures_dir: Path, calibration_dir: Path
) -> list[tuple[CalibrationRecord, Path]]:
    """Calibrate the judge on every rubric with criteria; all fixtures are checked before any call."""
    todo = [(r, load_fixtures(fixtures_dir, r)) for r in rubrics if not r.empty]
    saved = []
    for rubric, fixtures in todo:
        record = calibrate(api, rubric, fixtures)
        saved.append((record, save_record(calibration_dir, record)))
    return saved


def read_calibration(calibration_dir: Path, task_id: str) -> CalibrationFile | None:
    path = calibration_path(calibration_dir, task_id)
    if not path.is_file():
        return None
    try:
        return CalibrationFile.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise ConfigError(
            f"{path} is not a valid calibration file: {exc.errors()[0]['msg']}",
            hint="delete it and run `docdelta calibrate` again",
        ) from exc


def save_record(calibration_dir: Path, record: CalibrationRecord) -> Path:
    """Add or replace this judge's record in the task's calibration file (atomic write)."""
    path = calibration_path(calibration_dir, record.task)
    current = read_calibration(calibration_dir, record.task) or CalibrationFile(task=record.task)
    records = [r for r in current.records if r.judge != record.judge] + [record]
    records.sort(key=lambda r: str(r.judge))
    updated = current.model_copy(update={"records": records})
    try:
        atomic_write(path, updated.model_dump_json(indent=2).encode() + b"\n")
    except OSError as exc:
        raise InfraError(f"could not write {path}: {exc}", hint="check the directory is writable") from exc
    return path


def below_threshold(record: CalibrationRecord) -> list[str]:
    """The classes on which the judge is not good enough, described; [] when it passes."""
    out = []
    for label, accuracy, n in (
        ("pass", record.pass_accuracy, record.pass_labels),
        ("fail", record.fail_accuracy, record.fail_labels),
    ):
        if accuracy < THRESHOLD:
            out.append(f"{label}-class accuracy {accuracy:.2f} < {THRESHOLD:.2f} over {n} labels")
    return out


def calibration_problem(calibration_dir: Path, rubric: Rubric, judge: JudgeInfo) -> str | None:
    """Why this judge may not rule on this rubric, or None when its calibration holds."""
    path = calibration_path(calibration_dir, rubric.task)
    found = read_calibration(calibration_dir, rubric.task)
    if found is None or not found.records:
        return f"task {rubric.task!r}: no calibration ({path} is missing)"
    record = next((r for r in found.records if r.judge == judge), None)
    if record is None:
        others = ", ".join(str(r.judge) for r in found.records)
        return f"task {rubric.task!r}: stale calibration: {path} was made for judge {others}, not {judge}"
    current = rubric_sha256(rubric)
    if record.rubric_sha256 != current:
        return (
            f"task {rubric.task!r}: stale calibration: {path} was made for rubric "
            f"{record.rubric_sha256[:12]}, the rubric is now {current[:12]} "
            "(key points, rules or prompt changed)"
        )
    low = below_threshold(record)
    if low:
        return f"task {rubric.task!r}: judge {judge} is below the bar: {'; '.join(low)} (see {path})"
    return None


def require_calibrated(calibration_dir: Path, rubrics: Sequence[Rubric], judge: JudgeInfo) -> None:
    """Refuse the judge unless every rubric with criteria has a fresh, passing calibration."""
    problems = [p for r in rubrics if not r.empty if (p := calibration_problem(calibration_dir, r, judge))]
    if problems:
        raise ConfigError(
            f"judge {judge} is not calibrated for these rubrics:\n  " + "\n  ".join(problems),
            hint="run `docdelta calibrate --tasks DIR "
            f"--judge-model {judge.model} --provider {judge.provider}`; "
            "if a class stays below the bar, improve the fixtures or choose another judge model",
        )
