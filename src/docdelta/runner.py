"""The matrix: tasks x conditions x repeats, in a seeded interleaved order, resumable.

`prepare` turns two refs into an `Experiment` (sealed checkouts, tasks, manifest);
`Runner.run` executes a list of cells — by default the whole plan, but any round
of cells is a callable unit (adaptive repeats and sharding will call it with
subsets). The runner holds no global state: each cell writes its own directory,
atomically, and a saved complete result is reused, so an interrupted matrix
resumes where it stopped.
"""

from __future__ import annotations

import random
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TextIO, TypeVar

from docdelta.agents.base import Agent, AgentContext
from docdelta.agents.prompt import build_prompt
from docdelta.config import ProjectConfig, matcher
from docdelta.detect import detect_refs
from docdelta.errors import ConfigError, DocdeltaError, InfraError
from docdelta.git import Repo
from docdelta.grading.answer import score_answer
from docdelta.models import (
    AgentInfo,
    AgentOutcome,
    Cell,
    Detection,
    Manifest,
    ModelCall,
    RunResult,
    RunStatus,
    sha256_hex,
)
from docdelta.sandbox.base import SandboxProvider, SandboxSpec
from docdelta.store import ResultStore
from docdelta.tasks import LoadedTask, check_citations, load_tasks, require_reviewed
from docdelta.workspace import SealedCheckout, build_overlays, seal

DEFAULT_CONDITIONS = ("base", "head", "none")


@dataclass(frozen=True)
class Experiment:
    """Everything a run of the matrix needs, fixed before the first cell starts."""

    repo_name: str
    manifest: Manifest
    detection: Detection
    tasks: dict[str, LoadedTask]
    checkouts: dict[str, SealedCheckout]


@dataclass(frozen=True)
class ExperimentRequest:
    """What the user asked for; `prepare` resolves it against the repository."""

    base: str
    head: str
    tasks_dir: Path
    conditions: Sequence[str] = DEFAULT_CONDITIONS
    repeats: int = 3
    seed: int = 0
    source: str = "head"
    patch: Path | None = None
    allow_unreviewed: bool = False


def plan_order(task_ids: Sequence[str], conditions: Sequence[str], repeats: int, seed: int) -> list[Cell]:
    """Interleave conditions: every repeat round holds each (task, condition) once, shuffled
    by a seeded RNG, so drift over time (rate limits, provider load) hits all arms alike."""
    rng = random.Random(seed)
    order: list[Cell] = []
    for repeat in range(1, repeats + 1):
        block = [Cell(task=t, condition=c, repeat=repeat) for t in task_ids for c in conditions]
        rng.shuffle(block)
        order.extend(block)
    return order


def cell_seed(seed: int, cell: Cell) -> int:
    """Derived from (seed, task, repeat) but NOT the condition: the same random draw
    serves every arm of a repeat (common random numbers), so only the docs differ."""
    digest = sha256_hex(f"{seed}/{cell.task}/{cell.repeat}".encode())
    return int(digest[:12], 16)


def prepare(
    repo: Repo,
    request: ExperimentRequest,
    *,
    config: ProjectConfig,
    store: ResultStore,
    agent: Agent,
    sandbox: str,
    image_digest: str | None = None,
) -> Experiment | None:
    """Resolve refs, detect, load and check tasks, seal one checkout per condition and
    write the manifest. Returns None when no instruction file changed.

    `config` must come from the trusted base ref (`load_project_config(repo, base)`):
    the PR head, maybe a fork, must not steer its own evaluation."""
    if request.repeats < 1:
        raise ConfigError("--repeats must be at least 1", hint="use --repeats 3 or more for statistics")
    base_sha, head_sha = repo.resolve(request.base), repo.resolve(request.head)
    source_sha = {"head": head_sha, "base": base_sha}.get(request.source) or repo.resolve(request.source)
    match = matcher(config)
    detection = detect_refs(repo, base_sha, head_sha, match)
    if detection.empty:
        return None

    loaded = load_tasks(request.tasks_dir)
    require_reviewed(loaded, request.allow_unreviewed)
    check_citations(loaded, repo, source_sha)

    overlays = build_overlays(repo, base_sha, head_sha, request.conditions, match, request.patch)
    strip = [*config.checkout_strip, *_inside(repo.root, request.tasks_dir)]
    checkouts_root = store.workdir / "checkouts"
    checkouts: dict[str, SealedCheckout] = {}
    for name, overlay in overlays.items():
        # Named by content, never by condition: two conditions with equal docs share one.
        dest = checkouts_root / overlay.sha256[:16]
        shutil.rmtree(dest, ignore_errors=True)
        checkouts[name] = seal(repo, source_sha, overlay, dest, match, strip)

    tasks = {lt.task.id: lt for lt in loaded}
    manifest = Manifest(
        repo=repo.name,
        base_sha=base_sha,
        head_sha=head_sha,
        source_sha=source_sha,
        source_tree_sha256=next(iter(checkouts.values())).source_sha256,
        conditions=[overlays[name].spec(name) for name in request.conditions],
        tasks={tid: lt.sha256 for tid, lt in sorted(tasks.items())},
        agent=AgentInfo(name=agent.name, version=agent.version, model=agent.model),
        sandbox=sandbox,
        image_digest=image_digest,
        seed=request.seed,
        repeats=request.repeats,
        order=plan_order(sorted(tasks), request.conditions, request.repeats, request.seed),
        created_at=datetime.now(UTC),
    )
    _check_same_experiment(store, manifest)
    store.write_manifest(manifest)
    store.write_detection(detection)
    return Experiment(repo.name, manifest, detection, tasks, checkouts)


