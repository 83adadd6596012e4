"""Adaptive repeats (`--repeats auto`): run in rounds, stop each task once it is decided.

A round holds one repeat of every active task in each arm, in a seeded shuffled order.
Active are the open tasks, or only the suspects among them: after a look, a task whose
latest one-sided regression p is at most `decision.FOCUS_P` gets the rounds to its next
look to itself while the others wait (adaptive allocation: a real drop is settled on the
task that shows it instead of paying for every task's rounds meanwhile). After each look
(`decision.Design.auto`) the loop asks `decision.decide`
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
from docdelta.decision import FOCUS_P, Decision, Design, TaskRuns, decide
from docdelta.models import Cell, PooledControl, RunResult
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


def round_cells(repeats: Mapping[str, int], conditions: Sequence[str], seed: int) -> list[Cell]:
    """One round: each task's next `repeat` in every condition, shuffled by (seed, repeats) as
    `plan_order` shuffles a fixed plan."""
    cells = [Cell(task=t, condition=c, repeat=n) for t, n in repeats.items() for c in conditions]
    random.Random(f"{seed}/{sorted(repeats.items())}").shuffle(cells)
    return cells


def _active(open_tasks: Sequence[str], decision: Decision | None, rounds: Mapping[str, int]) -> list[str]:
    """The tasks the next rounds are for: the open suspects (latest one-sided regression p at
    most FOCUS_P) when there are any, else every open task. A task that waits keeps its
    runs and resumes as soon as no suspect is left; its looks come at the same run counts."""
    if decision is None:
        return list(open_tasks)
    latest = {d.task: d.p_latest for d in decision.tasks}
    suspects = [t for t in open_tasks if latest.get(t, 1.0) <= FOCUS_P]
    return suspects or list(open_tasks)


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
    simply left out of them) until the decision needs no more, or the cap.

    Between looks the active tasks (`_active`) run one round at a time up to their next
    look; then `decide` rules on everything seen. The experiment ends when a task regresses
    (the gate fails whatever the rest do), when no change is shown, when every task is
    decided, or when every open task is at the cap."""
    open_tasks = list(tasks)
    rounds = dict.fromkeys(tasks, 0)
    runs = 0
    decision: Decision | None = None
    stopped: str | None = None
    while stopped is None:
        active = [t for t in _active(open_tasks, decision, rounds) if rounds[t] < design.cap]
        if not active:
            active = [t for t in open_tasks if rounds[t] < design.cap]
        if not active:
            break
        target = {t: min(n for n in design.looks if n > rounds[t]) for t in active}
        while stopped is None and any(rounds[t] < target[t] for t in active):
            step = {t: rounds[t] + 1 for t in active if rounds[t] < target[t]}
            cells = round_cells(step, conditions, seed)
            stopped = execute(cells)
            runs += len(cells)
            rounds.update(step)
        if stopped is not None:
            break
        decision = decide(observe(), design, alpha=alpha, band=band, seed=seed)
        if decision is None:
            continue
        if decision.kind in {"regressed", "no_change"}:
            break
        open_tasks = [t for t in open_tasks if not decision.stop.get(t, False)]
    if decision is None or stopped is not None:
        decision = decide(observe(), design, alpha=alpha, band=band, seed=seed)
    return RoundsOutcome(decision, rounds, runs, design.cap * len(tasks) * len(conditions), stopped)


def run_matrix(
    runner: Runner,
    exp: Experiment,
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = stats.DEFAULT_NOISE_BAND,
    pooled: PooledControl | None = None,
) -> MatrixReport:
    """Run an experiment's plan: all of it for fixed repeats; round by round, through
    `run_rounds` and the real `Runner`, when the manifest is adaptive. The decision in the
    loop reads the graded scores as stored (judge rulings are folded in by the scorecard), and
    the pooled earlier base runs as part of the control."""
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
        return task_runs(grid, "head", "base", pooled.results if pooled else ())

    conditions = [c.name for c in m.conditions]
    run_rounds(
        sorted(m.tasks), conditions, design_of(m), execute, observe, alpha=alpha, band=band, seed=m.seed
    )
    return total
