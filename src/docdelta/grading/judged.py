"""judged.json: judge a workdir's finished runs, keep the rulings, fold them into scores.

Judging never reruns an agent: it reads each `result.json`, asks the judge about the
answer and writes `judged.json` beside it (atomically). A run whose judged.json was
made by the same judge, on the same rubric hash and the same answer text is reused,
so `docdelta judge` is as resumable as `docdelta run`; changing a task's key points
(or the judge) re-judges only what changed. The judge must be another model than the
agent's (a model grading itself is the bias we are trying to measure around) and must
hold a passing calibration for every rubric (see `calibration`).

`load_judged` and `apply_judgement` are the report's hook: the judge's rulings replace
the unscored key points in a run's `Score`, and rules are added, before the summary is
computed, so the scorecard's means, flips and missed items include them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from docdelta.agents.models import RunStatus
from docdelta.atomic import atomic_write
from docdelta.errors import ConfigError, InfraError, TaskError
from docdelta.grading.calibration import require_calibrated
from docdelta.grading.judge import no_answer_rulings, rubric_sha256, rule_answer
from docdelta.grading.judge_api import JudgeAPI
from docdelta.grading.rubrics import Rubric, rubric_of
from docdelta.results.grades import JudgeInfo, JudgeRuling, Score, ScoreItem
from docdelta.results.layout import JUDGED_FILE
from docdelta.results.models import AgentInfo, JudgedResult, RunResult
from docdelta.results.store import ResultStore
from docdelta.tasks.models import Task
from docdelta.vocabulary import sha256_hex

Clock = Callable[[], datetime]


def _model_name(model: str) -> str:
    """`openai/gpt-4o` and `GPT-4o` name the same model."""
    return model.rsplit("/", 1)[-1].strip().lower()


def refuse_same_model(agent: AgentInfo, judge: JudgeInfo) -> None:
    if agent.model is not None and _model_name(agent.model) == _model_name(judge.model):
        raise ConfigError(
            f"the judge model {judge.model!r} is the agent's own model (manifest.json agent.model "
            f"{agent.model!r}); a model grading its own answers is biased toward them",
            hint="pass a different --judge-model",
        )


def answer_text(result: RunResult) -> str | None:
    """What the judge reads and quotes must come from: the answer and the commands it gives."""
    answer = result.outcome.answer
    if answer is None:
        return None
    parts = [answer.answer.strip()]
    if answer.commands:
        parts.append("Commands:\n" + "\n".join(answer.commands))
    text = "\n\n".join(p for p in parts if p)
    return text or None


@dataclass(frozen=True)
class JudgeReport:
    judged: int
    reused: int
    skipped: int
    """Runs with no score (infra errors) or whose task has nothing for the judge."""


def read_judged(path: Path) -> JudgedResult | None:
    """The judged.json at `path`; an unreadable one is treated as absent and judged again."""
    try:
        return JudgedResult.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def _rubrics(tasks: Sequence[Task], results: Sequence[RunResult], store: ResultStore) -> dict[str, Rubric]:
    by_id = {t.id: rubric_of(t) for t in tasks}
    unknown = sorted({r.cell.task for r in results} - set(by_id))
    if unknown:
        raise TaskError(
            f"{store.workdir} holds runs of task(s) {', '.join(unknown)}, which the task directory lacks",
            hint="pass the --tasks directory the runs were made with",
        )
    return by_id


def judge_workdir(
    store: ResultStore,
    tasks: Sequence[Task],
    api: JudgeAPI,
    calibration_dir: Path,
    *,
    now: Clock = lambda: datetime.now(UTC),
) -> JudgeReport:
    """Judge every graded run of the workdir's experiment; refusals come before any call."""
    manifest = store.read_manifest()
    if manifest is None:
        raise ConfigError(
            f"{store.workdir} holds no docdelta experiment (manifest.json missing)",
            hint="pass the --workdir you gave to `docdelta run`",
        )
    judge = api.judge
    refuse_same_model(manifest.agent, judge)
    results = store.results(manifest.repo)
    rubrics = _rubrics(tasks, results, store)
    require_calibrated(calibration_dir, [rubrics[t] for t in sorted({r.cell.task for r in results})], judge)
    hashes = {task: rubric_sha256(rubric) for task, rubric in rubrics.items()}

    judged = reused = skipped = 0
    for result in results:
        rubric = rubrics[result.cell.task]
        if result.score is None or result.status is RunStatus.infra_error or rubric.empty:
            skipped += 1
            continue
        path = store.cell_dir(manifest.repo, result.cell) / JUDGED_FILE
        text = answer_text(result)
        answer_sha = sha256_hex((text or "").encode())
        previous = read_judged(path) if path.exists() else None
        if (
            previous is not None
            and previous.judge == judge
            and previous.rubric_sha256 == hashes[result.cell.task]
            and previous.answer_sha256 == answer_sha
        ):
            reused += 1
            continue
        tokens: tuple[int | None, int | None] = (None, None)
        if text is None:
            rulings = no_answer_rulings(rubric)
        else:
            rulings, reply = rule_answer(api, rubric, text)
            tokens = (reply.tokens_in, reply.tokens_out)
        record = JudgedResult(
            cell=result.cell,
            judge=judge,
            rubric_sha256=hashes[result.cell.task],
            answer_sha256=answer_sha,
            rulings=rulings,
            tokens_in=tokens[0],
            tokens_out=tokens[1],
            judged_at=now(),
        )
        try:
            atomic_write(path, record.model_dump_json(indent=2).encode() + b"\n")
        except OSError as exc:
            raise InfraError(f"could not write {path}: {exc}", hint="check free disk space") from exc
        judged += 1
    return JudgeReport(judged=judged, reused=reused, skipped=skipped)


def load_judged(store: ResultStore, repo: str) -> dict[str, JudgedResult]:
    """Every readable judged.json of the repo's runs, by cell key (`task/condition/rN`)."""
    found = sorted(store.runs_dir(repo).glob(f"*/*/r*/{JUDGED_FILE}"))
    return {j.cell.key: j for p in found if (j := read_judged(p)) is not None}


def _note(ruling: JudgeRuling) -> str:
    if not ruling.supported:
        shown = f"quote {ruling.quote!r} is not in the answer" if ruling.quote else "no quote given"
        return f"judge: unsupported ruling ({shown})"
    if ruling.kind == "point":
        return (
            f"judge: made, quoting {ruling.quote!r}"
            if ruling.hit
            else f"judge: not made. {ruling.reason}".strip()
        )
    return "judge: respected" if ruling.hit else f"judge: broken, quoting {ruling.quote!r}"


def apply_judgement(score: Score, judged: JudgedResult) -> Score:
    """The score with the judge's rulings in place of its key points (and its rules added).

    The value is recomputed the way `grading.answer` computes it: hits over scored items.
    """
    kept = [i for i in score.items if i.kind not in ("point", "rule")]
    ruled = [ScoreItem(kind=r.kind, expected=r.expected, hit=r.hit, note=_note(r)) for r in judged.rulings]
    items = kept + ruled
    scored = [i for i in items if i.hit is not None]
    value = sum(1 for i in scored if i.hit) / len(scored) if scored else score.value
    return Score(value=value, items=items)


def with_judgements(results: Sequence[RunResult], judged: Mapping[str, JudgedResult]) -> list[RunResult]:
    """Results whose scores include the judge's rulings where a judged.json exists."""
    return [
        r.model_copy(update={"score": apply_judgement(r.score, judged[r.cell.key])})
        if r.score is not None and r.cell.key in judged
        else r
        for r in results
    ]
