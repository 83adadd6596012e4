"""The matrix: tasks x conditions x repeats, in a seeded interleaved order, resumable.

`prepare` turns two refs into an `Experiment` (sealed checkouts, tasks, manifest);
`Runner.run` executes a list of cells — by default the whole plan, but any round
of cells is a callable unit (adaptive repeats and sharding will call it with
subsets). The runner holds no global state: each cell writes its own directory,
atomically, and a saved complete result is reused, so an interrupted matrix
resumes where it stopped.

Run control: infrastructure errors (ours) are retried `RunLimits.infra_retries` times and
never graded; a rate-limited run stops the matrix (`rate_limit="stop"`) or is retried
after the waits of `rate_limit_waits` (`"wait"`, each logged in `<workdir>/ratelimit.log`)
before it does; either way it is kept beside the cell as history, not as its result, so a
rerun resumes with that cell. Behind a gateway the per-run dollar reserve becomes the
gateway's cost budget, and every run is audited for which instruction files reached the
model (`docdelta.audit`).
"""

from __future__ import annotations

import contextlib
import math
import random
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO, TypeVar

from docdelta import __version__
from docdelta.agents.base import Agent, AgentContext
from docdelta.agents.command import preflight
from docdelta.agents.prompt import build_prompt
from docdelta.audit import AuditIndex, audit_run, build_index
from docdelta.config import ProjectConfig, matcher
from docdelta.detect import detect_refs
from docdelta.errors import ConfigError, DocdeltaError, InfraError
from docdelta.git import Repo
from docdelta.grading.answer import score_answer
from docdelta.grading.change import score_change
from docdelta.grading.checks import run_checks
from docdelta.grading.hidden import ChangeAssets, capture_agent_diff, grade_change, load_assets
from docdelta.grading.selftest import selftest
from docdelta.models import (
    BASE,
    DEFAULT_CONDITIONS,
    HEAD,
    AgentInfo,
    AgentOutcome,
    Cell,
    ChecksResult,
    Detection,
    HiddenTestResult,
    Manifest,
    ModelCall,
    RunBounds,
    RunResult,
    RunStatus,
    Score,
    Task,
    sha256_hex,
)
from docdelta.sandbox.base import ExecResult, Sandbox, SandboxProvider, SandboxSpec
from docdelta.store import DIFF_FILE, RESULT_FILE, TRANSCRIPT_FILE, ResultStore, checkout_dir
from docdelta.tasks import LoadedTask, check_citations, load_tasks, require_reviewed
from docdelta.validate import MAX_RUNS_WITHOUT_CONFIRMATION, unique_conditions, valid_cost
from docdelta.workspace import SealedCheckout, build_overlays, seal


@dataclass(frozen=True)
class Experiment:
    """Everything a run of the matrix needs, fixed before the first cell starts."""

    repo_name: str
    manifest: Manifest
    detection: Detection
    tasks: dict[str, LoadedTask]
    checkouts: dict[str, SealedCheckout]
    assets: dict[str, ChangeAssets] = field(default_factory=dict)
    """Change tasks' hidden tests and reference, read from trusted copies at prepare time."""

    @cached_property
    def audit_index(self) -> AuditIndex:
        """Fingerprints of every condition's instruction files, for the gateway's audit."""
        paths = {name: c.path for name, c in self.checkouts.items()}
        return build_index(self.manifest.conditions, paths, self.detection)


@dataclass(frozen=True)
class ExperimentRequest:
    """What the user asked for; `prepare` resolves it against the repository."""

    base: str
    head: str
    tasks_dir: Path
    conditions: Sequence[str] = DEFAULT_CONDITIONS
    repeats: int = 3
    adaptive: bool = False
    """--repeats auto: `repeats` is the cap; `docdelta.rounds` runs the plan round by round."""
    seed: int = 0
    source: str = HEAD
    patch: Path | None = None
    allow_unreviewed: bool = False
    max_runs: int | None = MAX_RUNS_WITHOUT_CONFIRMATION
    """Refuse a plan of more runs than this (None: no bound; the CLI's --yes)."""


