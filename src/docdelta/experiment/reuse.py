"""Results across PRs: reuse an arm's runs when nothing that could change them changed.

Most PRs that touch AGENTS.md share their base with many others, and the base arm is
the same experiment every time. An arm is identified by `ArmKey`: the sealed source
(the source commit's files without any instruction file), the arm's instruction-file
overlay (an arm's: its condition's files plus its own), every task file, the agent and its
version, the model (an arm's own, `Manifest.agent_of`), the sandbox and image
digest, the seed, the repeat count, the run bounds (timeout, turn cap, per-run and gateway
budgets, upstreams) and docdelta's own version. Its sha256 names a `CachedArm` entry.

The backends (`docdelta.results.backends`) store entries as bytes under that name.

Reuse = `restore` copies the cached results into the run's `ResultStore` before the
runner starts, so its resume logic skips those cells.

Pooling = every complete base arm `save` stores is also listed in its pool, one member entry
per batch (`pools/<pool>/<arm>.json`, a `PoolBatch`; the pool is named by the key without the
seed and the repeat count: the same sealed source, overlay, tasks, agent and version, model,
sandbox, image, bounds and docdelta version). One file per member, not one index rewritten by
every save: two runs saving at once each add their own file, where a read-modify-write of a
shared index let the later push drop the other's entry. `pool`
gathers the earlier batches of this experiment's base arm as extra control runs, newest
first, and stops at the first batch that differs from the newer ones (a drift check per
batch; the comment shows it when it fires): the control's estimate sharpens PR after PR
while it stays one experiment. Everything read from a backend
is validated with pydantic and checked against the experiment before it is used: a
stale or tampered entry is ignored, never trusted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field, ValidationError

from docdelta.agents.models import RunStatus
from docdelta.experiment.plan import Experiment
from docdelta.results.backends import POOL_PREFIX, ArmStore, member_name
from docdelta.results.models import AgentInfo, RunBounds, RunResult
from docdelta.results.store import ResultStore
from docdelta.scorecard import stats
from docdelta.scorecard.models import PoolBatch, PoolDrift, PooledControl
from docdelta.vocabulary import SCHEMA_VERSION, Frozen, sha256_hex

log = logging.getLogger("docdelta.experiment.reuse")


# ------------------------------------------------------------------- the key
class ArmKey(Frozen):
    """Everything that makes two runs of one arm the same experiment."""

    schema_version: int = SCHEMA_VERSION
    condition: str
    source_sha256: str = Field(description="the sealed source without instruction files")
    overlay_sha256: str
    tasks: dict[str, str]
    agent: AgentInfo
    sandbox: str
    image_digest: str | None
    seed: int
    repeats: int
    bounds: RunBounds | None
    docdelta_version: str

    @property
    def digest(self) -> str:
        return sha256_hex(self.model_dump_json().encode())

    @property
    def pool_digest(self) -> str:
        """The key without the seed and the repeat count: batches of one arm that may be pooled."""
        return POOL_PREFIX + sha256_hex(self.model_dump_json(exclude=POOL_FREE).encode())


POOL_FREE = {"seed", "repeats"}
"""What may differ between pooled batches of one arm: how many runs, and their seeds."""
DRIFT_ALPHA = 0.01
"""A batch whose scores differ from the newer pooled runs at this two-sided level (stratified
permutation test) ends the pool: strict, because a false drift only costs pooled runs, while a
missed one biases the control."""


def arm_key(exp: Experiment, condition: str) -> ArmKey:
    m = exp.manifest
    checkout = exp.checkouts[condition]
    return ArmKey(
        condition=condition,
        source_sha256=checkout.source_sha256,
        overlay_sha256=checkout.overlay_sha256,
        tasks=m.tasks,
        agent=m.agent_of(condition),  # an arm's own agent and model (docdelta.experiment.arms)
        sandbox=m.sandbox,
        image_digest=m.image_digest,
        seed=m.seed,
        repeats=m.repeats,
        bounds=m.bounds,
        docdelta_version=m.docdelta_version,
    )


class CachedArm(Frozen):
    """One stored entry: the key it was saved under and the arm's complete results."""

    schema_version: int = SCHEMA_VERSION
    key: ArmKey
    source_commit: str = Field(description="the commit the runs were made on, for the report")
    results: list[RunResult]


@dataclass(frozen=True)
class Reuse:
    """What `restore` took from the cache, for the comment."""

    condition: str
    digest: str
    source_commit: str
    runs: int


# ------------------------------------------------------------------ backends


# ----------------------------------------------------------- restore / save
def _usable(entry: CachedArm, exp: Experiment, key: ArmKey) -> list[RunResult]:
    """The entry's results if every one belongs to this arm of this experiment, else []."""
    planned = {c.key for c in exp.manifest.order if c.condition == key.condition}
    seen: set[str] = set()
    for r in entry.results:
        ok = (
            r.cell.key in planned
            and r.cell.key not in seen
            and r.status is not RunStatus.infra_error
            and r.task_sha256 == key.tasks.get(r.cell.task)
            and r.overlay_sha256 == key.overlay_sha256
            and r.tree_sha256 == exp.checkout(r.cell.task, key.condition).tree_sha256
        )
        if not ok:
            log.warning(
                "cache entry %s does not match this experiment (%s); ignored", key.digest[:12], r.cell.key
            )
            return []
        seen.add(r.cell.key)
    return list(entry.results) if seen == planned else []


