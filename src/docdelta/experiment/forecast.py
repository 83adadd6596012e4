"""What a matrix is about to spend, said before it starts.

The planned runs are counted against what is already done (a resumed workdir, an arm
restored from the results cache). The cost and wall time of the rest are estimated from
earlier runs of the same agent and model, never guessed: the workdir's own results and
the newest entries of the cross-PR results store whose key names that agent and model.
With none, the forecast says that no estimate exists. Runs our machinery failed
(infra_error) or that a rate limit cut short say nothing about what a run costs and are
left out.

The estimate is the mean per run times the runs left, with the mean's 95% t-interval
(normal-theory, from the samples' spread) stated beside it, and the wall time divided by
the runs at once (`--jobs`). It is a forecast, not a bound: the spend cap (`--cap-usd`)
is what bounds a matrix, so when the agent calls a model the forecast also says whether a
cap holds and, when none does, how to set one: nothing else stands between the command
and the spend (`run` never stops to ask).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from docdelta.experiment.plan import Experiment
from docdelta.experiment.reuse import CachedArm
from docdelta.experiment.runner import INCOMPLETE
from docdelta.instructions.detect import unread_by
from docdelta.results.backends import ArmStore
from docdelta.results.models import Cell, RunResult
from docdelta.results.store import ResultStore
from docdelta.text import listing

log = logging.getLogger("docdelta.experiment.forecast")

HISTORY_ENTRIES = 20
"""Newest results-store entries read for samples: enough runs for a stable mean, few
enough that a forecast costs well under a second on a fetched branch."""
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
"""Two-sided 95% Student t quantiles by degrees of freedom; 1.96 from 30 on (scipy stays
out of this module: the forecast runs before anything needs it)."""


@dataclass(frozen=True)
class Estimate:
    """A per-run mean from `samples` runs and its 95% half-width (None from one run)."""

    mean: float
    half_width: float | None
    samples: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate | None:
        if not values:
            return None
        mean = statistics.fmean(values)
        if len(values) < 2:
            return cls(mean, None, 1)
        df = len(values) - 1
        t = _T95.get(df, 2.0 if df < 30 else 1.96)
        return cls(mean, t * statistics.stdev(values) / math.sqrt(len(values)), len(values))

    def total(self, runs: int, per: float = 1.0) -> str:
        """`runs` times the mean (divided by `per`), with the interval scaled alike."""
        scale = runs / per
        low = "" if self.half_width is None else f" (95% CI {_fmt_range(self, scale)})"
        return f"{self.mean * scale:{_FORMAT}}{low}"


_FORMAT = ",.2f"


def _fmt_range(est: Estimate, scale: float) -> str:
    assert est.half_width is not None
    low, high = max(est.mean - est.half_width, 0.0) * scale, (est.mean + est.half_width) * scale
    return f"{low:{_FORMAT}} to {high:{_FORMAT}}"


@dataclass(frozen=True)
class Forecast:
    agent: str
    model: str | None
    planned: int
    done: int
    jobs: int
    adaptive: bool
    cost: Estimate | None
    """Dollars per run; None when no earlier run of this agent and model reported a cost."""
    seconds: Estimate | None
    """Wall seconds per run (start to result, grading included)."""
    samples: int
    """Earlier runs of this agent and model the estimate could draw on."""
    calls_model: bool = False
    """Some column's agent calls a model API (through the gateway), so the runs cost money."""
    cap_usd: float | None = None
    """The spend cap (`--cap-usd`, the Action's `cap-usd`); None: none."""
    unread: tuple[str, ...] = ()
    """Changed instruction files the agent does not read (`unread_by`): what the matrix
    spends cannot tell their conditions apart, so it is said before, not only in the scorecard."""

    @property
    def to_run(self) -> int:
        return self.planned - self.done

    def _who(self) -> str:
        return f"{self.agent}" + (f" with model {self.model}" if self.model else "")

    def _bound(self) -> list[str]:
        """What bounds the spend: the cap, or (a model agent without one) that nothing does;
        first, whether the agent reads the changed files at all."""
        blind = (
            [
                f"{listing(list(self.unread))} changed, but {self.agent} does not read "
                f"{'it' if len(self.unread) == 1 else 'them'} natively: these runs cannot tell base "
                "from head; use an agent that reads it (docs/agents.md), or an instruction file this one "
                "loads that imports it"
            ]
            if self.unread
            else []
        )
        return blind + self._cap()

    def _cap(self) -> list[str]:
        if self.cap_usd is not None:
            return [f"spend cap: ${self.cap_usd:,.2f}: no run starts once model spend could pass it"]
        if self.calls_model:
            return [
                "no spend cap: nothing stops the model spend before the matrix ends; "
                "pass --cap-usd USD (Action input cap-usd) to bound it"
            ]
        return []

    def lines(self) -> list[str]:
        """The forecast as plain lines (the CLI's stderr; the job summary's list)."""
        upto = "up to " if self.adaptive else ""
        runs = f"{upto}{self.planned} runs planned, {self.done} already done, {upto}{self.to_run} to run"
        if self.to_run == 0:
            return [f"{runs}: nothing to spend"]
        if self.samples == 0:
            return [
                runs,
                f"no estimate: no earlier results of {self._who()} in this workdir or the results store",
                *self._bound(),
            ]
        out = [runs]
        if self.seconds is not None:
            at_once = min(self.jobs, self.to_run)
            out.append(
                f"estimated wall time: {self.seconds.total(self.to_run, at_once)} s "
                f"({at_once} at once; mean {self.seconds.mean:.1f} s per run over {self.seconds.samples} "
                f"earlier runs of {self._who()})"
            )
        if self.cost is None:
            out.append(f"no cost estimate: no earlier run of {self._who()} reported a cost")
        else:
            out.append(
                f"estimated cost: ${self.cost.total(self.to_run)} "
                f"(mean ${self.cost.mean:.4f} per run over {self.cost.samples} earlier runs)"
            )
        return [*out, *self._bound()]

    def markdown(self) -> str:
        """For the Action's job summary, written before the matrix starts."""
        return "### docdelta forecast\n\n" + "".join(f"- {line}\n" for line in self.lines())