class PlanTooLarge(ConfigError):
    """The plan has more runs than the request allows without confirmation."""

    def __init__(self, planned: int, tasks: int, conditions: int, repeats: int, bound: int) -> None:
        super().__init__(
            f"the plan is {planned:,} runs ({tasks} task{'s' if tasks != 1 else ''} x {conditions} "
            f"conditions x {repeats:,} repeats), more than the {bound:,} that run without confirmation",
            hint="check --repeats and --conditions, or pass --yes to run it",
        )
        self.planned = planned


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
    bounds: RunBounds | None = None,
) -> Experiment | None:
    """Resolve refs, detect, load and check tasks, seal one checkout per condition and
    write the manifest. Returns None when no instruction file changed.

    `config` must come from the trusted base ref (`load_project_config(repo, base)`):
    the PR head, maybe a fork, must not steer its own evaluation."""
    if request.repeats < 1:
        raise ConfigError("--repeats must be at least 1", hint="use --repeats 3 or more for statistics")
    try:
        unique_conditions(request.conditions)
    except ValueError as exc:
        raise ConfigError(str(exc), hint="e.g. --conditions base,head,none") from None
    base_sha, head_sha = repo.resolve(request.base), repo.resolve(request.head)
    source_sha = {HEAD: head_sha, BASE: base_sha}.get(request.source) or repo.resolve(request.source)
    match = matcher(config)
    detection = detect_refs(repo, base_sha, head_sha, match)
    if detection.empty:
        return None

    loaded = load_tasks(request.tasks_dir)
    planned = len(loaded) * len(request.conditions) * request.repeats
    if request.max_runs is not None and planned > request.max_runs:
        raise PlanTooLarge(planned, len(loaded), len(request.conditions), request.repeats, request.max_runs)
    require_reviewed(loaded, request.allow_unreviewed)

    assets = {
        lt.task.id: load_assets(lt.task, lt.path, repo, source_sha)
        for lt in loaded
        if lt.task.kind == "change"
    }
    hidden_paths = sorted({f"/{path}" for a in assets.values() for path in a.hidden})
    overlays = build_overlays(repo, base_sha, head_sha, request.conditions, match, request.patch)
    # Hidden tests that live in the source commit never reach the agent's checkout.
    strip = [*config.checkout_strip, *_inside(repo.root, request.tasks_dir), *hidden_paths]
    checkouts: dict[str, SealedCheckout] = {}
    for name, overlay in overlays.items():
        dest = checkout_dir(store.workdir, overlay.sha256)
        shutil.rmtree(dest, ignore_errors=True)
        checkouts[name] = seal(repo, source_sha, overlay, dest, match, strip)
    check_citations(loaded, {name: c.path for name, c in checkouts.items()}, source_sha)

    tasks = {lt.task.id: lt for lt in loaded}
    manifest = Manifest(
        repo=repo.name,
        base_sha=base_sha,
        head_sha=head_sha,
        source_sha=source_sha,
        source_tree_sha256=next(iter(checkouts.values())).source_sha256,
        conditions=[overlays[name].spec(name) for name in request.conditions],
        tasks={tid: lt.sha256 for tid, lt in sorted(tasks.items())},
        agent=AgentInfo(
            name=agent.name,
            version=agent.version,
            model=agent.model,
            settings=agent.recorded_settings,
            server=dict(agent.server_identity),
        ),
        sandbox=sandbox,
        image_digest=image_digest,
        seed=request.seed,
        repeats=request.repeats,
        adaptive=request.adaptive,
        bounds=bounds,
        docdelta_version=__version__,
        order=plan_order(sorted(tasks), request.conditions, request.repeats, request.seed),
        created_at=datetime.now(UTC),
    )
    _check_same_experiment(store, manifest)
    store.write_manifest(manifest)
    store.write_detection(detection)
    return Experiment(repo.name, manifest, detection, tasks, checkouts, assets)


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
    raise ConfigError(
        f"workdir {store.workdir} holds a different experiment (differs in: "
        f"{', '.join(differences(old, new))})",
        hint="use a new --workdir, or delete the old one to start over",
    )


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Each field that differs, by dotted path, with both values when they are short
    (`bounds.timeout_s: 600.0 -> 300.0`), so a refused resume says what changed."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(old.keys() | new.keys(), key=str)
        return [d for k in keys for d in differences(old.get(k), new.get(k), f"{where}.{k}" if where else k)]
    if old == new:
        return []
    shown = f"{old!r} -> {new!r}"
    return [f"{where}: {shown}" if len(shown) <= 80 else where]


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
def _transcript(printed: ExecResult) -> bytes:
    """What the agent printed, kept beside its result for a maintainer to read. The agent
    only ever held a placeholder key, so no secret can be in it."""
    cut = b" [output cap reached]" if printed.truncated else b""
    return printed.stdout + cut + b"\n----- stderr -----\n" + printed.stderr


