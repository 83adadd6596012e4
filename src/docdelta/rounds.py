"""Adaptive repeats (`--repeats auto`): run in rounds, stop each task once it is decided.

A round holds one repeat of every still-open task in each arm, in a seeded shuffled
order. After each scheduled look (`decision.Design.auto`) the loop asks `decision.decide`
— the very function the scorecard and the check use — and stops a task as soon as it is
decided (a significant change, or equivalence inside the band), the whole experiment as
soon as a task regresses (the gate fails whatever the other tasks do) or every task is
decided, and otherwise adds rounds up to the cap. The decision's error rates hold however
this loop chooses to stop (see `docdelta.decision`), which is what makes stopping early
safe.

The loop only knows two callables: `execute(cells)` runs one round of cells (the real
`Runner.run`, or the simulated agents of `docdelta.power`) and `observe()` reads back the
graded scores, so the CLI and the bench run one and the same loop.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from docdelta import stats
from docdelta.decision import Decision, Design, TaskRuns, decide
from docdelta.models import Cell, RunResult
from docdelta.planning import Experiment
from docdelta.report.summary import design_of, task_runs
from docdelta.runner import MatrixReport, Runner

Execute = Callable[[list[Cell]], str | None]
"""Runs one round of cells; returns why the run had to stop (spend cap, rate limit) or None."""
Observe = Callable[[], Mapping[str, TaskRuns]]


@dataclass(frozen=True)
class RoundsOutcome:
    decision: Decision | None
    rounds: dict[str, int]
    """Per task: the rounds (repeats per arm) it ran."""
    runs: int
    """Runs executed in all arms."""
    fixed_runs: int
    """Runs a fixed design at the cap would have taken."""
    stopped: str | None = None


def round_cells(tasks: Sequence[str], conditions: Sequence[str], repeat: int, seed: int) -> list[Cell]:
    """One round: each (task, condition) once, shuffled by (seed, repeat) as `plan_order` does."""
    cells = [Cell(task=t, condition=c, repeat=repeat) for t in tasks for c in conditions]
    random.Random(f"{seed}/{repeat}").shuffle(cells)
    return cells


def run_rounds(
    tasks: Sequence[str],
    conditions: Sequence[str],
    design: Design,
    execute: Execute,
    observe: Observe,
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = stats.DEFAULT_NOISE_BAND,
    seed: int = 0,
) -> RoundsOutcome:
    """Run rounds of `conditions` (every arm this PR pays for; a pooled control arm is
    simply left out of them) until the decision needs no more, or the cap."""
    open_tasks = list(tasks)
    rounds = dict.fromkeys(tasks, 0)
    runs = 0
    decision: Decision | None = None
    stopped: str | None = None
    looks = set(design.looks)
    for repeat in range(1, design.cap + 1):
        cells = round_cells(open_tasks, conditions, repeat, seed)
        stopped = execute(cells)
        runs += len(cells)
        for t in open_tasks:
            rounds[t] = repeat
        if stopped is not None:
            break
        if repeat not in looks:
            continue
        decision = decide(observe(), design, alpha=alpha, band=band, seed=seed)
        if decision is None:
            continue
        if decision.kind in {"regressed", "no_change"}:
            break
        open_tasks = [t for t in open_tasks if not decision.stop.get(t, False)]
        if not open_tasks:
            break
    if decision is None or stopped is not None:
        decision = decide(observe(), design, alpha=alpha, band=band, seed=seed)
    return RoundsOutcome(decision, rounds, runs, design.cap * len(tasks) * len(conditions), stopped)


def run_matrix(
    runner: Runner,
    exp: Experiment,
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = stats.DEFAULT_NOISE_BAND,
) -> MatrixReport:
    """Run an experiment's plan: all of it for fixed repeats; round by round, through
    `run_rounds` and the real `Runner`, when the manifest is adaptive. The decision in the
    loop reads the graded scores as stored (judge rulings are folded in by the scorecard)."""
    m = exp.manifest
    if not m.adaptive:
        return runner.run(exp)
    total = MatrixReport()

    def execute(cells: list[Cell]) -> str | None:
        part = runner.run(exp, cells)
        total.ran += part.ran
        total.reused += part.reused
        total.results.extend(part.results)
        total.stopped = part.stopped
        return part.stopped

    def observe() -> Mapping[str, TaskRuns]:
        grid: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
        for r in total.results:
            grid[r.cell.task][r.cell.condition].append(r)
        return task_runs(grid, "head", "base")

    conditions = [c.name for c in m.conditions]
    run_rounds(
        sorted(m.tasks), conditions, design_of(m), execute, observe, alpha=alpha, band=band, seed=m.seed
    )
    return total
