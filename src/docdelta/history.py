"""Receipts and history: every finished evaluation leaves one record, and every instruction
file content it evaluated a receipt.

A history directory (`--history DIR`; in the Action, `<results-path>/history`) holds:

* `history.ndjson`, append-only: one `HistoryRecord` per evaluation — the identity hashes of
  every arm's instruction files and every task, the arms' scores and cost, the verdict. A
  rerun of the same experiment with the same runs appends nothing; lines are only added;
* `receipts/<sha256>.json`, one per instruction file content: the evaluations in which a
  file with exactly these bytes was the head arm, with each verdict. CI checks the file being
  merged against it (`docdelta receipt`): a receipt is content-addressed, so an AGENTS.md
  edited after its evaluation has none.

Writers hold an flock on the directory's lock file; a line a crash cut short is skipped by
readers (and counted), never trusted.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field, ValidationError

from docdelta import stats
from docdelta.errors import ConfigError
from docdelta.models import (
    HEAD,
    SCHEMA_VERSION,
    AgentInfo,
    Frozen,
    GatePolicy,
    Manifest,
    Summary,
    VerdictSummary,
    sha256_hex,
)
from docdelta.store import atomic_write

HISTORY_DIR = "history"
"""The Action's history directory, inside its results path (kept with it by actions/cache)."""
HISTORY_FILE = "history.ndjson"
RECEIPTS_DIR = "receipts"
LOCK_FILE = ".lock"


class ArmRecord(Frozen):
    condition: str
    files: dict[str, str] = Field(description="instruction file path -> sha256 of its bytes")
    overlay_sha256: str
    runs: int
    mean_score: float | None
    cost_usd: float | None
    agent: AgentInfo | None = Field(
        default=None, description="an arm's own agent and model (`--arms`); None: the evaluation's agent"
    )


class HistoryRecord(Frozen):
    """One line of history.ndjson."""

    schema_version: int = SCHEMA_VERSION
    experiment: str = Field(description="the manifest's identity hash")
    recorded_at: datetime
    repo: str
    base_sha: str
    head_sha: str
    source_sha: str
    docdelta_version: str
    agent: AgentInfo
    tasks: dict[str, str] = Field(description="task id -> sha256 of its file")
    arms: list[ArmRecord]
    task_scores: dict[str, dict[str, float | None]] = Field(
        description="shown task -> condition -> mean score (holdout tasks only in the arms' means)"
    )
    verdict: VerdictSummary | None
    verdict_refused: str | None = None
    cost_usd: float | None


class ReceiptEntry(Frozen):
    experiment: str
    recorded_at: datetime
    head_sha: str
    verdict: VerdictSummary | None
    verdict_refused: str | None = None

    def gate(self, policy: GatePolicy) -> stats.GateDecision:
        return stats.gate(self.verdict, policy, refused=self.verdict_refused)


class Receipt(Frozen):
    """receipts/<sha256>.json: the evaluations of one instruction file's exact content."""

    schema_version: int = SCHEMA_VERSION
    sha256: str
    paths: list[str] = Field(description="where a file with this content was evaluated")
    evaluations: list[ReceiptEntry]


def record_of(manifest: Manifest, summary: Summary, *, now: datetime | None = None) -> HistoryRecord:
    """The history line of one finished evaluation."""
    arms = []
    for spec in manifest.conditions:
        stats_ = summary.overall.get(spec.name)
        arms.append(
            ArmRecord(
                condition=spec.name,
                files=spec.files,
                overlay_sha256=spec.overlay_sha256,
                runs=stats_.runs if stats_ else 0,
                mean_score=stats_.mean_score if stats_ else None,
                cost_usd=stats_.total_cost_usd if stats_ else None,
                agent=manifest.arms[spec.name].agent if spec.name in manifest.arms else None,
            )
        )
    costs = [a.cost_usd for a in arms if a.cost_usd is not None]
    return HistoryRecord(
        experiment=manifest.identity(),
        recorded_at=now or datetime.now(UTC),
        repo=summary.repo,
        base_sha=manifest.base_sha,
        head_sha=manifest.head_sha,
        source_sha=manifest.source_sha,
        docdelta_version=manifest.docdelta_version,
        agent=manifest.agent,
        tasks=manifest.tasks,
        arms=arms,
        task_scores={t.task: {c: s.mean_score for c, s in t.conditions.items()} for t in summary.tasks},
        verdict=summary.verdict,
        verdict_refused=summary.verdict_refused or summary.broken,
        cost_usd=sum(costs) if costs else None,
    )


