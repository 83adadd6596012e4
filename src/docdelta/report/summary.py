"""From stored results to the scorecard's numbers (`Summary`), which every renderer shares.

All arithmetic is delegated to `docdelta.stats`; this module only groups runs by
task and condition, decides which runs count, and collects the confounds a reader
must see before trusting a delta.

Which runs count: `infra_error` runs (and any run without a score) are our
machinery failing, so they are excluded from scores, tokens, cost and isolation
and only counted in `infra_errors`. Every other status (timeout, no_answer, ...) is
the agent's result and is graded as such.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from docdelta import stats
from docdelta.models import (
    ConditionStats,
    Confounds,
    Delta,
    Detection,
    Manifest,
    MissedItem,
    RunResult,
    RunStatus,
    Summary,
    TaskSummary,
)

BASE, HEAD, NONE = "base", "head", "none"
_CANONICAL_ORDER = (BASE, HEAD, NONE, "patched")
FULL_ISOLATION = frozenset({"netns", "netns+mounts", "docker-none", "docker-internal"})
"""Isolation values (as sandbox/local.py and sandbox/docker.py record them) that mean
"no network but the gateway"; anything else (`none`, `docker-open`, ...) is a confound."""
MAX_MISSED = 5


def _graded(run: RunResult) -> bool:
    return run.status is not RunStatus.infra_error and run.score is not None


def _scores(runs: Iterable[RunResult]) -> list[float]:
    return [r.score.value for r in runs if r.score is not None and _graded(r)]


def _tokens(run: RunResult) -> float | None:
    m = run.outcome.metrics
    return None if m.tokens_in is None or m.tokens_out is None else float(m.tokens_in + m.tokens_out)


def _present(values: Iterable[float | int | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


def _condition_stats(condition: str, runs_by_task: Mapping[str, Sequence[RunResult]]) -> ConditionStats:
    """Stats of one condition over one or more tasks (mean of per-task means, pooled medians)."""
    runs = [r for rs in runs_by_task.values() for r in rs]
    graded = [r for r in runs if _graded(r)]
    scores = _scores(graded)
    task_means = [stats.mean(_scores(rs)) for rs in runs_by_task.values()]
    costs = _present(r.outcome.metrics.cost_usd for r in graded)
    return ConditionStats(
        condition=condition,
        runs=len(graded),
        infra_errors=len(runs) - len(graded),
        mean_score=stats.mean(_present(task_means)),
        score_min=min(scores, default=None),
        score_max=max(scores, default=None),
        runs_at_1=stats.passes(scores),
        median_tokens=stats.median(_present(_tokens(r) for r in graded)),
        median_cost_usd=stats.median(costs),
        total_cost_usd=sum(costs) if costs else None,
        median_turns=stats.median(_present(r.outcome.metrics.turns for r in graded)),
        median_duration_s=stats.median([r.outcome.metrics.duration_s for r in graded]),
        statuses=dict(sorted(Counter(str(r.status) for r in runs).items())),
    )


def _delta(treatment: str, control: str, value: float | None, band: float) -> Delta:
    noise = None if value is None else stats.is_noise(value, band)
    return Delta(treatment=treatment, control=control, value=value, noise=noise)


def _task_delta(
    treatment: str, control: str, by_condition: Mapping[str, Sequence[RunResult]], band: float
) -> Delta:
    def sample(condition: str) -> stats.ArmSample:
        return stats.ArmSample(condition, tuple(_scores(by_condition.get(condition, ()))))

    return _delta(
        treatment, control, stats.compare(sample(treatment), sample(control), band=band).delta, band
    )


def _order(conditions: Iterable[str]) -> list[str]:
    names = set(conditions)
    known = [c for c in _CANONICAL_ORDER if c in names]
    return known + sorted(names - set(known))


def _missed(by_condition: Mapping[str, Sequence[RunResult]]) -> dict[str, list[MissedItem]]:
    out: dict[str, list[MissedItem]] = {}
    for condition, runs in by_condition.items():
        graded = [r for r in runs if _graded(r)]
        counts: Counter[tuple[str, str, str]] = Counter()
        notes: dict[tuple[str, str, str], str] = {}
        runs_per_task = Counter(r.cell.task for r in graded)
        for r in graded:
            for item in r.score.missed if r.score else ():
                key = (r.cell.task, item.kind, item.expected)
                counts[key] += 1
                notes.setdefault(key, item.note)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_MISSED]
        out[condition] = [
            MissedItem(task=t, kind=k, expected=e, count=n, runs=runs_per_task[t], note=notes[(t, k, e)])
            for (t, k, e), n in top
        ]
    return out


def _confounds(
    manifest: Manifest, detection: Detection, results: Sequence[RunResult], conditions: Sequence[str]
) -> Confounds:
    graded = [r for r in results if _graded(r)]
    isolation = Counter(r.isolation for r in graded)
    with_runs = {r.cell.condition for r in graded}
    done = {r.cell.key for r in results}
    unscored = {(r.cell.task, i.expected) for r in graded if r.score for i in r.score.items if i.hit is None}
    return Confounds(
        isolation=dict(sorted(isolation.items())),
        weak_isolation=sorted(set(isolation) - FULL_ISOLATION),
        near_misses=list(detection.near_misses),
        unscored_points=len(unscored),
        missing_conditions=[c for c in _order({BASE, HEAD, NONE, *conditions}) if c not in with_runs],
        missing_runs=sum(1 for cell in manifest.order if cell.key not in done),
    )


def summarize(
    manifest: Manifest,
    detection: Detection,
    results: Sequence[RunResult],
    *,
    noise: float = stats.DEFAULT_NOISE_BAND,
) -> Summary:
    """The scorecard's numbers for one experiment. Missing arms give None deltas, never a crash."""
    conditions = _order([c.name for c in manifest.conditions] + [r.cell.condition for r in results])
    grid: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        grid[r.cell.task][r.cell.condition].append(r)
    task_ids = sorted(set(manifest.tasks) | set(grid))

    tasks = []
    for t in task_ids:
        by_condition = grid[t]
        tasks.append(
            TaskSummary(
                task=t,
                conditions={c: _condition_stats(c, {t: by_condition.get(c, [])}) for c in conditions},
                head_vs_base=_task_delta(HEAD, BASE, by_condition, noise),
                head_vs_none=_task_delta(HEAD, NONE, by_condition, noise),
            )
        )
    by_condition_all: dict[str, list[RunResult]] = defaultdict(list)
    for r in results:
        by_condition_all[r.cell.condition].append(r)

    return Summary(
        repo=manifest.repo,
        base_sha=manifest.base_sha,
        head_sha=manifest.head_sha,
        source_sha=manifest.source_sha,
        agent=manifest.agent,
        repeats=manifest.repeats,
        noise_band=noise,
        conditions=conditions,
        changed=list(detection.changed),
        tasks=tasks,
        overall={c: _condition_stats(c, {t: grid[t].get(c, []) for t in task_ids}) for c in conditions},
        head_vs_base=_delta(HEAD, BASE, stats.mean_delta([t.head_vs_base.value for t in tasks]), noise),
        head_vs_none=_delta(HEAD, NONE, stats.mean_delta([t.head_vs_none.value for t in tasks]), noise),
        missed=_missed({c: by_condition_all.get(c, []) for c in conditions}),
        confounds=_confounds(manifest, detection, results, conditions),
    )