def restore(backend: ArmStore, exp: Experiment, store: ResultStore, condition: str) -> Reuse | None:
    """Copy a matching cached arm into `store` (cells already there are kept); None on a miss."""
    key = arm_key(exp, condition)
    data = backend.get(key.digest)
    if data is None:
        return None
    try:
        entry = CachedArm.model_validate_json(data)
    except ValidationError as exc:
        log.warning("cache entry %s is not valid (%s); ignored", key.digest[:12], exc.errors()[0]["msg"])
        return None
    if entry.key != key:
        log.warning("cache entry %s was saved under another key; ignored", key.digest[:12])
        return None
    results = _usable(entry, exp, key)
    if not results:
        return None
    for r in results:
        if store.load(exp.repo_name, r.cell) is None:
            store.save(exp.repo_name, r)
    return Reuse(condition, key.digest, entry.source_commit, len(results))


def save(backend: ArmStore, exp: Experiment, results: Sequence[RunResult], condition: str) -> bool:
    """Store the arm when it is complete (every planned cell graded, no infra error), and list
    it in its pool."""
    key = arm_key(exp, condition)
    arm = [r for r in results if r.cell.condition == condition and r.status is not RunStatus.infra_error]
    planned = {c.key for c in exp.manifest.order if c.condition == condition}
    if not planned or {r.cell.key for r in arm} != planned:
        return False
    entry = CachedArm(
        key=key, source_commit=exp.manifest.source_sha, results=sorted(arm, key=lambda r: r.cell.key)
    )
    backend.put(key.digest, entry.model_dump_json().encode())
    batch = PoolBatch(
        digest=key.digest,
        source_commit=exp.manifest.source_sha,
        finished_at=max(r.finished_at for r in arm),
        runs=len(arm),
    )
    backend.put(member_name(key.pool_digest, key.digest), batch.model_dump_json().encode())
    return True


# --------------------------------------------------------------------- pool
class PoolIndex(Frozen):
    """The one index file per pool that docdelta 0.x rewrote on every save: still read, so the
    batches a data branch listed there stay pooled; never written."""

    schema_version: int = SCHEMA_VERSION
    pool: str
    batches: list[PoolBatch] = Field(default_factory=list)


def pool_batches(backend: ArmStore, digest: str) -> list[PoolBatch]:
    """The pool's batches: its member entries and an earlier version's index, once each; an
    entry that does not validate is skipped (and logged), never trusted."""
    found: dict[str, PoolBatch] = {}
    legacy = backend.get(digest)
    if legacy is not None:
        try:
            index = PoolIndex.model_validate_json(legacy)
            found.update((b.digest, b) for b in index.batches if index.pool == digest)
        except ValidationError:
            log.warning("pool index %s is not valid; ignored", digest[:17])
    for data in backend.members(digest):
        try:
            batch = PoolBatch.model_validate_json(data)
        except ValidationError:
            log.warning("a member entry of pool %s is not valid; ignored", digest[:17])
            continue
        found.setdefault(batch.digest, batch)
    return list(found.values())


def _batch(backend: ArmStore, batch: PoolBatch, key: ArmKey) -> list[RunResult]:
    """The batch's graded runs when its entry is valid and belongs to the pool, else []."""
    data = backend.get(batch.digest)
    if data is None:
        return []
    try:
        entry = CachedArm.model_validate_json(data)
    except ValidationError:
        return []
    same = entry.key.model_dump(exclude=POOL_FREE) == key.model_dump(exclude=POOL_FREE)
    if not same or entry.key.digest != batch.digest:
        log.warning("pooled batch %s was saved under another key; ignored", batch.digest[:12])
        return []
    return [
        r
        for r in entry.results
        if r.status is not RunStatus.infra_error
        and r.score is not None
        and r.task_sha256 == key.tasks.get(r.cell.task)
    ]


def _strata(newer: Sequence[RunResult], batch: Sequence[RunResult]) -> list[stats.Stratum]:
    tasks = sorted({r.cell.task for r in (*newer, *batch)})
    return [
        (
            [r.score.value for r in batch if r.cell.task == t and r.score is not None],
            [r.score.value for r in newer if r.cell.task == t and r.score is not None],
        )
        for t in tasks
    ]


def pool(backend: ArmStore, exp: Experiment, condition: str) -> PooledControl | None:
    """Earlier complete batches of this arm (not the one this run itself reuses or will save),
    newest first, up to the first that drifted from the newer ones; None when there is none."""
    key = arm_key(exp, condition)
    batches = pool_batches(backend, key.pool_digest)
    taken: list[PoolBatch] = []
    runs: list[RunResult] = []
    drift: PoolDrift | None = None
    for batch in sorted(batches, key=lambda b: b.finished_at, reverse=True):
        if batch.digest == key.digest:
            continue  # this experiment's own arm: restored into the store, not pooled twice
        found = _batch(backend, batch, key)
        if not found:
            continue
        test = stats.permutation_test(_strata(runs, found), seed=exp.manifest.seed) if runs else None
        if test is not None and test.p_value <= DRIFT_ALPHA:
            drift = PoolDrift(batch=batch, p_value=test.p_value, delta=test.statistic, alpha=DRIFT_ALPHA)
            break
        taken.append(batch)
        runs.extend(found)
    if not taken:
        return None
    return PooledControl(condition=condition, batches=taken, results=runs, drift=drift)


__all__ = [
    "ArmKey",
    "CachedArm",
    "Reuse",
    "arm_key",
    "pool",
    "restore",
    "save",
]
