"""Rubrics: what the judge rules on for one task, and the labeled fixtures that calibrate it.

A task's rubric is its key points (`gold.points`: what a good answer must say) and its
rules (`gold.mistakes` that carry a `description`: "never do X", in words a judge can
apply to an answer). Deterministic items (commands, files, citations, ...) stay with
`grading.answer`; the judge only sees what a regex cannot decide.

Fixtures live in one YAML file per task, `<fixtures dir>/<task id>.yaml` (by default
`.docdelta/rubrics/` beside `.docdelta/tasks/`, which the sealed checkout strips)::

    task: force-push
    fixtures:
      - answer: "No. Revert the commit in a pull request instead."
        labels:
          fix a bad commit on main with a revert pull request: pass
      - answer: "No, never force-push."
        labels:
          fix a bad commit on main with a revert pull request: fail

Every criterion needs at least one `pass` and one `fail` label, so calibration measures
both ways a judge can be wrong: crediting what is missing and missing what is there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from docdelta.config import load_model
from docdelta.errors import TaskError
from docdelta.tasks.models import Task
from docdelta.vocabulary import Frozen, sha256_hex

CriterionKind = Literal["point", "rule"]
Label = Literal["pass", "fail"]
_FIXTURE_HINT = (
    "a fixtures file is {task: <id>, fixtures: [{answer: <text>, "
    "labels: {<key point or rule>: pass|fail}}]}; "
    "see docdelta.grading.rubrics"
)


@dataclass(frozen=True)
class Criterion:
    kind: CriterionKind
    text: str


@dataclass(frozen=True)
class Rubric:
    """What the judge is asked about one task's answers."""

    task: str
    question: str
    criteria: tuple[Criterion, ...]

    @property
    def empty(self) -> bool:
        return not self.criteria


def rubric_of(task: Task) -> Rubric:
    points = [Criterion("point", p) for p in task.gold.points]
    rules = [Criterion("rule", m.description) for m in task.gold.mistakes if m.description.strip()]
    return Rubric(task=task.id, question=task.prompt, criteria=tuple(points + rules))


class Fixture(Frozen):
    answer: str = Field(min_length=1, description="an answer text, as an agent might give it")
    labels: dict[str, Label] = Field(min_length=1, description="key point or rule -> pass | fail")
    note: str = Field(default="", description="why the labels are what they are, for reviewers")


class FixtureSet(Frozen):
    task: str
    fixtures: list[Fixture] = Field(min_length=1)

    def sha256(self) -> str:
        """Of the content, not the file's bytes: reformatting YAML does not invalidate a calibration."""
        return sha256_hex(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode())


def fixtures_path(fixtures_dir: Path, task_id: str) -> Path:
    return fixtures_dir / f"{task_id}.yaml"


def load_fixtures(fixtures_dir: Path, rubric: Rubric) -> FixtureSet:
    """The task's fixtures, checked against its rubric: labels name real criteria, and every
    criterion is labeled at least once `pass` and once `fail`."""
    path = fixtures_path(fixtures_dir, rubric.task)
    if not path.is_file():
        raise TaskError(
            f"task {rubric.task!r} has key points or rules but no labeled fixtures at {path}",
            hint="write pass and fail example answers for each of them there; " + _FIXTURE_HINT,
        )
    fixtures = load_model(
        path.read_text(encoding="utf-8"), FixtureSet, source=str(path), error=TaskError, hint=_FIXTURE_HINT
    )
    if fixtures.task != rubric.task:
        raise TaskError(
            f"{path}: field 'task' is {fixtures.task!r}, but the file is for task {rubric.task!r}",
            hint="name the file after the task it labels",
        )
    known = {c.text for c in rubric.criteria}
    for i, fixture in enumerate(fixtures.fixtures):
        for text in fixture.labels:
            if text not in known:
                raise TaskError(
                    f"{path}: fixtures[{i}] labels {text!r}, which is not a key point or rule of "
                    f"task {rubric.task!r}",
                    hint="label exactly these: " + "; ".join(repr(t) for t in sorted(known)),
                )
    for criterion in rubric.criteria:
        given = {f.labels[criterion.text] for f in fixtures.fixtures if criterion.text in f.labels}
        for label in ("pass", "fail"):
            if label not in given:
                raise TaskError(
                    f"{path}: {criterion.kind} {criterion.text!r} has no fixture labeled {label!r}",
                    hint=f"add an example answer that should {label} it, so both classes are measured",
                )
    return fixtures
