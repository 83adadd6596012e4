"""Receipts and history: every finished evaluation leaves one record, and every instruction
file content it evaluated a receipt.

A history lives in any results-store backend (`docdelta.experiment.reuse`: a directory, or the data
branch), under a prefix: `--history DIR` is a directory of its own (prefix ""); the Action
keeps it in its `results-store` under `history/`, or in `<results-path>/history` without one.
It holds, one file per record, never a file two writers rewrite:

* `records/<time>-<key>.json`: one `HistoryRecord` per evaluation — the identity hashes of
  every arm's instruction files and every task, the arms' scores and cost, the verdict, the
  PR. `<key>` names the experiment and its runs, so a rerun that ran nothing new adds nothing,
  and two identical records (two reruns at once) are read as one;
* `receipts/<sha256>/<time>-<key>.json`: one `ReceiptEntry` per evaluation in which a file
  with exactly these bytes was the head arm. CI checks the file being merged against them
  (`docdelta receipt`, the Action's `receipt` input): a receipt is content-addressed, so an
  AGENTS.md edited after its evaluation has none.

Two Action runs saving at once each add their own files (on the data branch, one commit
each, retried on the newer tip), so neither loses the other's record: the read merges the
members. Earlier layouts are still read: `history.ndjson` (one record per line; a line a crash
cut short is skipped and counted, never trusted) and `receipts/<sha256>.json`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field, ValidationError

from docdelta.errors import InfraError
from docdelta.instructions.models import ChangedFile, FileStatus
from docdelta.results.backends import ArmStore, DirectoryStore
from docdelta.results.models import AgentInfo, Manifest
from docdelta.scorecard import stats, thresholds
from docdelta.scorecard.models import GatePolicy, Summary, VerdictSummary
from docdelta.vocabulary import BASE, HEAD, SCHEMA_VERSION, Frozen, sha256_hex

HISTORY_DIR = "history"
"""The history's folder in the Action's results store, or in its results path without one."""
RECORDS_DIR = "records"
RECEIPTS_DIR = "receipts"
LEGACY_FILE = "history.ndjson"
"""The single append-only file earlier versions wrote; read, never written."""
HISTORY_ROWS = 5
"""Earlier evaluations per file in the PR comment's history section."""


class HistoryArm(Frozen):
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
    """One evaluation: a `records/` member (a line of an earlier version's history.ndjson)."""

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
    arms: list[HistoryArm]
    task_scores: dict[str, dict[str, float | None]] = Field(
        description="shown task -> condition -> mean score (holdout tasks only in the arms' means)"
    )
    verdict: VerdictSummary | None
    verdict_refused: str | None = None
    cost_usd: float | None
    pr: int | None = Field(default=None, description="the pull request the Action evaluated")
    threshold_failures: list[str] = Field(
        default=[], description="tasks whose head arm missed its pass threshold where base met it"
    )

    @property
    def key(self) -> str:
        """The experiment and how many runs each arm had: a rerun that ran nothing new has
        the same key, and is the same record."""
        runs = ",".join(f"{a.condition}={a.runs}" for a in self.arms)
        return sha256_hex(f"{self.experiment}:{runs}".encode())

    def arm(self, condition: str) -> HistoryArm | None:
        return next((a for a in self.arms if a.condition == condition), None)

    @property
    def head_vs_base(self) -> float | None:
        """The head arm's mean score minus the base arm's (over every task they ran)."""
        head, base = self.arm(HEAD), self.arm(BASE)
        if head is None or base is None or head.mean_score is None or base.mean_score is None:
            return None
        return head.mean_score - base.mean_score


class ReceiptEntry(Frozen):
    """One evaluation of one instruction file content as the head arm."""

    experiment: str
    recorded_at: datetime
    head_sha: str
    verdict: VerdictSummary | None
    verdict_refused: str | None = None
    path: str | None = Field(default=None, description="the file's path in that evaluation")
    pr: int | None = None
    threshold_failures: list[str] = Field(default=[], description="as the evaluation's record")

    def gate(self, policy: GatePolicy) -> stats.GateDecision:
        """The check the evaluation got: a missed pass threshold fails it, as it failed the PR."""
        decision = stats.gate(self.verdict, policy, refused=self.verdict_refused)
        return thresholds.with_failures(decision, self.threshold_failures)


