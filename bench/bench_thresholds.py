"""The pass-threshold gate's false-alarm rate on identical docs (A/A), by simulation and exactly.

Every simulated PR draws head and base runs of each task from the same pass rate and
applies `docdelta.scorecard.thresholds.summarize` — the rule the scorecard and the check apply: the
check fails when a task's head arm misses its bar and its base arm met it. Beside each
simulated rate (with its 95% Wilson interval) the exact rate from the binomial
distribution, 1 - prod over tasks of (1 - P(head misses) P(base meets)), which the
simulation must agree with.

    .venv/bin/python bench/bench_thresholds.py [--prs 2000] [--seed 0] [--smoke]
"""

from __future__ import annotations

import argparse
import math
import random

from docdelta.scorecard import thresholds
from docdelta.scorecard.power import wilson
from docdelta.tasks.models import PassThreshold
from docdelta.vocabulary import BASE, HEAD

SMOKE_ARGS = ["--smoke"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

SCENARIOS = (
    # (true pass rate of every task, tasks, repeats per arm, bar)
    (1.0, 3, 5, PassThreshold(fraction=0.8)),
    (0.95, 3, 5, PassThreshold(fraction=0.8)),
    (0.9, 3, 5, PassThreshold(fraction=0.8)),
    (0.8, 3, 5, PassThreshold(fraction=0.8)),
    (0.9, 3, 10, PassThreshold(fraction=0.8)),
    (0.8, 3, 10, PassThreshold(fraction=0.8)),
    (0.95, 3, 5, PassThreshold(fraction=0.5, k=3)),
    (0.9, 1, 3, PassThreshold(fraction=1.0)),
)


def _arm_meets(rate: float, repeats: int, bar: PassThreshold) -> float:
    """P(an arm of `repeats` runs at pass rate `rate` meets `bar`), from the binomial law and
    the same `arm_pass` rule the check uses."""
    total = 0.0
    for passes in range(repeats + 1):
        scores = [1.0] * passes + [0.0] * (repeats - passes)
        if thresholds.arm_pass(scores, bar).met:
            total += math.comb(repeats, passes) * rate**passes * (1 - rate) ** (repeats - passes)
    return total


def exact_rate(rate: float, tasks: int, repeats: int, bar: PassThreshold) -> float:
    """P(the check fails on identical docs): some task's head misses where its base meets."""
    meets = _arm_meets(rate, repeats, bar)
    return 1 - (1 - (1 - meets) * meets) ** tasks


def simulated_rate(rate: float, tasks: int, repeats: int, bar: PassThreshold, prs: int, seed: int) -> int:
    """PRs out of `prs` whose check the thresholds fail."""
    rng = random.Random(seed)
    failed = 0
    for _ in range(prs):
        for _task in range(tasks):
            scores = {
                arm: [1.0 if rng.random() < rate else 0.0 for _ in range(repeats)] for arm in (HEAD, BASE)
            }
            if thresholds.summarize(bar, scores, gate=True).blocks:
                failed += 1
                break
    return failed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prs", type=int, default=2000, help="simulated PRs per scenario")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="100 PRs per scenario: checks the bench runs")
    args = p.parse_args()
    prs = 100 if args.smoke else args.prs
    print(f"A/A false alarms of the pass-threshold gate, {prs} PRs per scenario, seed {args.seed}")
    print("true rate | tasks | repeats | bar            | simulated [95% CI]       | exact")
    for i, (rate, tasks, repeats, bar) in enumerate(SCENARIOS):
        failed = simulated_rate(rate, tasks, repeats, bar, prs, args.seed + i)
        low, high = wilson(failed, prs)
        exact = exact_rate(rate, tasks, repeats, bar)
        shown = thresholds.describe_bar(bar)
        print(
            f"{rate:9.2f} | {tasks:5d} | {repeats:7d} | {shown:<14} | "
            f"{failed / prs:6.1%} [{low:5.1%}, {high:5.1%}] | {exact:6.1%}"
        )


if __name__ == "__main__":
    main()
