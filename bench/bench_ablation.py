"""Does the fractional factorial find the sections that matter, at what cost, against one at
a time? A simulated agent whose pass rate on a task drops from `--p-kept` to `--p-removed`
when the one section carrying that task is removed (other sections do nothing); each design
is analysed by `docdelta.improve.ablation.analyse`, the code `docdelta ablate` runs. Prints the runs
ratio, the rate at which each carrying section is found lowering its task (recall), and the
rate at which an idle section is flagged as moving a task (false positives), with Wilson 95%
intervals over `--trials` simulated ablations. Goal: <= 50% of one at a time's runs
at a recall and false-positive rate no worse than one at a time's.

    python bench/bench_ablation.py [--units 6] [--carrying 3] [--repeats 4] [--trials 100]
"""

from __future__ import annotations

import argparse
import math
import random
from datetime import UTC, datetime

from docdelta.agents.models import AgentMetrics, AgentOutcome, RunStatus
from docdelta.improve.ablation import Design, Section, analyse, make_plan, single_runs
from docdelta.results.grades import Score
from docdelta.results.models import Cell, RunResult

SMOKE_ARGS = ["--trials", "2"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _run(task: str, condition: str, repeat: int, score: float, tokens: int) -> RunResult:
    metrics = AgentMetrics(tokens_in=tokens, tokens_out=50, turns=2)
    return RunResult(
        cell=Cell(task=task, condition=condition, repeat=repeat),
        status=RunStatus.ok,
        outcome=AgentOutcome(agent="sim", agent_version="1", status=RunStatus.ok, metrics=metrics),
        score=Score(value=score, items=[]),
        isolation="sim",
        seed=0,
        started_at=T0,
        finished_at=T0,
        task_sha256="t",
        overlay_sha256="o",
        tree_sha256="x",
    )


def wilson(hits: int, n: int) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    z, p = 1.96, hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def simulate(design: Design, args: argparse.Namespace, seed: int) -> tuple[int, int, int, int, int]:
    """(runs, carrying sections found, carrying total, idle sections flagged, idle total)."""
    rng = random.Random(seed)
    sections = [Section(name=f"s{k}", start=k + 1, end=k + 1, chars=400) for k in range(args.units)]
    tasks = [f"t{k}" for k in range(args.carrying)] + ["control"]
    plan = make_plan(args.units, args.repeats, len(tasks), design)
    results = []
    for row in plan.rows:
        for t_index, task in enumerate(tasks):
            carried = t_index < args.carrying and t_index in row.removed
            p = args.p_removed if carried else args.p_kept
            tokens = 1000 - 100 * len(row.removed)
            for repeat in range(1, plan.repeats + 1):
                results.append(_run(task, row.condition, repeat, float(rng.random() < p), tokens))
    reports = analyse(sections, plan, results, seed=seed)
    found = sum(f"t{k}" in reports[k].lowers for k in range(args.carrying))
    idle = sum(bool(r.lowers or r.raises) for r in reports[args.carrying :])
    return len(results), found, args.carrying, idle, args.units - args.carrying


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=6)
    parser.add_argument("--carrying", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--p-kept", type=float, default=0.9)
    parser.add_argument("--p-removed", type=float, default=0.1)
    parser.add_argument("--trials", type=int, default=100)
    args = parser.parse_args()
    tasks = args.carrying + 1
    print(
        f"{args.units} sections, {args.carrying} carrying one task each, + a control task; pass "
        f"{args.p_kept} kept / {args.p_removed} removed; {args.trials} simulated ablations"
    )
    single = single_runs(args.units, args.repeats, tasks)
    for design in (Design.factorial, Design.single):
        per_side = make_plan(args.units, args.repeats, tasks, design).per_side
        totals = [simulate(design, args, seed) for seed in range(args.trials)]
        runs = totals[0][0]
        found, carrying = sum(t[1] for t in totals), sum(t[2] for t in totals)
        flagged, idle = sum(t[3] for t in totals), sum(t[4] for t in totals)
        lo, hi = wilson(found, carrying)
        flo, fhi = wilson(flagged, idle)
        same = single_runs(args.units, per_side, tasks)
        print(
            f"{design.value:>9}: {runs} runs = {runs / single:.0%} of one at a time at --repeats "
            f"{args.repeats}, {runs / same:.0%} at its {per_side} runs per side; recall "
            f"{found / carrying:.2f} [{lo:.2f}, {hi:.2f}]; idle sections flagged {flagged / idle:.3f} "
            f"[{flo:.3f}, {fhi:.3f}]"
        )


if __name__ == "__main__":
    main()
