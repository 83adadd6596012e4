"""Factories of real result models for the report tests: runs, manifests, detections, summaries.

Shared by test_report.py and test_badge.py (tests/ is on pytest's pythonpath), so
both build their summaries exactly the way `docdelta report` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from docdelta.agents.models import AgentMetrics, AgentOutcome, RunStatus
from docdelta.instructions.models import ChangedFile, Detection, FileStatus, NearMiss
from docdelta.results.grades import JudgeInfo, JudgeRuling, Score, ScoreItem
from docdelta.results.models import AgentInfo, Cell, JudgedResult, Manifest, RunResult
from docdelta.scorecard.models import Summary
from docdelta.scorecard.summarize import summarize
from docdelta.vocabulary import ConditionSpec

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def result(
    task: str,
    condition: str,
    score: float | None,
    repeat: int = 1,
    *,
    status: RunStatus = RunStatus.ok,
    tokens: tuple[int, int] | None = (100, 50),
    cost: float | None = 0.01,
    turns: int | None = 3,
    duration: float = 2.0,
    isolation: str = "bwrap",
    missed: Sequence[str] = (),
    points: int = 0,
) -> RunResult:
    items = [ScoreItem(kind="command", expected=m, hit=False, note=f"never gave `{m}`") for m in missed]
    items += [ScoreItem(kind="point", expected=f"p{i}", hit=None) for i in range(points)]
    metrics = AgentMetrics(
        tokens_in=tokens[0] if tokens else None,
        tokens_out=tokens[1] if tokens else None,
        cost_usd=cost,
        turns=turns,
        duration_s=duration,
    )
    return RunResult(
        cell=Cell(task=task, condition=condition, repeat=repeat),
        status=status,
        outcome=AgentOutcome(agent="fake", agent_version="1", status=status, metrics=metrics),
        score=None if score is None else Score(value=score, items=items),
        isolation=isolation,
        seed=1,
        started_at=T0,
        finished_at=T0,
        task_sha256="t",
        overlay_sha256="o",
        tree_sha256="x",
    )


def manifest(
    tasks: Sequence[str],
    conditions: Sequence[str] = ("base", "head", "none"),
    repeats: int = 2,
    noise_band: float | None = None,
) -> Manifest:
    return Manifest(
        noise_band=noise_band,
        repo="demo",
        base_sha="b" * 40,
        head_sha="h" * 40,
        source_sha="s" * 40,
        source_tree_sha256="tree",
        conditions=[ConditionSpec(name=c, files={}, overlay_sha256=c) for c in conditions],
        tasks={t: "sha" for t in tasks},
        agent=AgentInfo(name="fake", version="1"),
        sandbox="local",
        seed=7,
        repeats=repeats,
        order=[
            Cell(task=t, condition=c, repeat=r)
            for t in tasks
            for c in conditions
            for r in range(1, repeats + 1)
        ],
        created_at=T0,
    )


def detection(near_misses: Sequence[NearMiss] = ()) -> Detection:
    changed = [ChangedFile(path="AGENTS.md", status=FileStatus.modified, families=["codex", "opencode"])]
    return Detection(base="main", head="pr", changed=changed, near_misses=list(near_misses))


def arm(task: str, condition: str, scores: Sequence[float], **kw: object) -> list[RunResult]:
    return [result(task, condition, s, i, **kw) for i, s in enumerate(scores, 1)]  # type: ignore[arg-type]


def summary_of(results: Sequence[RunResult], tasks: Sequence[str] | None = None, **kw: object) -> Summary:
    ids = tasks if tasks is not None else sorted({r.cell.task for r in results})
    conditions = sorted({r.cell.condition for r in results})
    return summarize(manifest(ids, conditions, **kw), detection(), results)  # type: ignore[arg-type]


def judged(run: RunResult, *rulings: JudgeRuling) -> JudgedResult:
    """A judged.json for `run`, as `docdelta judge` would write it."""
    return JudgedResult(
        cell=run.cell,
        judge=JudgeInfo(provider="openai", model="judge-model"),
        rubric_sha256="rubric",
        answer_sha256="answer",
        rulings=list(rulings),
        judged_at=T0,
    )


def ruling(
    kind: Literal["point", "rule"], expected: str, *, met: bool, quote: str = "", supported: bool = True
) -> JudgeRuling:
    """A ruling whose hit follows the judge's rule: credit only for a met, supported claim."""
    return JudgeRuling(
        kind=kind,
        expected=expected,
        met=met,
        quote=quote,
        supported=supported,
        hit=met and supported,
    )