class History:
    """A history directory: the NDJSON log and the receipts."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(
                f"cannot write the history directory {self.root}: {exc.strerror or exc}",
                hint="pass --history a directory you can write to",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def records(self) -> tuple[list[HistoryRecord], int]:
        """(every readable record in order, lines that were not one)."""
        path = self.root / HISTORY_FILE
        if not path.is_file():
            return [], 0
        good: list[HistoryRecord] = []
        bad = 0
        for line in path.read_bytes().splitlines():
            if not line.strip():
                continue
            try:
                good.append(HistoryRecord.model_validate_json(line))
            except ValidationError:
                bad += 1
        return good, bad

    def append(self, record: HistoryRecord) -> bool:
        """Add the record and update the receipts of its head arm's files; False when this
        experiment with these runs is recorded already (a rerun that ran nothing new)."""
        with self._locked():
            records, _ = self.records()
            runs = [a.runs for a in record.arms]
            if any(r.experiment == record.experiment and [a.runs for a in r.arms] == runs for r in records):
                return False
            with (self.root / HISTORY_FILE).open("ab") as fh:
                fh.write(record.model_dump_json().encode() + b"\n")  # one write: one whole line
                fh.flush()
                os.fsync(fh.fileno())
            head = next((a for a in record.arms if a.condition == HEAD), None)
            for path, digest in sorted((head.files if head else {}).items()):
                self._add_receipt(path, digest, record)
        return True

    def _receipt_path(self, digest: str) -> Path:
        return self.root / RECEIPTS_DIR / f"{digest}.json"

    def receipt(self, digest: str) -> Receipt | None:
        path = self._receipt_path(digest)
        try:
            return Receipt.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            return None

    def _add_receipt(self, path: str, digest: str, record: HistoryRecord) -> None:
        old = self.receipt(digest) or Receipt(sha256=digest, paths=[], evaluations=[])
        entry = ReceiptEntry(
            experiment=record.experiment,
            recorded_at=record.recorded_at,
            head_sha=record.head_sha,
            verdict=record.verdict,
            verdict_refused=record.verdict_refused,
        )
        new = Receipt(
            sha256=digest,
            paths=sorted({*old.paths, path}),
            evaluations=[*old.evaluations, entry],
        )
        atomic_write(self._receipt_path(digest), new.model_dump_json(indent=2).encode() + b"\n")


def content_digest(data: bytes) -> str:
    """The receipt name of a file's bytes (the manifest's hash of instruction files)."""
    return sha256_hex(data)


def render(records: list[HistoryRecord], path: str | None, skipped: int) -> str:
    """One line per evaluation, oldest first; with `path`, that file's content hash at head."""
    lines = []
    for r in records:
        head = next((a for a in r.arms if a.condition == HEAD), None)
        if path is not None and (head is None or path not in head.files):
            continue
        digest = head.files[path][:12] if head is not None and path is not None else ""
        arms = " · ".join(
            f"{a.condition} {'—' if a.mean_score is None else f'{a.mean_score:.2f}'}" for a in r.arms
        )
        verdict = r.verdict.kind if r.verdict else f"no verdict ({r.verdict_refused or 'no shared task'})"
        delta = f" {r.verdict.estimate:+.2f} p={r.verdict.p_value:.3g}" if r.verdict else ""
        cost = f" ${r.cost_usd:.2f}" if r.cost_usd is not None else ""
        file_part = f" {path}@{digest}" if path else ""
        when = f"{r.recorded_at:%Y-%m-%d %H:%M}"
        lines.append(f"{when} head {r.head_sha[:12]}{file_part}  {arms}  {verdict}{delta}{cost}")
    if not lines:
        lines.append("no evaluation recorded" + (f" with {path} in its head arm" if path else ""))
    if skipped:
        lines.append(f"({skipped} unreadable line(s) skipped)")
    return "\n".join(lines)
