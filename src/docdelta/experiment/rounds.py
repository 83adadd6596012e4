"""Run an experiment's plan: all of it at once for fixed repeats, or round by round through
the sequential design (`docdelta.scorecard.sequential.run_rounds`) with the real runner when
the manifest is adaptive."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from docdelta.experiment.plan import Experiment
from docdelta.experiment.runner import MatrixReport, Runner
from docdelta.results.models import Cell, RunResult
from docdelta.scorecard import stats
from docdelta.scorecard.decision import TaskRuns
from docdelta.scorecard.models import PooledControl
from docdelta.scorecard.sequential import run_rounds
from docdelta.scorecard.summarize import design_of, task_runs
from docdelta.vocabulary import DEFAULT_NOISE_BAND


def run_matrix(
    runner: Runner,
    exp: Experiment,
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
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

    conditions = [c.name for c in m.conditions if c.name not in m.pooled_only]
    run_rounds(
        sorted(m.tasks), conditions, design_of(m), execute, observe, alpha=alpha, band=band, seed=m.seed
    )
    return total
