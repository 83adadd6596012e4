"""One evaluation spread over many GitHub Actions jobs: plan, shard, merge.

GitHub Actions' job matrix is the distributed engine docdelta's users already have, so we
use it instead of anything home-made: `docdelta plan` writes the matrix for a dynamic
`strategy.matrix`, each job runs `docdelta run --shard I/N` (a deterministic slice of the
manifest's seeded order) into its own workdir and uploads it, and one aggregate job runs
`docdelta merge` over the downloaded workdirs, then `report`/`badge`/the bot read the
merged one.

A shard is every N-th cell of the seeded, interleaved order, starting at the I-th: each
job gets a slice of every repeat round and every condition, so drift over the matrix's
wall time still hits all arms alike, and shards are within one cell of equal size.

Merge is safe because a shard's workdir holds the full manifest: every shard must have
run the same manifest identity (`Manifest.identity`), or the merge is refused naming
the fields that differ, and two shards that both hold a complete result of one cell
must hold the same bytes.
"""

from __future__ import annotations

import filecmp
import math
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from docdelta.errors import ConfigError
from docdelta.experiment.plan import differences
from docdelta.experiment.runner import RATE_LIMIT_LOG
from docdelta.results.layout import CHECKOUTS, DETECTION_FILE, LOCK_FILE, MANIFEST_FILE, RESULT_FILE
from docdelta.results.models import Cell, Manifest
from docdelta.results.store import ResultStore
from docdelta.validate import DEFAULT_MAX_PARALLEL
from docdelta.vocabulary import Frozen

GITHUB_MAX_JOBS = 256
"""A workflow run's job matrix may generate at most 256 jobs."""

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`, counted from 1 as GitHub's matrix values are written."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N` with 1 <= I <= N; a ValueError says what was expected."""
        match = _SHARD.match(text)
        if match is None:
            raise ValueError(f"expected I/N such as 2/8, got {text!r}")
        index, count = int(match[1]), int(match[2])
        if not 1 <= index <= count:
            raise ValueError(f"expected I/N with 1 <= I <= N, got {text!r}")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def cells(self, order: Sequence[Cell]) -> list[Cell]:
        """This shard's cells: every `count`-th cell of the seeded order from the `index`-th."""
        return list(order[self.index - 1 :: self.count])


class MatrixPlan(Frozen):
    """What `docdelta plan` writes: the job matrix and the numbers behind it."""

    evaluate: bool = Field(description="false: no instruction file changed; skip the run jobs")
    cells: int = Field(description="tasks x conditions x repeats")
    jobs: int
    cells_per_job: int = Field(description="the most cells any one job runs")
    max_parallel: int
    matrix: dict[str, list[dict[str, str]]] = Field(
        description="for `strategy.matrix: ${{ fromJSON(...) }}`: one `include` entry per job, its `shard` "
        "(I/N, the `shard` input) and `id` (I-of-N: a `/` is not allowed in an artifact name, and "
        "`strategy.job-index` is not set by every runner, e.g. act)"
    )


def plan_matrix(
    cells: int, *, max_parallel: int = DEFAULT_MAX_PARALLEL, cells_per_job: int | None = None
) -> MatrixPlan:
    """Batch `cells` into jobs: one job per cell up to `max_parallel` jobs (more jobs than
    run at once only add start-up time), or batches of `cells_per_job`; never more than
    GitHub's 256 jobs."""
    if max_parallel < 1 or (cells_per_job is not None and cells_per_job < 1):
        raise ConfigError("max-parallel and cells-per-job must be at least 1", hint="e.g. --max-parallel 20")
    wanted = max_parallel if cells_per_job is None else math.ceil(cells / cells_per_job)
    jobs = max(1, min(cells, wanted, GITHUB_MAX_JOBS))
    return MatrixPlan(
        evaluate=cells > 0,
        cells=cells,
        jobs=jobs,
        cells_per_job=math.ceil(cells / jobs),
        max_parallel=min(max_parallel, jobs),
        matrix={"include": [{"shard": f"{i}/{jobs}", "id": f"{i}-of-{jobs}"} for i in range(1, jobs + 1)]},
    )


