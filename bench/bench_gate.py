"""The gate's error rates, power and cost on simulated PRs, through the real round loop.

Every simulated PR runs `docdelta.scorecard.sequential.run_rounds` — the loop `docdelta run --repeats
auto` runs — with `docdelta.scorecard.power.Simulated` (fake agents of known per-task success
rates) as its cell executor, and is decided by `docdelta.scorecard.decision.decide`, the function
behind the scorecard and the check. Fixed designs go through the same loop with one look.

Three tasks of success rates 0.3 / 0.5 / 0.8. A/A: head = base. Drop: the
0.8 task falls to 0.3. Pooled: 30 earlier base runs per task, this PR runs head only.
Rates are printed with 95% Wilson intervals, and each goal of the issue with met / NOT MET.
Where a goal cannot be met by any valid test, an exact computation (no simulation) says so:
the one-sided test of the dropped task alone, at all of alpha, for fixed 10; and, for pooled
pass/fail scores, the best level-alpha test of the head arm against a base rate known exactly.

    .venv/bin/python bench/bench_gate.py [--prs 300] [--headline-prs 1000] [--seed 0] [--band 0.2] [--jobs 2]

`--prs 300 --headline-prs 1000` takes about 5 minutes on a busy 2-core machine.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import yaml

from docdelta.demo import examples_dir
from docdelta.scorecard.decision import Design
from docdelta.scorecard.models import VerdictKind
from docdelta.scorecard.power import Scenario, Simulation, drop_scenario, interval_coverage, simulate, wilson
from docdelta.scorecard.stats import DEFAULT_ALPHA
from docdelta.validate import DEFAULT_MAX_REPEATS

SMOKE_ARGS = ["--prs", "2", "--jobs", "1"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

RATES = (0.3, 0.5, 0.8)
DROPPED, DROP_TO = 2, 0.3
POOLED_BASE = 30
FIXED, POOLED_HEAD = 10, 5
POOLED_TARGET = 0.7
EQUAL_POWER = 18
"""The fixed design whose power on the drop is closest to auto's (83% at 300 PRs; 16 gave 79%):
the one auto's saving is measured against."""
GATE_HEAD = 10
"""The head size at which the gate itself (base estimated from the pooled runs, Holm over
four hypotheses) first reaches POOLED_TARGET: 8 gave 62%, 10 gives 72% (--seed 5150)."""


def _example_repeats() -> int:
    """The fixed `repeats` the shipped pull-request workflow (what `docdelta init` copies) runs."""
    doc = yaml.safe_load((examples_dir("workflows") / "docdelta-pr.yml").read_text(encoding="utf-8"))
    steps = [st for job in doc["jobs"].values() for st in job["steps"]]
    return next(int(st["with"]["repeats"]) for st in steps if "docdelta/docdelta" in st.get("uses", ""))


EXAMPLE_REPEATS = _example_repeats()


def binom_cdf(c: int, n: int, p: float) -> float:
    return math.fsum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(c + 1))


def known_base_power(n: int, level: float, base: float = RATES[DROPPED], to: float = DROP_TO) -> float:
    """Power of the most powerful non-randomized level-`level` test of "head rate >= base"
    from n pass/fail head runs when the base rate is known exactly (infinitely many pooled
    runs): reject for X <= c, the largest c with P(X <= c | base) <= level (Neyman-Pearson:
    the likelihood ratio is monotone in X). No procedure that also pays for multiplicity or
    estimates the base from 30 runs can beat it."""
    c = max((k for k in range(n + 1) if binom_cdf(k, n, base) <= level), default=-1)
    return binom_cdf(c, n, to) if c >= 0 else 0.0


def smallest_head(level: float, target: float = POOLED_TARGET) -> int:
    return next(n for n in range(1, 200) if known_base_power(n, level) >= target)


def hypergeom_mid_p_power(n: int, level: float) -> float:
    """Exact power of the one-sided mid-p Fisher test of the dropped task alone (an oracle that
    knows which task to test and pays no multiplicity), n runs per arm."""

    def pmf(k: int, n_: int, p: float) -> float:
        return math.comb(n_, k) * p**k * (1 - p) ** (n_ - k)

    total = 0.0
    for x in range(n + 1):  # head passes
        for y in range(n + 1):  # base passes
            k, size = x + y, 2 * n
            law = [math.comb(n, i) * math.comb(n, k - i) / math.comb(size, k) for i in range(k + 1) if i <= n]
            mid = math.fsum(law[:x]) + law[x] / 2
            if mid <= level:
                total += pmf(x, n, DROP_TO) * pmf(y, n, RATES[DROPPED])
    return total


@dataclass(frozen=True)
class Case:
    name: str
    scenario: Scenario
    design: Design
    headline: bool = False
    """One of the auto cases the goals rest on: run at --headline-prs PRs."""


