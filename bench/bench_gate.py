"""The gate's error rates, power and cost on simulated PRs, through the real round loop.

Every simulated PR runs `docdelta.rounds.run_rounds` — the loop `docdelta run --repeats
auto` runs — with `docdelta.power.Simulated` (fake agents of known per-task success
rates) as its cell executor, and is decided by `docdelta.decision.decide`, the function
behind the scorecard and the check. Fixed designs go through the same loop with one look.

Three tasks of success rates 0.3 / 0.5 / 0.8 (issue 13). A/A: head = base. Drop: the
0.8 task falls to 0.3. Pooled: 30 earlier base runs per task, this PR runs head only.
Rates are printed with 95% Wilson intervals, and each goal of the issue with met / NOT MET.

    .venv/bin/python bench/bench_gate.py [--prs 300] [--band 0.2] [--jobs 2]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from docdelta.decision import Design
from docdelta.models import VerdictKind
from docdelta.power import Scenario, Simulation, drop_scenario, simulate, wilson
from docdelta.validate import DEFAULT_MAX_REPEATS

RATES = (0.3, 0.5, 0.8)
DROPPED, DROP_TO = 2, 0.3
POOLED_BASE = 30
FIXED, POOLED_HEAD = 10, 5


@dataclass(frozen=True)
class Case:
    name: str
    scenario: Scenario
    design: Design


def cases() -> list[Case]:
    aa = {m: Scenario(RATES, RATES, m) for m in ("bernoulli", "beta")}
    drop = drop_scenario(RATES, DROPPED, DROP_TO)
    pooled = drop_scenario(RATES, DROPPED, DROP_TO, pooled=POOLED_BASE)
    auto = Design.auto(DEFAULT_MAX_REPEATS)
    return [
        Case("A/A fixed 10, pass/fail", aa["bernoulli"], Design.fixed(FIXED)),
        Case("A/A fixed 10, partial", aa["beta"], Design.fixed(FIXED)),
        Case("A/A auto, pass/fail", aa["bernoulli"], auto),
        Case("A/A auto, partial", aa["beta"], auto),
        Case("drop fixed 10", drop, Design.fixed(FIXED)),
        Case(f"drop fixed {DEFAULT_MAX_REPEATS}", drop, Design.fixed(DEFAULT_MAX_REPEATS)),
        Case("drop auto", drop, auto),
        Case(f"drop, {POOLED_BASE} pooled base, head fixed {POOLED_HEAD}", pooled, Design.fixed(POOLED_HEAD)),
        Case(f"drop, {POOLED_BASE} pooled base, head auto", pooled, auto),
    ]


def run(args: tuple[Case, int, float, int]) -> tuple[str, Simulation, float]:
    case, prs, band, seed = args
    start = time.perf_counter()
    sim = simulate(case.scenario, case.design, prs=prs, band=band, seed=seed)
    return case.name, sim, time.perf_counter() - start


def rate(sim: Simulation, kind: VerdictKind) -> str:
    low, high = wilson(sim.count(kind), sim.prs)
    return f"{sim.rate(kind):6.1%} [{low:.1%}, {high:.1%}]"


def goal(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prs", type=int, default=300, help="simulated PRs per case")
    p.add_argument("--band", type=float, default=0.2, help="the noise band (equivalence margin)")
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    todo = [(c, args.prs, args.band, 1000 * i) for i, c in enumerate(cases())]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = {name: (sim, secs) for name, sim, secs in pool.map(run, todo)}
    total = sum(s.prs for s, _ in results.values())
    print(
        f"{total} simulated PRs ({args.prs} per case), tasks at {RATES}, band ±{args.band}, "
        f"alpha 0.05, auto = {Design.auto(DEFAULT_MAX_REPEATS).label}"
    )
    print(f"{'case':<42} {'regressed':>22} {'no_change':>22} {'runs/PR':>8} {'fixed':>6}")
    for name, (sim, secs) in results.items():
        print(
            f"{name:<42} {rate(sim, 'regressed'):>22} {rate(sim, 'no_change'):>22} "
            f"{sim.mean_runs:8.1f} {sim.fixed_runs:6d}  ({secs:.0f}s)"
        )
    r = {name: sim for name, (sim, _) in results.items()}
    fixed, fixed_cap, auto = r["drop fixed 10"], r[f"drop fixed {DEFAULT_MAX_REPEATS}"], r["drop auto"]
    print("\ngoals (issue 13):")
    for name in (
        "A/A fixed 10, pass/fail",
        "A/A fixed 10, partial",
        "A/A auto, pass/fail",
        "A/A auto, partial",
    ):
        fr = r[name].rate("regressed")
        print(
            f"- {name}: false regression {rate(r[name], 'regressed')}: <= 5% {goal(fr <= 0.05)}, "
            f"goal 2% {goal(fr <= 0.02)}"
        )
    best = max((fixed, auto), key=lambda s: s.rate("regressed"))
    print(
        f"- power >= 80% for {RATES[DROPPED]} -> {DROP_TO} at <= {fixed.fixed_runs} runs: fixed 10 "
        f"{rate(fixed, 'regressed')} at {fixed.mean_runs:.0f}, auto {rate(auto, 'regressed')} at "
        f"{auto.mean_runs:.0f}: {goal(best.rate('regressed') >= 0.8 and best.mean_runs <= fixed.fixed_runs)}"
    )
    saving = 1 - auto.mean_runs / fixed_cap.mean_runs
    print(
        f"- auto vs fixed {DEFAULT_MAX_REPEATS} (similar power: {rate(fixed_cap, 'regressed')} vs "
        f"{rate(auto, 'regressed')}): {saving:.0%} fewer runs; >= 40% {goal(saving >= 0.4)}"
    )
    pooled = r[f"drop, {POOLED_BASE} pooled base, head fixed {POOLED_HEAD}"]
    print(
        f"- {POOLED_BASE} pooled base runs, head alone at {POOLED_HEAD} repeats: power "
        f"{rate(pooled, 'regressed')}; >= 70% {goal(pooled.rate('regressed') >= 0.7)} "
        f"(auto, head only: {rate(r[f'drop, {POOLED_BASE} pooled base, head auto'], 'regressed')} at "
        f"{r[f'drop, {POOLED_BASE} pooled base, head auto'].mean_runs:.0f} runs)"
    )
    nc = r["A/A auto, pass/fail"]
    print(
        f"- A/A no_change at the auto cap: {rate(nc, 'no_change')}; "
        f">= 50% {goal(nc.rate('no_change') >= 0.5)}"
    )
    print(f"wall time {time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
