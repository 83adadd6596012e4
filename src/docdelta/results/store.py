"""The result layout on disk: one directory per cell, atomic writes, resume by reuse.

    <workdir>/manifest.json                      the plan and every identifying hash
    <workdir>/detection.json                     which instruction files changed
    <workdir>/checkouts/<overlay sha256[:16]>/   each condition's sealed checkout
    <workdir>/runs/<repo>/<task>/<condition>/r<n>/result.json

A result file is written once, atomically (temp file + rename), when its run is
complete, and never rewritten: a crash mid-matrix leaves every finished result
intact and a rerun skips them. One directory per cell and no shared mutable index
keep the door open for parallel jobs and sharded runs that are merged later.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from docdelta.atomic import atomic_write
from docdelta.errors import ConfigError, InfraError
from docdelta.instructions.models import Detection
from docdelta.results.grades import SelftestRecord, SelftestReport
from docdelta.results.layout import CHECKOUTS, DETECTION_FILE, LOCK_FILE, MANIFEST_FILE, RESULT_FILE
from docdelta.results.models import Cell, Manifest, RunResult
from docdelta.vocabulary import SCHEMA_VERSION, sha256_hex

M = TypeVar("M", bound=BaseModel)

CHECKOUT_KEY = ".key"
"""In `CHECKOUTS`: the key that names its checkouts (`checkout_dir`)."""


def checkout_dir(workdir: Path, overlay_sha256: str, source_sha: str | None = None) -> Path:
    """Where a condition's sealed checkout lives: named by a keyed hash of its overlay's
    content, never by the condition's name (two conditions with equal docs share one). A
    change task that names its own source commit gets checkouts of that commit, keyed by it
    too. The key is the workdir's own (`CHECKOUT_KEY`), so reruns, shards merged into it and
    readers of its results find the same names, while a run whose sandbox mounts the sealed
    checkout directly (its path readable in /proc/mounts) learns nothing from the name: a
    bare overlay hash would name `none`, whose overlay is a known constant."""
    key = _checkout_key(workdir / CHECKOUTS)
    name = sha256_hex(f"{key}\0{overlay_sha256}\0{source_sha or ''}".encode())[:16]
    return workdir / CHECKOUTS / name


def _checkout_key(directory: Path) -> str:
    """The workdir's random checkout key, made on first use: written whole beside, then
    linked into place, so racing makers agree on the first and no reader sees half of it.
    A workdir that has none and cannot get one (a report read from a read-only copy) holds
    no checkout either: "" then names none that exists."""
    path = directory / CHECKOUT_KEY
    if not path.is_file():
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f"{CHECKOUT_KEY}.", dir=directory)
        except OSError:
            return ""
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(16))
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    return path.read_text().strip()


def _safe_segment(name: str) -> str:
    """Repository names like `owner/name` become one path segment."""
    return name.replace("/", "__").replace("\\", "__") or "repo"


class ResultStore:
    """Reads and writes one experiment's files under a workdir."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.set_aside: list[Path] = []
        """Unreadable results `load` renamed to corrupt-<n>.json, for the CLI to report."""
        try:
            workdir.mkdir(parents=True, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=workdir, prefix=".probe-", delete=True)  # noqa: SIM115
            probe.close()
        except OSError as exc:
            raise ConfigError(
                f"workdir {workdir} is not writable: {exc.strerror or exc}",
                hint="pass a --workdir you can write to",
            ) from exc

    @property
    def manifest_path(self) -> Path:
        return self.workdir / MANIFEST_FILE

    @property
    def detection_path(self) -> Path:
        return self.workdir / DETECTION_FILE

    def runs_dir(self, repo: str) -> Path:
        return self.workdir / "runs" / _safe_segment(repo)

    def cell_dir(self, repo: str, cell: Cell) -> Path:
        return self.runs_dir(repo) / cell.task / cell.condition / f"r{cell.repeat}"

    # ------------------------------------------------------------ generic
    def _read(self, path: Path, model: type[M]) -> M | None:
        if not path.exists():
            return None
        try:
            return model.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            raise ConfigError(
                f"{path} is not a valid {model.__name__} (schema {SCHEMA_VERSION}): "
                f"{exc.errors()[0]['msg']} at {'.'.join(map(str, exc.errors()[0]['loc']))}",
                hint="it was written by another docdelta version or edited by hand; use a fresh --workdir",
            ) from exc

    def _write(self, path: Path, model: BaseModel) -> None:
        try:
            atomic_write(path, model.model_dump_json(indent=2).encode() + b"\n")
        except OSError as exc:
            raise InfraError(f"could not write {path}: {exc}", hint="check free disk space") from exc

    # ----------------------------------------------------------- manifest
    def read_manifest(self) -> Manifest | None:
        return self._read(self.manifest_path, Manifest)

    def write_manifest(self, manifest: Manifest) -> None:
        self._write(self.manifest_path, manifest)

    def read_detection(self) -> Detection | None:
        return self._read(self.detection_path, Detection)

    def write_detection(self, detection: Detection) -> None:
        self._write(self.detection_path, detection)

    # ------------------------------------------------------------- results
    def load(self, repo: str, cell: Cell) -> RunResult | None:
        """The complete result of a cell, or None when it has not finished yet.

        A result.json that does not parse (a disk fault, a hand edit) is set aside as
        `corrupt-<n>.json` beside the cell, kept for a human to read, and the cell counts
        as not run, so one bad file costs one rerun, not the experiment."""
        path = self.cell_dir(repo, cell) / RESULT_FILE
        result = self._read_result(path)
        if result is None and path.exists():
            n = len(list(path.parent.glob("corrupt-*.json"))) + 1
            kept = path.rename(path.parent / f"corrupt-{n}.json")
            self.set_aside.append(kept)
        return result

    def _read_result(self, path: Path) -> RunResult | None:
        """A result, or None when it is missing or unreadable."""
        try:
            return self._read(path, RunResult)
        except ConfigError:
            return None

    def save(self, repo: str, result: RunResult) -> Path:
        path = self.cell_dir(repo, result.cell) / RESULT_FILE
        if path.exists():
            raise InfraError(
                f"refusing to overwrite the complete result {path}",
                hint="complete results are never rewritten; delete the file to rerun that cell",
            )
        self._write(path, result)
        return path

    def save_artifact(self, repo: str, cell: Cell, name: str, data: bytes) -> Path:
        """A file beside a cell's result (e.g. the agent's `diff.patch`), written before the
        result so a complete result always has its artifacts."""
        path = self.cell_dir(repo, cell) / name
        try:
            atomic_write(path, data)
        except OSError as exc:
            raise InfraError(f"could not write {path}: {exc}", hint="check free disk space") from exc
        return path

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the workdir for one `docdelta run`: a second run on it would execute the same
        cells twice and collide on their result files. An flock, so the kernel releases it
        when the holder dies, however it dies; the file names the holder for the refusal."""
        path = self.workdir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConfigError(
                    f"workdir {self.workdir} is in use by another docdelta run ({_holder(path)})",
                    hint="wait for it to finish, or give this run its own --workdir",
                ) from None
            holder = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(holder).encode(), 0)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def selftest_path(self, task: str) -> Path:
        return self.workdir / "selftest" / f"{task}.json"

    def selftest_passed(self, task: str, key: str) -> bool:
        """True when a passing selftest of exactly this task, assets and source is on file."""
        record = self._read(self.selftest_path(task), SelftestRecord)
        return record is not None and record.key == key and record.report.passed

    def save_selftest(self, task: str, key: str, report: SelftestReport) -> None:
        """Kept passed or failed: a failed one is what the scorecard shows of a run that stopped."""
        self._write(self.selftest_path(task), SelftestRecord(key=key, report=report))

    def failed_selftests(self, tasks: Iterable[str]) -> list[SelftestReport]:
        """The latest selftest of each of `tasks` that failed (a later pass replaces it)."""
        records = (self._read(self.selftest_path(t), SelftestRecord) for t in sorted(tasks))
        return [r.report for r in records if r is not None and not r.report.passed]

    def results(self, repo: str) -> list[RunResult]:
        """Every complete result under the repo's runs directory, in a stable order; an
        unreadable one is left out (and set aside by `load` when its cell runs again)."""
        found = sorted(self.runs_dir(repo).glob(f"*/*/r*/{RESULT_FILE}"))
        return [r for p in found if (r := self._read_result(p)) is not None]


def _holder(path: Path) -> str:
    """`pid 123 on host build-7, started 2026-01-01T10:00:00+00:00`, from a lock file."""
    try:
        data = json.loads(path.read_text())
        return f"pid {data['pid']} on host {data['host']}, started {data['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown: it is starting up"