def cases() -> list[Case]:
    aa = {m: Scenario(RATES, RATES, m) for m in ("bernoulli", "beta")}
    drop = drop_scenario(RATES, DROPPED, DROP_TO)
    pooled = drop_scenario(RATES, DROPPED, DROP_TO, pooled=POOLED_BASE)
    auto = Design.auto(DEFAULT_MAX_REPEATS)
    partial_drop = drop_scenario(RATES, DROPPED, DROP_TO, model="beta")
    return [
        Case("A/A fixed 10, pass/fail", aa["bernoulli"], Design.fixed(FIXED)),
        Case("A/A fixed 10, partial", aa["beta"], Design.fixed(FIXED)),
        Case("A/A auto, pass/fail", aa["bernoulli"], auto, headline=True),
        Case("A/A auto, partial", aa["beta"], auto),
        Case("drop fixed 10", drop, Design.fixed(FIXED)),
        Case(f"drop fixed {EQUAL_POWER}", drop, Design.fixed(EQUAL_POWER)),
        Case(f"drop fixed {DEFAULT_MAX_REPEATS}", drop, Design.fixed(DEFAULT_MAX_REPEATS)),
        Case("drop auto", drop, auto, headline=True),
        Case("drop fixed 10, partial", partial_drop, Design.fixed(FIXED)),
        Case("drop auto, partial", partial_drop, auto),
        Case(f"drop, {POOLED_BASE} pooled base, head fixed {POOLED_HEAD}", pooled, Design.fixed(POOLED_HEAD)),
        Case(f"drop, {POOLED_BASE} pooled base, head auto", pooled, auto),
        Case(
            f"drop, {POOLED_BASE} pooled, head fixed {POOLED_HEAD}, partial",
            drop_scenario(RATES, DROPPED, DROP_TO, model="beta", pooled=POOLED_BASE),
            Design.fixed(POOLED_HEAD),
        ),
        Case(
            f"drop, {POOLED_BASE} pooled, head fixed {smallest_head(DEFAULT_ALPHA / 4)}",
            pooled,
            Design.fixed(smallest_head(DEFAULT_ALPHA / 4)),
        ),
        Case(f"drop, {POOLED_BASE} pooled, head fixed {GATE_HEAD}", pooled, Design.fixed(GATE_HEAD)),
        # Last, so the cases above keep their seeds: the examples' own design (examples/workflows).
        Case(
            f"A/A fixed {EXAMPLE_REPEATS} (example workflows)", aa["bernoulli"], Design.fixed(EXAMPLE_REPEATS)
        ),
        Case(f"drop fixed {EXAMPLE_REPEATS} (example workflows)", drop, Design.fixed(EXAMPLE_REPEATS)),
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
    p.add_argument("--seed", type=int, default=0, help="case i simulates from seed + 1000 i")
    p.add_argument(
        "--headline-prs", type=int, default=None, help="PRs for the A/A and drop auto cases (default --prs)"
    )
    p.add_argument("--coverage-prs", type=int, default=40, help="PRs per cell of the coverage table")
    args = p.parse_args()
    big = args.headline_prs or args.prs
    todo = [
        (c, big if c.headline else args.prs, args.band, args.seed + 1000 * i) for i, c in enumerate(cases())
    ]
    # the longest cases first, so the pool's two workers finish together
    todo.sort(key=lambda job: -(job[1] * (job[0].design.cap if job[0].design.adaptive else 1)))
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = {name: (sim, secs) for name, sim, secs in pool.map(run, todo)}
    results = {c.name: results[c.name] for c in cases()}
    total = sum(s.prs for s, _ in results.values())
    print(
        f"{total} simulated PRs ({args.prs} per case, {big} for the headline auto cases), seeds "
        f"{args.seed} + 1000 i, tasks at {RATES}, band ±{args.band}, alpha 0.05, "
        f"auto = {Design.auto(DEFAULT_MAX_REPEATS).label}"
    )
    print(f"{'case':<42} {'PRs':>5} {'regressed':>22} {'no_change':>22} {'runs/PR':>8} {'fixed':>6}")
    for name, (sim, secs) in results.items():
        print(
            f"{name:<42} {sim.prs:>5} {rate(sim, 'regressed'):>22} {rate(sim, 'no_change'):>22} "
            f"{sim.mean_runs:8.1f} {sim.fixed_runs:6d}  ({secs:.0f}s)"
        )
    r = {name: sim for name, (sim, _) in results.items()}
    fixed, fixed_cap, auto = r["drop fixed 10"], r[f"drop fixed {EQUAL_POWER}"], r["drop auto"]
    print("\ngoals:")
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
    oracle = hypergeom_mid_p_power(FIXED, DEFAULT_ALPHA)
    print(
        f"- power >= 80% for {RATES[DROPPED]} -> {DROP_TO} at <= {fixed.fixed_runs} runs: fixed 10 "
        f"{rate(fixed, 'regressed')}; auto {rate(auto, 'regressed')} at {auto.mean_runs:.1f} runs: "
        f"{goal(auto.rate('regressed') >= 0.8 and auto.mean_runs <= fixed.fixed_runs)} "
        f"(exact: the dropped task's one-sided mid-p test alone, at all of alpha, has {oracle:.1%} "
        f"power at 10 runs per arm, so no fixed 10 design reaches 80%)"
    )
    pf, pa = r["drop fixed 10, partial"], r["drop auto, partial"]
    print(
        f"- the same drop, partial scores: fixed 10 {rate(pf, 'regressed')} at {pf.mean_runs:.0f} runs; "
        f"auto {rate(pa, 'regressed')} at {pa.mean_runs:.1f} runs: "
        f"{goal(pa.rate('regressed') >= 0.8 and pa.mean_runs <= pf.fixed_runs)}"
    )
    saving = 1 - auto.mean_runs / fixed_cap.mean_runs
    print(
        f"- auto vs the fixed design of about equal power (fixed {EQUAL_POWER}: "
        f"{rate(fixed_cap, 'regressed')} vs auto {rate(auto, 'regressed')}; A/A false regression "
        f"{r['A/A auto, pass/fail'].rate('regressed'):.1%} vs fixed 10 "
        f"{r['A/A fixed 10, pass/fail'].rate('regressed'):.1%}): {saving:.0%} fewer runs; >= 40% "
        f"{goal(saving >= 0.4)}; against fixed 10 ({fixed.mean_runs:.0f} runs, power "
        f"{fixed.rate('regressed'):.0%}) auto takes {auto.mean_runs / fixed.mean_runs - 1:+.0%} runs "
        f"for {auto.rate('regressed') - fixed.rate('regressed'):+.0%} power"
    )
    pooled = r[f"drop, {POOLED_BASE} pooled base, head fixed {POOLED_HEAD}"]
    partial = r[f"drop, {POOLED_BASE} pooled, head fixed {POOLED_HEAD}, partial"]
    n_min = smallest_head(DEFAULT_ALPHA / 4)
    at_min = r[f"drop, {POOLED_BASE} pooled, head fixed {n_min}"]
    print(
        f"- {POOLED_BASE} pooled base runs, head alone at {POOLED_HEAD} repeats: pass/fail "
        f"{rate(pooled, 'regressed')}, partial {rate(partial, 'regressed')}; >= 70%: pass/fail "
        f"{goal(pooled.rate('regressed') >= POOLED_TARGET)}, partial "
        f"{goal(partial.rate('regressed') >= POOLED_TARGET)}"
    )
    print(
        f"  exact, base rate known exactly (the limit of pooling): P(X <= 2 | n=5, p=0.8) = "
        f"{binom_cdf(2, 5, 0.8):.4f} > alpha, so the best level-{DEFAULT_ALPHA:g} test rejects only "
        f"X <= 1: power {known_base_power(5, DEFAULT_ALPHA):.1%} < 70% for any test at head 5. "
        f"Smallest head reaching 70%: {smallest_head(DEFAULT_ALPHA)} at alpha "
        f"({known_base_power(smallest_head(DEFAULT_ALPHA), DEFAULT_ALPHA):.1%}), {n_min} at alpha/4, the "
        f"gate's first Holm step ({known_base_power(n_min, DEFAULT_ALPHA / 4):.1%}); the gate at head "
        f"{n_min} with {POOLED_BASE} pooled: {rate(at_min, 'regressed')}, at head {GATE_HEAD}: "
        f"{rate(r[f'drop, {POOLED_BASE} pooled, head fixed {GATE_HEAD}'], 'regressed')}"
    )
    for name in ("A/A auto, pass/fail", "A/A auto, partial"):
        nc = r[name]
        print(
            f"- {name}: no_change at the auto cap {rate(nc, 'no_change')}; "
            f">= 50% {goal(nc.rate('no_change') >= 0.5)}"
        )
    coverage(args.coverage_prs, args.seed)
    print(f"wall time {time.perf_counter() - start:.0f}s")


COVERAGE_TASKS = (3, 10, 40)
COVERAGE_REPEATS = (2, 6, 24)


def coverage(prs: int, seed: int) -> None:
    """The printed 90% intervals' coverage of the true delta (`power.interval_coverage`)."""
    print(f"\ncoverage of the true delta by the printed 90% intervals ({prs} PRs per cell, fixed designs):")
    print(f"{'tasks':>6} " + " ".join(f"{f'{r} repeats':>24}" for r in COVERAGE_REPEATS))
    for tasks in COVERAGE_TASKS:
        cells = []
        for repeats in COVERAGE_REPEATS:
            covered, lines = interval_coverage(tasks, repeats, prs, seed + tasks * 100 + repeats)
            low, high = wilson(covered, lines)
            cells.append(f"{covered / lines:.1%} [{low:.1%}, {high:.1%}]")
        print(f"{tasks:>6} " + " ".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()
