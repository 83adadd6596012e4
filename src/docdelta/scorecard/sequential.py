"""The sequential design (`--repeats auto`): run in rounds, stop each task once it is decided.

A round holds one repeat of a task in each arm, in a seeded shuffled order. Every task runs
to the first look together; after it the budget goes to the most suspect open task that can
still regress, one round at a time (`_next_batch`): the one whose runs so far give the
smallest one-sided regression p. A real drop is settled on the task that shows it while the
others wait, and a task that stops looking suspect hands the next round to another. Once no
task can regress any more (futility closed it, or it is at the cap), the others run on to
the cap only while no change is still within reach there; otherwise the PR ends
inconclusive, without paying for every task's cap. Whenever a task reaches
one of its looks (`decision.Design.auto`) the loop asks `decision.decide` — the very
function the scorecard and the check use — and stops a task as soon as it is decided (a
significant change, or equivalence inside the band), the whole experiment as soon as a task
regresses (the gate fails whatever the other tasks do) or no change is shown, and otherwise
runs on up to the cap. Decisions are taken only at a task's looks, on its first n rounds, so
the allocation may read anything: the decision's error rates hold however this loop
chooses which task runs or when it stops (see `docdelta.scorecard.decision`).

The loop only knows two callables: `execute(cells)` runs one batch of cells (the real
`Runner.run` through `docdelta.experiment.rounds`, or the simulated agents of
`docdelta.scorecard.power`) and `observe()` reads back the graded scores, so the CLI and the
bench run one and the same loop.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from docdelta.results.models import Cell
from docdelta.scorecard import stats
from docdelta.scorecard.decision import Decision, Design, TaskRuns, decide
from docdelta.vocabulary import DEFAULT_NOISE_BAND

FOCUS_STEP = 1
"""Rounds the most suspect task runs before the suspects are ranked again. One round (two
runs) costs parallelism under --jobs but runs: on bench/bench_gate.py's drop, 65 runs per PR
against 70 with three rounds and 76 with a whole look at a time, at the same power (measured
before the stricter futility and the early stop)."""
SUSPICION_RESAMPLES = 200
SUSPICION_MAX_EXACT = 500
"""A task's suspicion enumerates its null only up to this many possible deltas (pass/fail
scores have a few dozen), else it samples SUSPICION_RESAMPLES shuffles (partial scores, where
every split is distinct and enumerating 10 + 10 runs takes 184,756 subsets): it only ranks
tasks for the next round, so a coarse p will do; the decisions keep their own counts."""
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


def _suspicion(runs: TaskRuns) -> tuple[float, int]:
    """How strongly a task's runs so far point to a regression: its one-sided regression mid-p
    on all of them (1 without runs in both arms), then its rounds (fewer first). Only the
    allocation reads it; decisions are taken at looks alone."""
    test = stats.directional_test(
        [runs.upto(runs.rounds)], resamples=SUSPICION_RESAMPLES, max_exact=SUSPICION_MAX_EXACT
    )
    return (1.0 if test is None else test.lower), runs.rounds


def _next_batch(
    open_tasks: Sequence[str],
    rounds: Mapping[str, int],
    design: Design,
    observe: Observe,
    last: Decision | None,
) -> dict[str, int]:
    """Rounds to run next, as task -> the round to reach: every open task to the first look
    together; after it, the most suspect open task (`_suspicion`) alone, FOCUS_STEP rounds or to
    its next look, whichever comes first, among those that can still regress (`last`, the
    latest decision, says which). Once none can, the rest run on only while no change is
    still within reach at the cap (`Decision.no_change_reachable`): a PR whose drop was missed
    does not pay for every task's cap. Empty when nothing is left to run."""
    behind = {t: design.looks[0] for t in open_tasks if rounds[t] < design.looks[0]}
    if behind:
        return behind
    below = [t for t in open_tasks if rounds[t] < design.cap]
    if last is not None:
        can = {d.task for d in last.tasks if d.can_regress}
        suspects = [t for t in below if t in can]
        below = suspects or (below if last.no_change_reachable else [])
    if not below:
        return {}
    seen = observe()
    focus = min(below, key=lambda t: (*_suspicion(seen[t]), t) if t in seen else (1.0, rounds[t], t))
    look = min(n for n in design.looks if n > rounds[focus])
    return {focus: min(look, rounds[focus] + FOCUS_STEP)}


def run_rounds(
    tasks: Sequence[str],
    conditions: Sequence[str],
    design: Design,
    execute: Execute,
    observe: Observe,
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
    seed: int = 0,
) -> RoundsOutcome:
    """Run rounds of `conditions` (every arm this PR pays for; a pooled control arm is
    simply left out of them) until the decision needs no more, or the cap.

    `_next_batch` says which tasks run next; whenever a task reaches one of its looks,
    `decide` rules on everything seen. The experiment ends when a task regresses (the gate
    fails whatever the rest do), when no change is shown, when every task is decided, when
    no task can regress and no change is out of reach, or when every open task is at the cap."""
    open_tasks = list(tasks)
    rounds = dict.fromkeys(tasks, 0)
    runs = 0
    decision: Decision | None = None
    stopped: str | None = None
    while stopped is None:
        batch = _next_batch(open_tasks, rounds, design, observe, decision)
        if not batch:
            break
        while stopped is None and any(rounds[t] < n for t, n in batch.items()):
            step = {t: rounds[t] + 1 for t, n in batch.items() if rounds[t] < n}
            cells = round_cells(step, conditions, seed)
            stopped = execute(cells)
            runs += len(cells)
            rounds.update(step)
        if stopped is not None or not any(rounds[t] in design.looks for t in batch):
            continue
        decision = decide(observe(), design, alpha=alpha, band=band, seed=seed)
        if decision is None:
            continue
        if decision.kind in {"regressed", "no_change"}:
            break
        open_tasks = [t for t in open_tasks if not decision.stop.get(t, False)]
    if decision is None or stopped is not None:
        decision = decide(observe(), design, alpha=alpha, band=band, seed=seed)
    return RoundsOutcome(decision, rounds, runs, design.cap * len(tasks) * len(conditions), stopped)
