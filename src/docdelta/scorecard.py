"""The one Summary every surface shows: `docdelta run`, `docdelta report` and the Action.

`report.summarize` is pure; this module gathers what it needs from the workdir — the
judge's rulings (`judged.json`, folded into scores), the docs diff (for instruction
usage) and, for an inconclusive verdict, the power simulation the run cached in
`power.json` (the next step's "what this design can catch") — so the three surfaces
cannot drift apart. A workdir without `power.json` (results merged or copied) is not
simulated here: the scorecard leaves that clause out rather than stall on it.
"""

from __future__ import annotations

from collections.abc import Sequence

from docdelta import power, stats
from docdelta.grading.judged import load_judged, with_judgements
from docdelta.instruction_usage import read_docs
from docdelta.models import DetectableDrop, Detection, Manifest, RunResult, Summary
from docdelta.report import summarize
from docdelta.report.summary import design_of
from docdelta.store import ResultStore


def scorecard(
    store: ResultStore,
    manifest: Manifest,
    detection: Detection,
    results: Sequence[RunResult],
    *,
    noise: float = stats.DEFAULT_NOISE_BAND,
    alpha: float = stats.DEFAULT_ALPHA,
) -> Summary:
    judged = with_judgements(results, load_judged(store, manifest.repo))
    docs = read_docs(store.workdir, manifest, detection)
    summary = summarize(manifest, detection, judged, noise=noise, alpha=alpha, docs=docs)
    cache = store.workdir / power.POWER_CACHE
    if summary.verdict is None or summary.verdict.kind != "inconclusive" or not cache.is_file():
        return summary
    design = design_of(manifest)
    drop = power.cached_drop(cache, len(manifest.tasks), design, alpha=alpha, band=noise)
    return summary.model_copy(update={"detectable": DetectableDrop(drop=drop, largest=max(power.DROPS))})
