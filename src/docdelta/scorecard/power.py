"""Simulated PRs through the real round loop: error rates, power and run counts of a design.

A simulated agent has a known per-task success rate in each arm. `Simulated` is a fake
cell executor (named so: it stands in for the sandboxed agent, nothing else) behind the
same `rounds.run_rounds` and `decision.decide` the CLI runs, so what the bench and the
power hint measure is the gate users get. Scores are pass/fail (`bernoulli`) or partial
(`beta`: a per-run score with the arm's mean and a wide spread).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from docdelta.atomic import atomic_write
from docdelta.results.models import Cell
from docdelta.scorecard import stats
from docdelta.scorecard.decision import (
    FUTILITY_P,
    MIN_ARM_RUNS,
    OVERALL,
    POOLED,
    TASK_BAND_FACTOR,
    Design,
    TaskRuns,
    decide,
    from_strata,
)
from docdelta.scorecard.models import VerdictKind
from docdelta.scorecard.sequential import RoundsOutcome, run_rounds
from docdelta.vocabulary import DEFAULT_NOISE_BAND

if TYPE_CHECKING:
    import numpy as np
else:
    from docdelta.scorecard.stats import np  # imported on first use, as for the statistics

TREATMENT, CONTROL = "head", "base"
ScoreModel = Literal["bernoulli", "beta"]
BETA_CONCENTRATION = 4.0
"""a + b of the beta score model: wide per-run spread, as partially right answers have."""


@dataclass(frozen=True)
class Scenario:
    """Per-task true mean scores of each arm, and how many earlier control runs are pooled."""

    control: tuple[float, ...]
    treatment: tuple[float, ...]
    model: ScoreModel = "bernoulli"
    pooled: int = 0
    """Earlier control runs per task (drawn before round 1); with them this PR runs head only."""

    @property
    def tasks(self) -> list[str]:
        return [f"t{i + 1}" for i in range(len(self.control))]


def draw(rng: np.random.Generator, mean: float, size: int, model: ScoreModel) -> list[float]:
    if model == "bernoulli":
        return [float(x) for x in rng.random(size) < mean]
    mu = min(max(mean, 0.01), 0.99)
    return [float(x) for x in rng.beta(mu * BETA_CONCENTRATION, (1 - mu) * BETA_CONCENTRATION, size)]


@dataclass
class Simulated:
    """A fake agent of known success rates: the round loop's executor and observer."""

    scenario: Scenario
    rng: np.random.Generator
    runs: dict[tuple[str, str], list[tuple[int, float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, task in enumerate(self.scenario.tasks):
            pooled = draw(self.rng, self.scenario.control[i], self.scenario.pooled, self.scenario.model)
            self.runs[(task, CONTROL)] = [(POOLED, s) for s in pooled]
            self.runs[(task, TREATMENT)] = []

    def execute(self, cells: list[Cell]) -> str | None:
        for cell in cells:
            i = self.scenario.tasks.index(cell.task)
            mean = (self.scenario.treatment if cell.condition == TREATMENT else self.scenario.control)[i]
            (score,) = draw(self.rng, mean, 1, self.scenario.model)
            self.runs[(cell.task, cell.condition)].append((cell.repeat, score))
        return None

    def observe(self) -> dict[str, TaskRuns]:
        return {
            t: TaskRuns(tuple(self.runs[(t, TREATMENT)]), tuple(self.runs[(t, CONTROL)]))
            for t in self.scenario.tasks
        }


@dataclass(frozen=True)
class Simulation:
    prs: int
    verdicts: dict[VerdictKind, int]
    runs: tuple[int, ...]
    """Runs each PR paid for (pooled control runs are free: earlier PRs paid)."""
    fixed_runs: int

    def count(self, kind: VerdictKind) -> int:
        return self.verdicts.get(kind, 0)

    def rate(self, kind: VerdictKind) -> float:
        return self.count(kind) / self.prs

    @property
    def mean_runs(self) -> float:
        return float(np.mean(self.runs))


def simulate(
    scenario: Scenario,
    design: Design,
    *,
    prs: int,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
    seed: int = 0,
) -> Simulation:
    """`prs` simulated PRs of `scenario` through `run_rounds` with `design`."""
    verdicts: Counter[VerdictKind] = Counter()
    runs = []
    fixed = 0
    for out in _prs(scenario, design, prs=prs, alpha=alpha, band=band, seed=seed):
        assert out.decision is not None  # every simulated task has runs in both arms
        verdicts[out.decision.kind] += 1
        runs.append(out.runs)
        fixed = out.fixed_runs
    return Simulation(prs, dict(verdicts), tuple(runs), fixed)


def _prs(
    scenario: Scenario, design: Design, *, prs: int, alpha: float, band: float, seed: int
) -> Iterator[RoundsOutcome]:
    """The round loop's outcome of each simulated PR in turn, all drawn from one generator
    seeded with `seed`: the first k PRs are the same whether or not more follow."""
    rng = np.random.default_rng(seed)
    conditions = [TREATMENT] if scenario.pooled else [TREATMENT, CONTROL]
    for i in range(prs):
        sim = Simulated(scenario, rng)
        yield run_rounds(
            scenario.tasks,
            conditions,
            design,
            sim.execute,
            sim.observe,
            alpha=alpha,
            band=band,
            seed=seed + i,
        )


def catches(
    scenario: Scenario,
    design: Design,
    *,
    prs: int,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
    seed: int = 0,
) -> bool:
    """Whether `simulate(...).rate("regressed") >= POWER_TARGET`, simulating only the PRs
    that can still change the answer: it stops once the regressed calls reach the target, or
    the others make it unreachable (the same PRs, so the same answer, for a fraction of
    the cost when the power is far from the target)."""
    need = next((c for c in range(prs + 1) if c / prs >= POWER_TARGET), prs + 1)  # as `rate` compares
    caught = missed = 0
    for out in _prs(scenario, design, prs=prs, alpha=alpha, band=band, seed=seed):
        assert out.decision is not None  # every simulated task has runs in both arms
        if out.decision.kind == "regressed":
            caught += 1
        else:
            missed += 1
        if caught >= need or missed > prs - need:
            break
    return caught >= need


COVERAGE_SHIFT = 0.3
"""The true change some tasks get in `interval_coverage` (up, down or none, at random)."""


def interval_coverage(
    tasks: int, repeats: int, prs: int, seed: int, alpha: float = stats.DEFAULT_ALPHA
) -> tuple[int, int]:
    """How often the printed intervals cover the true delta: (covered, lines) over `prs`
    simulated fixed-design PRs of pass/fail tasks whose base rates are drawn from 0.02-0.98
    and whose head rates are shifted by 0 or +-COVERAGE_SHIFT; each task's row and the overall
    line (when it is the verdict's) count once per PR. The nominal rate is 1 - 2 alpha."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.02, 0.98, tasks)
    head = np.clip(base + rng.choice([0.0, -COVERAGE_SHIFT, COVERAGE_SHIFT], tasks), 0.02, 0.98)
    truth = {f"t{i}": float(head[i] - base[i]) for i in range(tasks)}
    covered = lines = 0
    for _ in range(prs):
        strata = {
            f"t{i}": (
                draw(rng, float(head[i]), repeats, "bernoulli"),
                draw(rng, float(base[i]), repeats, "bernoulli"),
            )
            for i in range(tasks)
        }
        d = decide(from_strata(strata), Design.fixed(repeats), alpha=alpha, seed=int(rng.integers(1 << 30)))
        shown = [] if d is None else [(t.interval, truth[t.task]) for t in d.tasks]
        if d is not None and d.subject == OVERALL:
            shown.append((d.interval, float(np.mean(list(truth.values())))))
        for iv, true in shown:
            if iv is not None:
                lines += 1
                covered += iv.low - 1e-9 <= true <= iv.high + 1e-9
    return covered, lines


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def drop_scenario(
    rates: Sequence[float], task: int, to: float, *, model: ScoreModel = "bernoulli", pooled: int = 0
) -> Scenario:
    treatment = list(rates)
    treatment[task] = to
    return Scenario(tuple(rates), tuple(treatment), model, pooled)


# ------------------------------------------------------------- power up front
POWER_TARGET = 0.8
POWER_PRS = 100
PRIOR_RATE = 0.5
"""A task's success rate before any run of it: the most variable, so the hint is not optimistic."""
DROPS = (0.1, 0.2, 0.3, 0.4, 0.5)


def detectable_drop(
    tasks: int,
    design: Design,
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
    rate: float = PRIOR_RATE,
    prs: int = POWER_PRS,
    seed: int = 0,
) -> float | None:
    """The smallest drop in DROPS of one task's success rate (from `rate`, the other tasks
    unchanged) that `design` calls regressed in POWER_TARGET of simulated PRs; None when
    even the largest is missed. Bisection: power grows with the drop."""
    drops = [d for d in DROPS if d <= rate]
    lo, hi = 0, len(drops)
    while lo < hi:
        mid = (lo + hi) // 2
        scenario = drop_scenario([rate] * tasks, 0, rate - drops[mid])
        if catches(scenario, design, prs=prs, alpha=alpha, band=band, seed=seed):
            hi = mid
        else:
            lo = mid + 1
    return drops[lo] if lo < len(drops) else None


def _power_key(tasks: int, design: Design, alpha: float, band: float) -> str:
    """Everything the simulation depends on, the futility threshold and the task margin included
    (a cache written under another threshold simulated another rule; the margin decides when the
    round loop gives up on no change)."""
    weights = [round(w, 9) for w in design.weights]
    rule = [design.futility, FUTILITY_P, TASK_BAND_FACTOR]
    return json.dumps([tasks, design.looks, weights, *rule, alpha, band, POWER_PRS])


def _read_cache(path: Path) -> dict[str, float | None]:
    try:
        cache: dict[str, float | None] = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        cache = {}  # a damaged cache is recomputed, never trusted
    return cache if isinstance(cache, dict) else {}


def cached_drop(path: Path, tasks: int, design: Design, *, alpha: float, band: float) -> float | None:
    """`detectable_drop`, simulated once per design and kept in the JSON file `path` (keyed by
    everything the simulation depends on), so a rerun or a report does not pay for it again."""
    key = _power_key(tasks, design, alpha, band)
    cache = _read_cache(path)
    if key not in cache:
        cache[key] = detectable_drop(tasks, design, alpha=alpha, band=band)
        atomic_write(path, json.dumps(cache, indent=1).encode())
    return cache[key]


@dataclass(frozen=True)
class CachedPower:
    drop: float | None


def stored_drop(path: Path, tasks: int, design: Design, *, alpha: float, band: float) -> CachedPower | None:
    """What `cached_drop` stored for this design, without simulating: the report's power line
    (None when the run that made the workdir did not store it, e.g. a merged shard set)."""
    key = _power_key(tasks, design, alpha, band)
    cache = _read_cache(path)
    return CachedPower(cache[key]) if key in cache else None


def power_line(drop: float | None, tasks: int, design: Design) -> str:
    """What the plan can see, in words, for the terminal before the first run."""
    shape = f"{tasks} task{'s' if tasks != 1 else ''}, {design.label}"
    if design.cap < MIN_ARM_RUNS:
        return f"power: {shape}: no test can reject at {design.cap} run per arm, so every drop is missed"
    if drop is None:
        return f"power: {shape}: even a drop of {DROPS[-1]:.1f} on one task is missed in over 20% of PRs"
    return (
        f"power: {shape}: one task dropping by {drop:.1f} (from {PRIOR_RATE:.1f}) is caught in "
        f"{POWER_TARGET:.0%} of simulated PRs; smaller drops need more repeats"
    )
