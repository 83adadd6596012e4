"""The one Summary every surface shows: `docdelta run`, `docdelta report` and the Action.

`summarize` is pure; this module gathers what it needs from the workdir — the
judge's rulings (`judged.json`, folded into scores) and the docs diff (for instruction
usage) and the power line the run cached (`power.json`) — so the three surfaces cannot
drift apart, and a report never re-runs a simulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from docdelta.atomic import atomic_write
from docdelta.grading.judged import load_judged, with_judgements
from docdelta.instructions.models import Detection
from docdelta.results.layout import POOLED_FILE, POWER_CACHE
from docdelta.results.models import Manifest, RunResult
from docdelta.results.store import ResultStore
from docdelta.scorecard import stats
from docdelta.scorecard.instruction_usage import read_docs
from docdelta.scorecard.models import PooledControl, PowerSummary, Summary
from docdelta.scorecard.power import DROPS, POWER_TARGET, PRIOR_RATE, power_line, stored_drop
from docdelta.scorecard.summarize import design_of, summarize


@dataclass(frozen=True)
class ScoredWorkdir:
    """A workdir's experiment as its readers use it: the store (for run files), the plan,
    the saved results and their summary."""

    store: ResultStore
    manifest: Manifest
    results: list[RunResult]
    summary: Summary


def score_workdir(workdir: Path, *, with_results: bool = True) -> ScoredWorkdir | None:
    """The scorecard of a finished, partial or merged workdir; None when it holds no
    experiment (no manifest or detection). Without `with_results`, only what the run recorded
    before its first cell (a selftest that stopped it) is scored."""
    store = ResultStore(workdir)
    manifest, detection = store.read_manifest(), store.read_detection()
    if manifest is None or detection is None:
        return None
    results = store.results(manifest.repo) if with_results else []
    return ScoredWorkdir(store, manifest, results, scorecard(store, manifest, detection, results))


def scorecard(
    store: ResultStore,
    manifest: Manifest,
    detection: Detection,
    results: Sequence[RunResult],
    *,
    noise: float | None = None,
    alpha: float = stats.DEFAULT_ALPHA,
) -> Summary:
    """The summary of these results; `noise` defaults to the band the run was planned with."""
    judged = with_judgements(results, load_judged(store, manifest.repo))
    docs = read_docs(store.workdir, manifest, detection)
    power = cached_power(store, manifest, noise=manifest.band if noise is None else noise, alpha=alpha)
    pooled = read_pooled(store)
    return summarize(
        manifest,
        detection,
        judged,
        noise=noise,
        alpha=alpha,
        docs=docs,
        power=power,
        pooled=pooled,
        selftests=store.failed_selftests(manifest.tasks),
    )


def write_pooled(store: ResultStore, pooled: PooledControl | None) -> None:
    """Keep what `cache.pool` found beside the results (and drop a stale file when nothing was)."""
    path = store.workdir / POOLED_FILE
    if pooled is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, pooled.model_dump_json().encode())


def read_pooled(store: ResultStore) -> PooledControl | None:
    path = store.workdir / POOLED_FILE
    try:
        return PooledControl.model_validate_json(path.read_bytes()) if path.is_file() else None
    except (OSError, ValidationError):
        return None  # a damaged file pools nothing; the PR's own base runs still decide


def cached_power(
    store: ResultStore, manifest: Manifest, *, noise: float, alpha: float
) -> PowerSummary | None:
    """The power line the run cached before its first cell (`power.cached_drop`), read and never
    simulated: `docdelta report` stays instant. None when this workdir has none for the design."""
    tasks, design = len(manifest.tasks), design_of(manifest)
    found = stored_drop(store.workdir / POWER_CACHE, tasks, design, alpha=alpha, band=noise)
    if found is None:
        return None
    return PowerSummary(
        tasks=tasks,
        design=design.label,
        drop=found.drop,
        rate=PRIOR_RATE,
        target=POWER_TARGET,
        largest=max(DROPS),
        text=power_line(found.drop, tasks, design),
    )