def _inside(root: Path, directory: Path) -> list[str]:
    """A --tasks directory inside the repository holds gold answers: strip it too."""
    try:
        rel = directory.resolve().relative_to(root.resolve())
    except ValueError:
        return []
    return [f"/{rel.as_posix()}/**"] if rel.parts else []


def _check_same_experiment(store: ResultStore, manifest: Manifest) -> None:
    """Resuming into a workdir that holds another experiment would mix incomparable runs."""
    previous = store.read_manifest()
    if previous is None or previous.identity() == manifest.identity():
        return
    old, new = previous.model_dump(exclude={"created_at"}), manifest.model_dump(exclude={"created_at"})
    changed = sorted(k for k in new if old.get(k) != new[k])
    raise ConfigError(
        f"workdir {store.workdir} holds a different experiment (differs in: {', '.join(changed)})",
        hint="use a new --workdir, or delete the old one to start over",
    )


# ------------------------------------------------------------------ progress
class Progress(Protocol):
    def start(self, total: int) -> None: ...
    def advance(self, cell: Cell, status: str) -> None: ...
    def finish(self) -> None: ...


@dataclass
class LineProgress:
    """Plain lines, for CI logs."""

    out: TextIO = field(default_factory=lambda: sys.stderr)
    total: int = 0
    done: int = 0

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, cell: Cell, status: str) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {cell.key}: {status}", file=self.out, flush=True)

    def finish(self) -> None:
        return None


@dataclass
class BarProgress(LineProgress):
    """A one-line progress bar redrawn in place, for terminals."""

    width: int = 30

    def advance(self, cell: Cell, status: str) -> None:
        self.done += 1
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        self.out.write(f"\r[{bar}] {self.done}/{self.total} {cell.key[:40]:<40} {status:<10}")
        self.out.flush()

    def finish(self) -> None:
        self.out.write("\n")
        self.out.flush()


def progress_for(stream: TextIO, ci: bool) -> Progress:
    return BarProgress(out=stream) if stream.isatty() and not ci else LineProgress(out=stream)


# -------------------------------------------------------------------- runner
N = TypeVar("N", int, float)


def _total(values: Iterable[N | None]) -> N | None:
    """Sum, or None when any call did not report the value (never a partial guess)."""
    items = list(values)
    known = [v for v in items if v is not None]
    return None if not known or len(known) != len(items) else sum(known[1:], known[0])


def with_gateway_telemetry(
    outcome: AgentOutcome, calls: Sequence[ModelCall], over_budget: bool
) -> AgentOutcome:
    """Tokens and cost as the gateway saw them, so every agent is measured the same way;
    a run whose call was refused for budget is `budget`, whatever the agent made of it."""
    forwarded = [c for c in calls if c.error is None]
    metrics = outcome.metrics.model_copy(
        update={
            "tokens_in": _total(c.tokens_in for c in forwarded),
            "tokens_out": _total(c.tokens_out for c in forwarded),
            "cache_read_tokens": _total(c.cache_read_tokens for c in forwarded),
            "cache_write_tokens": _total(c.cache_write_tokens for c in forwarded),
            "cost_usd": _total(c.cost_usd for c in forwarded),
        }
    )
    update: dict[str, Any] = {"metrics": metrics}
    if over_budget:
        update["status"] = RunStatus.budget
    return outcome.model_copy(update=update)