class Receipt(Frozen):
    """The evaluations of one instruction file's exact content (an earlier version's
    receipts/<sha256>.json; now gathered from the `receipts/<sha256>/` members)."""

    schema_version: int = SCHEMA_VERSION
    sha256: str
    paths: list[str] = Field(description="where a file with this content was evaluated")
    evaluations: list[ReceiptEntry]

    def passing(self, policy: GatePolicy, path: str) -> list[ReceiptEntry]:
        """The evaluations that passed `policy` with this content at `path`, oldest first.

        The same bytes at another path were not evaluated there: agents load files by path
        (one agent reads `AGENTS.md`, none of them reads `.cursor/rules/x.mdc` but Cursor), so
        a text that passed where the evaluated agent never read it has no receipt where it
        does. An earlier version's entries name no path: theirs is the receipt's `paths`."""
        return [
            e
            for e in self.evaluations
            if (e.path == path or (e.path is None and path in self.paths))
            and earns_receipt(e.verdict, e.verdict_refused, e.threshold_failures, policy)
        ]

    def passing_elsewhere(self, policy: GatePolicy, path: str) -> list[str]:
        """The other paths this content passed `policy` at (the receipt line says so)."""
        return sorted(
            {e.path for e in self.evaluations if e.path and e.path != path and self.passing(policy, e.path)}
        )


