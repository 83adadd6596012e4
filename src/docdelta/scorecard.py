"""The one Summary every surface shows: `docdelta run`, `docdelta report` and the Action.

`report.summarize` is pure; this module gathers what it needs from the workdir — the
judge's rulings (`judged.json`, folded into scores), the docs diff (for instruction
usage) and the power hint simulated once per shape (`power-hint.json`) — so the three
surfaces cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from docdelta import stats
from docdelta.grading.judged import load_judged, with_judgements
from docdelta.instruction_usage import read_docs
from docdelta.models import Detection, Manifest, RunResult, Summary
from docdelta.power import POWER_HINT_CACHE, cached_power_hint
from docdelta.report import summarize
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
    hint = partial(cached_power_hint, store.workdir / POWER_HINT_CACHE)
    return summarize(manifest, detection, judged, noise=noise, alpha=alpha, docs=docs, power_hint=hint)