def forecast(
    exp: Experiment,
    store: ResultStore,
    cells: Sequence[Cell],
    *,
    jobs: int,
    history: ArmStore | None = None,
    calls_model: bool = False,
    cap_usd: float | None = None,
) -> Forecast:
    """The forecast for running `cells` of `exp` with results already in `store`;
    `calls_model` and `cap_usd` say what bounds the spend (`Forecast.cap_usd`)."""
    agent = exp.manifest.agent
    done = sum(1 for c in cells if _complete(store.load(exp.repo_name, c)))
    # The workdir holds one experiment (planning refuses another), so one agent and model.
    earlier = [r for r in store.results(exp.repo_name) if _complete(r)]
    seen = {(r.cell.key, r.started_at) for r in earlier}  # a restored arm is in both places
    for entry in _history(history) if history is not None else ():
        if (entry.key.agent.name, entry.key.agent.model) != (agent.name, agent.model):
            continue
        for r in entry.results:
            if _complete(r) and (r.cell.key, r.started_at) not in seen:
                earlier.append(r)
                seen.add((r.cell.key, r.started_at))
    costs = [c for r in earlier if (c := r.outcome.metrics.cost_usd) is not None and math.isfinite(c)]
    seconds = [(r.finished_at - r.started_at).total_seconds() for r in earlier]
    return Forecast(
        agent=agent.name,
        model=agent.model,
        planned=len(cells),
        done=done,
        jobs=jobs,
        adaptive=exp.manifest.adaptive,
        cost=Estimate.of([c for c in costs if c >= 0]),
        seconds=Estimate.of([s for s in seconds if s >= 0]),
        samples=len(earlier),
        calls_model=calls_model,
        cap_usd=cap_usd,
        unread=tuple(unread_by(agent.name, exp.detection)),
    )


def _complete(result: RunResult | None) -> bool:
    """A finished run that says what a run costs (not one our machinery or a rate limit cut)."""
    return result is not None and result.status not in INCOMPLETE


def _history(backend: ArmStore) -> Iterable[CachedArm]:
    """The store's newest entries; an unreadable one is skipped (a forecast never stops a run)."""
    for data in backend.recent(HISTORY_ENTRIES):
        try:
            yield CachedArm.model_validate_json(data)
        except ValidationError:
            log.warning("a results-store entry is not valid; left out of the forecast")