N = TypeVar("N", int, float)


def _total(values: Iterable[N | None]) -> N | None:
    """Sum, or None when any call did not report the value (never a partial guess)."""
    items = list(values)
    known = [v for v in items if v is not None]
    return None if not known or len(known) != len(items) else sum(known[1:], known[0])


RATE_LIMITED = 429


def with_gateway_telemetry(
    outcome: AgentOutcome, calls: Sequence[ModelCall], over_budget: bool
) -> AgentOutcome:
    """Tokens and cost as the gateway saw them, so every agent is measured the same way;
    a run whose call was refused for budget is `budget`, and a failed run whose last model
    call was answered 429 is `rate_limited`, whatever the agent made of either."""
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
    elif outcome.status is not RunStatus.ok and calls and calls[-1].status == RATE_LIMITED:
        update["status"] = RunStatus.rate_limited
    return outcome.model_copy(update=update)


def spend(cost: float | None) -> float:
    """What a run's reported cost adds to the spend cap's tally. Not reported: nothing. NaN,
    infinite or negative: infinity, which stops a capped matrix; counted as reported, a NaN
    would make every later cap comparison False and a negative cost would buy more runs."""
    if cost is None:
        return 0.0
    return cost if valid_cost(cost) else math.inf


def timed_out(score: Score) -> Score:
    """A run that hit --timeout scores 0, whatever it printed before the deadline: an agent
    that answers and then hangs is not a pass. The items stay, each missed, so the
    scorecard says why."""
    note = "the run timed out"
    return Score(
        value=0.0,
        items=[i.model_copy(update={"hit": False, "note": note}) for i in score.items],
    )


RateLimitPolicy = Literal["stop", "wait"]
RATE_LIMIT_WAITS = (300.0, 900.0, 2700.0)
"""5, 15 and 45 minutes: long enough for per-minute and most hourly limits to reset."""
RATE_LIMIT_LOG = "ratelimit.log"
INCOMPLETE = {RunStatus.infra_error: "infra", RunStatus.rate_limited: "rate_limited"}
"""Statuses that say nothing about the agent: such a saved result is never reused or
graded, but kept beside the cell under this name when the cell runs again."""