def record_of(
    manifest: Manifest, summary: Summary, *, pr: int | None = None, now: datetime | None = None
) -> HistoryRecord:
    """The history record of one finished evaluation."""
    arms = []
    for spec in manifest.conditions:
        stats_ = summary.overall.get(spec.name)
        arms.append(
            HistoryArm(
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
        pr=pr,
        threshold_failures=summary.threshold_failures,
    )


def _member(record: HistoryRecord) -> str:
    """`<time>-<key>.json`: names sort by time; the key makes a record's name its own."""
    return f"{record.recorded_at.astimezone(UTC):%Y%m%dT%H%M%S%fZ}-{record.key[:32]}.json"


class History:
    """A history in a results-store backend, under `prefix` (see the module's docstring)."""

    def __init__(self, backend: ArmStore, prefix: str = "") -> None:
        self.backend = backend
        self.prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""

    @classmethod
    def at(cls, root: Path) -> History:
        """The history directory `root` (`--history DIR`)."""
        return cls(DirectoryStore(root))

    @classmethod
    def kept_in(cls, store: ArmStore | None, results: Path) -> History:
        """The history in the results store `store` (the data branch included), else in the
        results directory `results` (the Action's `results-path`)."""
        if store is not None:
            return cls(store, HISTORY_DIR)
        return cls.at(results / HISTORY_DIR)

    def _path(self, *parts: str) -> str:
        return self.prefix + "/".join(parts)

    def records(self) -> tuple[list[HistoryRecord], int]:
        """(every readable record once, oldest first; members or lines that were not one)."""
        found: dict[str, HistoryRecord] = {}
        bad = 0
        legacy = self.backend.read(self._path(LEGACY_FILE)) or b""
        texts: list[bytes] = [line for line in legacy.splitlines() if line.strip()]
        for name in self.backend.paths(self._path(RECORDS_DIR)):
            data = self.backend.read(name)
            if data is not None and name.endswith(".json"):
                texts.append(data)
        for text in texts:
            try:
                record = HistoryRecord.model_validate_json(text)
            except ValidationError:
                bad += 1
                continue
            found.setdefault(record.key, record)
        return sorted(found.values(), key=lambda r: r.recorded_at), bad

    def append(self, record: HistoryRecord) -> bool:
        """Add the record and a receipt entry for each of its head arm's files, in one step;
        False when this experiment with these runs is recorded already."""
        if any(r.key == record.key for r in self.records()[0]):
            return False
        name = _member(record)
        files = {self._path(RECORDS_DIR, name): record.model_dump_json().encode() + b"\n"}
        head = record.arm(HEAD)
        for path, digest in sorted((head.files if head else {}).items()):
            entry = ReceiptEntry(
                experiment=record.experiment,
                recorded_at=record.recorded_at,
                head_sha=record.head_sha,
                verdict=record.verdict,
                verdict_refused=record.verdict_refused,
                path=path,
                pr=record.pr,
                threshold_failures=record.threshold_failures,
            )
            files[self._path(RECEIPTS_DIR, digest, name)] = entry.model_dump_json().encode() + b"\n"
        self.backend.add(files, f"docdelta history: {record.head_sha[:12]}")
        return True

    def receipt(self, digest: str) -> Receipt | None:
        """Every recorded evaluation of this content as head (the members and an earlier
        version's receipt file, once each), oldest first; None when there is none."""
        entries: dict[tuple[str, datetime], ReceiptEntry] = {}
        paths: set[str] = set()
        legacy = self.backend.read(self._path(RECEIPTS_DIR, f"{digest}.json"))
        if legacy is not None:
            try:
                old = Receipt.model_validate_json(legacy)
            except ValidationError:
                old = None
            if old is not None and old.sha256 == digest:
                paths.update(old.paths)
                entries.update(((e.experiment, e.recorded_at), e) for e in old.evaluations)
        for name in self.backend.paths(self._path(RECEIPTS_DIR, digest)):
            data = self.backend.read(name)
            try:
                entry = ReceiptEntry.model_validate_json(data or b"")
            except ValidationError:
                continue
            entries.setdefault((entry.experiment, entry.recorded_at), entry)
            if entry.path:
                paths.add(entry.path)
        if not entries:
            return None
        ordered = sorted(entries.values(), key=lambda e: e.recorded_at)
        return Receipt(sha256=digest, paths=sorted(paths), evaluations=ordered)


def earns_receipt(
    verdict: VerdictSummary | None, refused: str | None, failures: Sequence[str], policy: GatePolicy
) -> bool:
    """Whether an evaluation with this outcome passed `policy`: it reached a verdict, and its
    check did not fail. An inconclusive verdict passes, as the evaluation's own check did
    (neutral: noise never fails a PR, and a required check lets a neutral one through); at
    the example workflow's 3 repeats an edit that changes no score always ends there, and a
    receipt check that refused it would keep that PR red whatever was evaluated. An
    evaluation without a verdict (refused, or no graded runs on both sides) measured nothing."""
    if verdict is None or refused is not None:
        return False
    return thresholds.with_failures(stats.gate(verdict, policy), failures).conclusion != "failure"


def content_digest(data: bytes) -> str:
    """The receipt name of a file's bytes (the manifest's hash of instruction files)."""
    return sha256_hex(data)


def keep(
    history: History, manifest: Manifest, summary: Summary, *, pr: int | None, policy: GatePolicy, write: bool
) -> tuple[str, InfraError | None]:
    """Record a finished evaluation and its head files' receipts (when `write`), then the
    comment's history section; (the section, why the store refused the write or None). A
    refused write costs the record, never the evaluation."""
    record = record_of(manifest, summary, pr=pr)
    saved, refused = False, None
    if write:
        try:
            history.append(record)  # False when an earlier run recorded it: kept either way
            saved = True
        except InfraError as exc:
            refused = exc
    head = next((c.files for c in manifest.conditions if c.name == HEAD), {})
    heads = [(f.path, head.get(f.path)) for f in summary.changed]
    return comment_section(history, heads, record, saved=saved, policy=policy), refused


def check_receipts(
    history: History, changed: Sequence[ChangedFile], content: Callable[[str], bytes], policy: GatePolicy
) -> tuple[list[str], list[str]]:
    """(a line per changed instruction file, the paths whose new content has no receipt that
    passed `policy`); `content` reads a path's new bytes; a deleted file needs none."""
    lines: list[str] = []
    missing: list[str] = []
    for f in changed:
        if f.status is FileStatus.deleted:
            lines.append(f"- `{f.path}`: deleted by this pull request; no content to hold a receipt")
            continue
        digest = content_digest(content(f.path))
        receipt = history.receipt(digest)
        passing = receipt.passing(policy, f.path) if receipt else []
        if passing:
            last = passing[-1]
            where = f"PR #{last.pr}" if last.pr is not None else f"head `{last.head_sha[:12]}`"
            lines.append(
                f"- `{f.path}` (`{digest[:12]}`): passed in {where} on {last.recorded_at:%Y-%m-%d %H:%M} "
                f"— {last.gate(policy).reason}"
            )
            continue
        missing.append(f.path)
        tried = len(receipt.evaluations) if receipt else 0
        why = f"{tried} evaluation(s) of this content, none passing" if tried else "never evaluated"
        if elsewhere := receipt.passing_elsewhere(policy, f.path) if receipt else []:
            at = ", ".join(f"`{p}`" for p in elsewhere)
            why = f"this content passed only at {at}, never evaluated at this path"
        lines.append(f"- `{f.path}` (`{digest[:12]}`): **no receipt** ({why})")
    return lines, missing


def render(records: list[HistoryRecord], path: str | None, skipped: int) -> str:
    """One line per evaluation, oldest first; with `path`, that file's content hash at head."""
    lines = []
    for r in records:
        head = r.arm(HEAD)
        if path is not None and (head is None or path not in head.files):
            continue
        digest = head.files[path][:12] if head is not None and path is not None else ""
        arms = " · ".join(
            f"{a.condition} {'—' if a.mean_score is None else f'{a.mean_score:.2f}'}" for a in r.arms
        )
        verdict = r.verdict.kind if r.verdict else f"no verdict ({r.verdict_refused or 'no shared task'})"
        p = "" if r.verdict is None or r.verdict.p_value is None else f" p={r.verdict.p_value:.3g}"
        delta = f" {r.verdict.estimate:+.2f}{p}" if r.verdict else ""
        cost = f" ${r.cost_usd:.2f}" if r.cost_usd is not None else ""
        file_part = f" {path}@{digest}" if path else ""
        when = f"{r.recorded_at:%Y-%m-%d %H:%M}"
        pr = f" PR #{r.pr}" if r.pr is not None else ""
        lines.append(f"{when}{pr} head {r.head_sha[:12]}{file_part}  {arms}  {verdict}{delta}{cost}")
    if not lines:
        lines.append("no evaluation recorded" + (f" with {path} in its head arm" if path else ""))
    if skipped:
        lines.append(f"({skipped} unreadable record(s) skipped)")
    return "\n".join(lines)


def _verdict_cell(record: HistoryRecord) -> str:
    if record.verdict is not None:
        return record.verdict.kind.replace("_", " ")
    why = " ".join((record.verdict_refused or "no shared task").split()).replace("|", "/")  # one table cell
    return f"no verdict ({why[:60]}{'…' if len(why) > 60 else ''})"


def _receipt_line(
    path: str,
    digest: str | None,
    earlier: Receipt | None,
    current: HistoryRecord,
    saved: bool,
    policy: GatePolicy,
) -> str:
    """Whether head's content of `path` has a receipt: from an earlier evaluation, or this one."""
    if digest is None:
        return f"Head deletes `{path}`: no content to hold a receipt."
    short = f"`{digest[:12]}`"
    passing = earlier.passing(policy, path) if earlier is not None else []
    if passing:
        last = passing[-1]
        where = f"PR #{last.pr}" if last.pr is not None else f"head `{last.head_sha[:12]}`"
        return (
            f"Head's content {short} already has a receipt: it passed `fail-on: {policy}` in "
            f"{len(passing)} earlier evaluation(s), latest {where} on {last.recorded_at:%Y-%m-%d}."
        )
    if not saved:
        return f"Head's content {short} has no earlier passing evaluation, and this one was not recorded."
    if earns_receipt(current.verdict, current.verdict_refused, current.threshold_failures, policy):
        return f"Head's content {short} had no passing evaluation; this one passed: it is its receipt."
    return f"Head's content {short} has no passing evaluation yet: this one did not pass `fail-on: {policy}`."


def comment_section(
    history: History,
    heads: Sequence[tuple[str, str | None]],
    current: HistoryRecord,
    *,
    saved: bool,
    policy: GatePolicy,
) -> str:
    """The PR comment's folded "History of <file>" sections: for each changed instruction file
    (path, its head content's sha256 or None when head deletes it) the earlier evaluations
    whose head arm held it, newest first, and whether head's content has a receipt. Empty
    when no file has an earlier evaluation. `current`: this evaluation's record, not shown
    as its own past; `saved`: whether it reached the store."""
    records, _ = history.records()
    sections = []
    for path, digest in heads:
        earlier = [
            r for r in reversed(records) if r.key != current.key and path in ((r.arm(HEAD) or _NO_ARM).files)
        ]
        if not earlier:
            continue
        rows = [
            "| date | PR · head | content | verdict | head - base | runs |",
            "|---|---|---|---|--:|--:|",
        ]
        for r in earlier[:HISTORY_ROWS]:
            content = (r.arm(HEAD) or _NO_ARM).files[path]
            same = " (this head's)" if content == digest else ""
            pr = f"#{r.pr} · " if r.pr is not None else ""
            delta = "—" if r.head_vs_base is None else f"{r.head_vs_base:+.2f}"
            runs = sum(a.runs for a in r.arms)
            rows.append(
                f"| {r.recorded_at:%Y-%m-%d %H:%M} | {pr}`{r.head_sha[:12]}` | `{content[:12]}`{same} "
                f"| {_verdict_cell(r)} | {delta} | {runs} |"
            )
        more = len(earlier) - HISTORY_ROWS
        if more > 0:
            rows.append(f"\n{more} older evaluation(s) not shown: `docdelta history --file {path}`.")
        before = history.receipt(digest) if digest is not None else None
        if before is not None:
            kept = [e for e in before.evaluations if e.experiment != current.experiment]
            before = before.model_copy(update={"evaluations": kept})
        rows.append("\n" + _receipt_line(path, digest, before, current, saved, policy))
        sections.append(
            f"<details><summary>History of {path} ({len(earlier)} earlier evaluation(s))</summary>\n\n"
            + "\n".join(rows)
            + "\n\n</details>"
        )
    return "\n\n".join(sections)


_NO_ARM = HistoryArm(condition=HEAD, files={}, overlay_sha256="", runs=0, mean_score=None, cost_usd=None)