@dataclass(frozen=True)
class RunLimits:
    timeout_s: float = 600.0
    max_turns: int | None = None
    cap_usd: float | None = None
    reserve_usd: float = 0.0
    infra_retries: int = 2


@dataclass
class MatrixReport:
    ran: int = 0
    reused: int = 0
    stopped: str | None = None
    results: list[RunResult] = field(default_factory=list)


class Runner:
    """Executes cells with injected sandbox provider and agent (real clients are built in cli.py)."""

    def __init__(
        self,
        store: ResultStore,
        provider: SandboxProvider,
        spec: SandboxSpec,
        agent: Agent,
        limits: RunLimits,
        progress: Progress,
    ) -> None:
        self.store, self.provider, self.spec, self.agent = store, provider, spec, agent
        self.limits, self.progress = limits, progress

    def run(self, exp: Experiment, cells: Iterable[Cell] | None = None) -> MatrixReport:
        """Run one round of cells (default: the whole plan). Complete results are reused;
        the spend cap is checked before every run and stops the round cleanly."""
        todo = list(exp.manifest.order if cells is None else cells)
        report = MatrixReport()
        spent = sum(r.outcome.metrics.cost_usd or 0.0 for r in self.store.results(exp.repo_name))
        self.progress.start(len(todo))
        try:
            for cell in todo:
                existing = self.store.load(exp.repo_name, cell)
                if existing is not None and existing.status is not RunStatus.infra_error:
                    report.reused += 1
                    report.results.append(existing)
                    self.progress.advance(cell, "reused")
                    continue
                cap = self.limits.cap_usd
                if cap is not None and spent + self.limits.reserve_usd > cap:
                    report.stopped = (
                        f"spend cap reached: ${spent:.2f} spent + ${self.limits.reserve_usd:.2f} reserve "
                        f"> ${cap:.2f} cap"
                    )
                    break
                if existing is not None:
                    self._archive_infra_failure(exp.repo_name, cell)
                result = self.run_cell(exp, cell)
                self.store.save(exp.repo_name, result)
                spent += result.outcome.metrics.cost_usd or 0.0
                report.ran += 1
                report.results.append(result)
                self.progress.advance(cell, result.status.value)
        finally:
            self.progress.finish()
        return report

    def _archive_infra_failure(self, repo: str, cell: Cell) -> None:
        """An infra_error result is not complete: keep it as history, then rerun the cell."""
        cell_dir = self.store.cell_dir(repo, cell)
        n = len(list(cell_dir.glob("infra-*.json"))) + 1
        (cell_dir / "result.json").rename(cell_dir / f"infra-{n}.json")

    def run_cell(self, exp: Experiment, cell: Cell) -> RunResult:
        """One run of one cell; our own failures are retried and never graded as agent failures."""
        loaded = exp.tasks[cell.task]
        checkout = exp.checkouts[cell.condition]
        ctx = AgentContext(
            seed=cell_seed(exp.manifest.seed, cell),
            timeout_s=self.limits.timeout_s,
            max_turns=self.limits.max_turns,
        )
        prompt = build_prompt(loaded.task)
        attempt = 0
        while True:
            attempt += 1
            started = datetime.now(UTC)
            isolation = "unknown"
            calls: list[ModelCall] = []
            try:
                with self.provider.create(checkout.path, self.spec) as sandbox:
                    isolation = sandbox.isolation
                    outcome = self.agent.run(prompt, sandbox, ctx)
                    if sandbox.gateway is not None:
                        calls = sandbox.gateway.calls()
                        outcome = with_gateway_telemetry(outcome, calls, sandbox.gateway.budget_exceeded())
            except (InfraError, OSError) as exc:
                outcome = self._infra_outcome(exc)
            if outcome.status is not RunStatus.infra_error or attempt > self.limits.infra_retries:
                break
        score = (
            None
            if outcome.status is RunStatus.infra_error
            else score_answer(loaded.task, outcome.answer, checkout.path)
        )
        return RunResult(
            cell=cell,
            status=outcome.status,
            outcome=outcome,
            score=score,
            isolation=isolation,
            seed=ctx.seed,
            attempt=attempt,
            started_at=started,
            finished_at=datetime.now(UTC),
            task_sha256=loaded.sha256,
            overlay_sha256=checkout.overlay_sha256,
            tree_sha256=checkout.tree_sha256,
            model_calls=calls,
        )

    def _infra_outcome(self, exc: DocdeltaError | OSError) -> AgentOutcome:
        return AgentOutcome(
            agent=self.agent.name,
            agent_version=self.agent.version,
            model=self.agent.model,
            status=RunStatus.infra_error,
            error=str(exc),
        )