@dataclass(frozen=True)
class RunLimits:
    timeout_s: float = 600.0
    max_turns: int | None = None
    cap_usd: float | None = None
    reserve_usd: float = 0.0
    """Checked against the cap before each run, and each run's dollar budget at the gateway."""
    infra_retries: int = 2
    rate_limit: RateLimitPolicy = "stop"
    rate_limit_waits: tuple[float, ...] = RATE_LIMIT_WAITS
    jobs: int = 1
    """Cells run at once, each in its own sandbox and directory."""


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
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store, self.provider, self.spec, self.agent = store, provider, spec, agent
        self.limits, self.progress, self.sleep = limits, progress, sleep
        self._live: set[Sandbox] = set()
        """Agent sandboxes of runs in flight, for `abort` to close."""
        self._aborted = threading.Event()
        self._lock = threading.Lock()

    def abort(self) -> None:
        """Close the sandbox of every run in flight (from the main thread, on Ctrl-C or
        SIGTERM), so worker threads come back instead of waiting for their agents."""
        self._aborted.set()
        with self._lock:
            live = list(self._live)
        for sandbox in live:
            sandbox.close()

    def run(self, exp: Experiment, cells: Iterable[Cell] | None = None) -> MatrixReport:
        """Run one round of cells (default: the whole plan), `limits.jobs` at a time.
        Complete results are reused; the spend cap is checked before every start, counting
        the reserve of every run in flight; it and rate limits stop new starts while the
        runs in flight finish (their results kept; `MatrixReport.stopped` says why).
        Results and progress come in the order of `cells` whatever the order runs end in,
        so they are the same at every `jobs`."""
        todo = list(exp.manifest.order if cells is None else cells)
        self.require_selftests(exp, {c.task for c in todo})
        self.preflight(exp, todo)
        spent = math.fsum(spend(r.outcome.metrics.cost_usd) for r in self.store.results(exp.repo_name))
        matrix = _Matrix(self, exp, todo, spent)
        self.progress.start(len(todo))
        try:
            with futures.ThreadPoolExecutor(max_workers=self.limits.jobs, thread_name_prefix="cell") as pool:
                matrix.drive(pool)
        finally:
            self.progress.finish()
        return matrix.report

    def cap_reached(self, spent: float, in_flight: int) -> str | None:
        """Why no further run may start, or None: the spend so far plus the reserve of
        every run in flight and of the next one must stay within the cap."""
        cap = self.limits.cap_usd
        if cap is None:
            return None
        if math.isinf(spent):
            return (
                "an agent reported a cost that is not an amount >= 0 (NaN, infinite or negative), "
                "so the spend cap cannot be kept"
            )
        reserve = self.limits.reserve_usd
        if spent + reserve * (in_flight + 1) > cap:
            flight = f" + {in_flight} in flight" if in_flight else ""
            return f"spend cap reached: ${spent:.2f} spent + ${reserve:.2f} reserve{flight} > ${cap:.2f} cap"
        return None

    def finish_cell(self, exp: Experiment, result: RunResult) -> str | None:
        """Save a finished run; a rate-limited one becomes history. Returns why the matrix
        must stop starting runs, or None."""
        self.store.save(exp.repo_name, result)
        if result.status is not RunStatus.rate_limited:
            return None
        self.set_aside(exp.repo_name, result)
        return self._rate_limit_stop(result.cell, result)

    def run_patiently(self, exp: Experiment, cell: Cell) -> tuple[RunResult, float]:
        """Run a cell; under `rate_limit="wait"` a rate-limited run is kept as history and
        the cell rerun after each wait. Returns the last result and what all attempts cost."""
        waits = self.limits.rate_limit_waits if self.limits.rate_limit == "wait" else ()
        result = self.run_cell(exp, cell)
        cost = spend(result.outcome.metrics.cost_usd)
        for n, pause in enumerate(waits, 1):
            if result.status is not RunStatus.rate_limited:
                break
            self.store.save(exp.repo_name, result)
            self.set_aside(exp.repo_name, result)
            self._log_rate_limit(
                f"{cell.key}: rate limited; waiting {pause:g}s before retry {n} of {len(waits)}"
            )
            self.sleep(pause)
            result = self.run_cell(exp, cell)
            cost += spend(result.outcome.metrics.cost_usd)
        return result, cost

    def _rate_limit_stop(self, cell: Cell, result: RunResult) -> str:
        why = f"rate limited at {cell.key}" + (f" ({result.outcome.error})" if result.outcome.error else "")
        if self.limits.rate_limit == "stop":
            return f"{why}; wait for the limit to reset, or pass --rate-limit wait"
        waits = ", ".join(f"{w:g}s" for w in self.limits.rate_limit_waits)
        self._log_rate_limit(f"{cell.key}: still rate limited after waits of {waits}; matrix stopped")
        return f"{why} after waits of {waits} (see {self.store.workdir / RATE_LIMIT_LOG})"

    def _log_rate_limit(self, line: str) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        with (self.store.workdir / RATE_LIMIT_LOG).open("a", encoding="utf-8") as log:
            log.write(f"{stamp} {line}\n")

    def set_aside(self, repo: str, result: RunResult) -> None:
        """A saved result that is not complete (see INCOMPLETE) becomes history beside the
        cell (`infra-1.json`, `rate_limited-1.json`, ...), so the cell runs again."""
        kind = INCOMPLETE[result.status]
        cell_dir = self.store.cell_dir(repo, result.cell)
        n = len(list(cell_dir.glob(f"{kind}-*.json"))) + 1
        (cell_dir / RESULT_FILE).rename(cell_dir / f"{kind}-{n}.json")

    def preflight(self, exp: Experiment, todo: Sequence[Cell]) -> None:
        """Check once, in a sandbox of the first cell to run, that the agent can start."""
        pending = [
            c for c in todo if (r := self.store.load(exp.repo_name, c)) is None or r.status in INCOMPLETE
        ]
        if not pending or self.agent.user_executable is None:
            return
        with self.provider.create(exp.checkouts[pending[0].condition].path, self.spec) as sandbox:
            preflight(self.agent, sandbox)

    def require_selftests(self, exp: Experiment, task_ids: Iterable[str]) -> None:
        """A change task whose selftest fails cannot be run: before its first cell, prove
        the reference passes, the untouched checkout fails and tampering fails. A passing
        report is kept in the workdir, keyed by everything it depends on, so a resumed
        matrix does not pay for it again."""
        for task_id in sorted(set(task_ids) & exp.assets.keys()):
            loaded, assets = exp.tasks[task_id], exp.assets[task_id]
            key = sha256_hex(
                "\0".join(
                    [loaded.sha256, exp.manifest.source_tree_sha256, sha256_hex(assets.reference or b"")]
                    + [f"{p}:{sha256_hex(d)}" for p, d in sorted(assets.hidden.items())]
                ).encode()
            )
            if self.store.selftest_passed(task_id, key):
                continue
            sealed = next(iter(exp.checkouts.values()))
            report = selftest(
                loaded.task, sealed, assets.hidden, assets.reference, self.provider, spec=self.spec
            )
            self.store.save_selftest(task_id, key, report)

    @contextlib.contextmanager
    def _tracked(self, sandbox: Sandbox) -> Iterator[None]:
        with self._lock:
            if self._aborted.is_set():
                raise InfraError("the matrix was interrupted before this run started")
            self._live.add(sandbox)
        try:
            yield
        finally:
            with self._lock:
                self._live.discard(sandbox)

    def run_cell(self, exp: Experiment, cell: Cell) -> RunResult:
        """One run of one cell; our own failures are retried and never graded as agent failures."""
        loaded = exp.tasks[cell.task]
        checkout = exp.checkouts[cell.condition]
        ctx = AgentContext(
            seed=cell_seed(exp.manifest.seed, cell),
            timeout_s=self.limits.timeout_s,
            max_turns=self.limits.max_turns,
            api_retries=0 if self.limits.rate_limit == "stop" else None,
        )
        prompt = build_prompt(loaded.task)
        reserve = self.limits.reserve_usd
        spec = replace(
            self.spec,
            max_cost_usd=reserve if reserve > 0 else None,
            fingerprints=exp.audit_index.fingerprints,
        )
        attempt = 0
        while True:
            attempt += 1
            started = datetime.now(UTC)
            isolation = "unknown"
            calls: list[ModelCall] = []
            audit = None
            diff: bytes | None = None
            transcript: bytes | None = None
            hidden: HiddenTestResult | None = None
            try:
                with self.provider.create(checkout.path, spec) as sandbox, self._tracked(sandbox):
                    isolation = sandbox.isolation
                    outcome, printed = self.agent.execute(prompt, sandbox, ctx)
                    transcript = _transcript(printed)
                    if sandbox.gateway is not None:
                        calls = sandbox.gateway.calls()
                        outcome = with_gateway_telemetry(outcome, calls, sandbox.gateway.budget_exceeded())
                        audit = audit_run(exp.audit_index, cell.condition, calls)
                    if loaded.task.kind == "change":
                        diff = capture_agent_diff(sandbox, checkout.commit)
                if diff is not None:
                    # After the agent's sandbox is gone: a fresh, offline one from trusted copies.
                    hidden = grade_change(
                        loaded.task,
                        checkout,
                        diff,
                        exp.assets[cell.task].hidden,
                        self.provider,
                        spec=self.spec,
                    )
                    if hidden.status == "infra_error":
                        raise InfraError("the hidden-test grader failed: " + "; ".join(hidden.notes))
            except (InfraError, OSError) as exc:
                outcome = self._infra_outcome(exc)
            if outcome.status is not RunStatus.infra_error or attempt > self.limits.infra_retries:
                break
        score, checks = self._grade(loaded.task, outcome, checkout, diff, hidden)
        if transcript is not None:
            self.store.save_artifact(exp.repo_name, cell, TRANSCRIPT_FILE, transcript)
        if diff is not None:
            self.store.save_artifact(exp.repo_name, cell, DIFF_FILE, diff)
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
            instructions_seen=audit,
            hidden_tests=hidden,
            checks=checks,
        )

    @staticmethod
    def _grade(
        task: Task,
        outcome: AgentOutcome,
        checkout: SealedCheckout,
        diff: bytes | None,
        hidden: HiddenTestResult | None,
    ) -> tuple[Score | None, ChecksResult | None]:
        """Answer tasks against gold; change tasks by hidden tests and hard checks.
        Infra errors are never graded; a timeout scores 0 (`timed_out`)."""
        if outcome.status is RunStatus.infra_error:
            return None, None
        if diff is None or hidden is None:
            score = score_answer(task, outcome.answer, checkout.path)
            checks = None
        else:
            checks = run_checks(task.gold.checks, task.gold.mistakes, diff, outcome.metrics)
            score = score_change(hidden, checks)
        if outcome.status is RunStatus.timeout:
            return timed_out(score), checks
        return score, checks

    def _infra_outcome(self, exc: DocdeltaError | OSError) -> AgentOutcome:
        return self.agent.make_outcome(
            RunStatus.infra_error,
            error=str(exc),
        )


