"""Trigger rates: how often each arm loaded an on-demand file, for prompts that should load it
and for near misses that should not (`grading.trigger` records each run's evidence).

A description edit moves both rates: a sharper description may be picked up for fewer of
the prompts it is for as well as for fewer near misses. So both are reported per file, base
-> head, with the statistics scores get: the mean over tasks of the per-task difference
(every prompt weighs the same, whatever its surviving runs), a stratified bootstrap interval
of it, and a Fisher exact test of the pooled counts. Runs without evidence are counted
apart, never as loaded or not.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from docdelta.agents.models import RunStatus
from docdelta.results.models import RunResult
from docdelta.scorecard import stats
from docdelta.scorecard.models import TriggerArm, TriggerRate
from docdelta.vocabulary import BASE, HEAD


def rates(results: Sequence[RunResult], conditions: Sequence[str], *, seed: int = 0) -> list[TriggerRate]:
    """One row per (file, should_load) of the trigger tasks that ran, files in path order,
    prompts that should load the file first."""
    grid: dict[tuple[str, bool], dict[str, dict[str, list[bool | None]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for run in results:
        found = run.trigger
        if found is None or run.status is RunStatus.infra_error:
            continue
        grid[(found.file, found.should_load)][run.cell.task][run.cell.condition].append(found.loaded)
    rows = []
    for (file, should), by_task in sorted(grid.items(), key=lambda kv: (kv[0][0], not kv[0][1])):
        arms = {c: _arm([x for task in by_task.values() for x in task.get(c, [])]) for c in conditions}
        strata = [
            (
                [float(x) for x in task.get(HEAD, []) if x is not None],
                [float(x) for x in task.get(BASE, []) if x is not None],
            )
            for task in by_task.values()
        ]
        interval = stats.bootstrap_interval(strata, seed=seed)
        head, base = arms.get(HEAD), arms.get(BASE)
        rows.append(
            TriggerRate(
                file=file,
                should_load=should,
                tasks=len(by_task),
                arms={c: a for c, a in arms.items() if a.runs or a.no_evidence},
                delta=stats.stratified_delta(strata),
                ci_low=None if interval is None else interval[0],
                ci_high=None if interval is None else interval[1],
                confidence=stats.DEFAULT_CONFIDENCE,
                p_value=None
                if head is None or base is None or not (head.runs and base.runs)
                else stats.fisher_two_sided(
                    head.loaded, head.runs - head.loaded, base.loaded, base.runs - base.loaded
                ),
            )
        )
    return rows


def _arm(loaded: Sequence[bool | None]) -> TriggerArm:
    known = [x for x in loaded if x is not None]
    return TriggerArm(loaded=sum(known), runs=len(known), no_evidence=len(loaded) - len(known))