@dataclass
class MergeReport:
    """What `merge_workdirs` did, for the CLI to print."""

    manifest: Manifest
    shards: int
    complete: int = 0
    missing: list[Cell] = field(default_factory=list)


def merge_workdirs(sources: Sequence[Path], dest: Path) -> MergeReport:
    """Combine shards' workdirs into `dest`: the shared manifest, detection and sealed
    checkouts once, and every cell's files. Refuses shards of different experiments
    (naming what differs) and two different complete results of one cell."""
    if not sources:
        raise ConfigError(
            "merge needs at least one shard workdir", hint="docdelta merge DIR... --workdir OUT"
        )
    manifests = [_manifest(src) for src in sources]
    first = manifests[0]
    for src, other in zip(sources[1:], manifests[1:], strict=True):
        _same_experiment(sources[0], first, src, other)
    store = ResultStore(dest)
    with store.lock():
        previous = store.read_manifest()
        if previous is not None:
            _same_experiment(dest, previous, sources[0], first)
        for src in sources:
            _copy_checkouts(src, dest)
            _copy_tree(src, dest, skip_top={MANIFEST_FILE, LOCK_FILE, RATE_LIMIT_LOG, CHECKOUTS})
        logs = [src / RATE_LIMIT_LOG for src in sources if (src / RATE_LIMIT_LOG).is_file()]
        if logs:
            with (dest / RATE_LIMIT_LOG).open("a", encoding="utf-8") as out:
                out.writelines(log.read_text(encoding="utf-8") for log in logs)
        store.write_manifest(previous or min(manifests, key=lambda m: m.created_at))
        report = MergeReport(first, len(sources))
        for cell in first.order:
            if (store.cell_dir(first.repo, cell) / RESULT_FILE).is_file():
                report.complete += 1
            else:
                report.missing.append(cell)
    return report


def _manifest(workdir: Path) -> Manifest:
    manifest = ResultStore(workdir).read_manifest() if workdir.is_dir() else None
    if manifest is None or not (workdir / DETECTION_FILE).is_file():
        raise ConfigError(
            f"{workdir} holds no docdelta experiment (manifest.json or detection.json missing)",
            hint="pass the workdirs `docdelta run --shard` wrote (each job's uploaded artifact)",
        )
    return manifest


def _same_experiment(a_dir: Path, a: Manifest, b_dir: Path, b: Manifest) -> None:
    if a.identity() == b.identity():
        return
    old, new = a.comparable(), b.comparable()
    raise ConfigError(
        f"{b_dir} ran a different experiment than {a_dir} (differs in: {', '.join(differences(old, new))})",
        hint="merge only the shards of one `docdelta plan`: same refs, tasks, agent, options and seed",
    )


def _copy_checkouts(src: Path, dest: Path) -> None:
    """Each sealed checkout once, from the first shard that has it: its directory is named
    by its overlay's hash, which the manifest identity holds, so shards' copies agree in
    content (only git's index timestamps differ)."""
    for checkout in sorted((src / CHECKOUTS).glob("*")):
        target = dest / CHECKOUTS / checkout.name
        if target.exists():
            continue
        if checkout.is_dir():
            shutil.copytree(checkout, target, symlinks=True)
        else:  # a record `workspace.seal_once` keeps beside a checkout, or the checkouts' key
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(checkout, target)


def _copy_tree(src: Path, dest: Path, skip_top: set[str]) -> None:
    """Copy every file of `src` into `dest`; a file already there must be identical (the
    same sealed checkout, the same selftest), except that a differing complete result of
    one cell in two shards is refused."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_dir() or rel.parts[0] in skip_top or rel.name.startswith(".probe-"):
            continue
        target = dest / rel
        if target.exists() or target.is_symlink():
            if path.is_symlink() and target.is_symlink() and path.readlink() == target.readlink():
                continue
            if not path.is_symlink() and filecmp.cmp(path, target, shallow=False):
                continue
            raise ConfigError(
                f"{rel} differs between shards (in {src} and an earlier one)",
                hint="each cell runs in exactly one shard: merge the artifacts of one workflow run only",
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            target.symlink_to(path.readlink())
        else:
            shutil.copy2(path, target)