@dataclass
class _Matrix:
    """One `Runner.run` in progress: which cells are done, in flight and reported.

    Runs start in the order of `todo` while a worker is free and the cap allows; each run
    is a `Runner.run_cell` on a worker thread (its own sandbox and cell directory, no
    shared state but the store's separate files). The main thread alone saves results,
    tallies spend and reports progress, in `todo` order."""

    runner: Runner
    exp: Experiment
    todo: list[Cell]
    spent: float
    report: MatrixReport = field(default_factory=MatrixReport)
    done: dict[int, tuple[RunResult, str, bool]] = field(default_factory=dict)
    """Finished or reused cells not yet reported, by position in `todo`."""
    reported: int = 0
    in_flight: dict[futures.Future[tuple[RunResult, float]], int] = field(default_factory=dict)

    def drive(self, pool: futures.ThreadPoolExecutor) -> None:
        store, repo = self.runner.store, self.exp.repo_name
        try:
            for index, cell in enumerate(self.todo):
                existing = store.load(repo, cell)
                if existing is not None and existing.status not in INCOMPLETE:
                    self.report.reused += 1
                    self._done(index, existing, "reused")
                    continue
                while len(self.in_flight) >= self.runner.limits.jobs and not self.report.stopped:
                    self._collect()
                self.report.stopped = self.report.stopped or self.runner.cap_reached(
                    self.spent, len(self.in_flight)
                )
                if self.report.stopped:
                    break
                if existing is not None:
                    self.runner.set_aside(repo, existing)
                future = pool.submit(self.runner.run_patiently, self.exp, cell)
                self.in_flight[future] = index
            while self.in_flight:
                self._collect()
        except BaseException:
            # Ctrl-C, SIGTERM or our own fault: runs not started never start; the sandboxes
            # of runs in flight are closed under them and their results dropped (a rerun
            # runs those cells), finished ones are saved already.
            self.runner.abort()
            raise

    def _collect(self) -> None:
        finished, _ = futures.wait(self.in_flight, return_when=futures.FIRST_COMPLETED)
        for future in finished:
            index = self.in_flight.pop(future)
            result, cost = future.result()
            self.spent += cost
            stop = self.runner.finish_cell(self.exp, result)
            if stop is None:
                self.report.ran += 1
            else:
                self.report.stopped = self.report.stopped or stop
            self._done(index, result, result.status.value, kept=stop is None)

    def _done(self, index: int, result: RunResult, status: str, *, kept: bool = True) -> None:
        """Report every cell whose predecessors in `todo` are reported too."""
        self.done[index] = (result, status, kept)
        while self.reported in self.done:
            result, status, kept = self.done.pop(self.reported)
            if kept:
                self.report.results.append(result)
            self.runner.progress.advance(result.cell, status)
            self.reported += 1
