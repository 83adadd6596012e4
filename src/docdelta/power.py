"""Simulated PRs through the real round loop: error rates, power and run counts of a design.

A simulated agent has a known per-task success rate in each arm. `Simulated` is a fake
cell executor (named so: it stands in for the sandboxed agent, nothing else) behind the
same `rounds.run_rounds` and `decision.decide` the CLI runs, so what the bench and the
power hint measure is the gate users get. Scores are pass/fail (`bernoulli`) or partial
(`beta`: a per-run score with the arm's mean and a wide spread).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from docdelta import stats
from docdelta.decision import POOLED, Design, TaskRuns
from docdelta.models import Cell, VerdictKind
from docdelta.rounds import run_rounds

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
    band: float = stats.DEFAULT_NOISE_BAND,
    seed: int = 0,
) -> Simulation:
    """`prs` simulated PRs of `scenario` through `run_rounds` with `design`."""
    rng = np.random.default_rng(seed)
    conditions = [TREATMENT] if scenario.pooled else [TREATMENT, CONTROL]
    verdicts: Counter[VerdictKind] = Counter()
    runs = []
    fixed = 0
    for i in range(prs):
        sim = Simulated(scenario, rng)
        out = run_rounds(
            scenario.tasks,
            conditions,
            design,
            sim.execute,
            sim.observe,
            alpha=alpha,
            band=band,
            seed=seed + i,
        )
        assert out.decision is not None  # every simulated task has runs in both arms
        verdicts[out.decision.kind] += 1
        runs.append(out.runs)
        fixed = out.fixed_runs
    return Simulation(prs, dict(verdicts), tuple(runs), fixed)


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
