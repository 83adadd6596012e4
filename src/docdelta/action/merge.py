"""The aggregate job of a job matrix (the `merge` input): every shard's results merged into
one workdir and scored, exactly as one job's run would be; nothing runs here."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from docdelta.action.publish import JobResults
from docdelta.action.settings import ActionSettings
from docdelta.errors import ConfigError
from docdelta.experiment.shard import merge_workdirs
from docdelta.results.layout import MANIFEST_FILE
from docdelta.scorecard.workdir import score_workdir


def merged_shards(settings: ActionSettings, shards: Path, workdir: Path) -> JobResults:
    """Merge every shard's results found under `shards` (the downloaded artifacts) into
    `workdir` and score the merged workdir."""
    found = sorted(m.parent for m in shards.rglob(MANIFEST_FILE))
    if not found:
        raise ConfigError(
            f"input 'merge': no shard results (manifest.json) under {shards}",
            hint="download every run job's results-path artifact into that directory",
        )
    merged = merge_workdirs(found, workdir)
    scored = score_workdir(workdir)
    assert scored is not None  # merge_workdirs copied the manifest and detection from every shard
    store, results = scored.store, scored.results
    # As for one job's run (`job.run_job`): the scorecard names the repository, not the checkout.
    summary = scored.summary.model_copy(update={"repo": settings.github.repository})
    stopped = (
        f"{len(merged.missing)} planned runs have no result (a shard is missing)" if merged.missing else None
    )
    notes = [f"**Merged** {merged.shards} shards: {merged.complete} of {len(merged.manifest.order)} runs."]
    cost = sum(r.outcome.metrics.cost_usd or 0.0 for r in results)
    cell_dir = partial(store.cell_dir, merged.manifest.repo)
    return JobResults(summary, notes, stopped, cost, results, cell_dir, merged.manifest, None, workdir)
