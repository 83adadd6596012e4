"""The matrix: tasks x conditions x repeats, in a seeded interleaved order, resumable.

`docdelta.experiment.plan.prepare` turns two refs into an `Experiment` (sealed checkouts, tasks,
manifest); `Runner.run` executes a list of cells — by default the whole plan, but any round
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
model (`docdelta.instructions.audit`).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from docdelta.agents.base import Agent, AgentContext
from docdelta.agents.command import preflight
from docdelta.agents.models import AgentOutcome, RunStatus
from docdelta.agents.prompt import build_prompt
from docdelta.checkout.seal import SealedCheckout
from docdelta.errors import AgentError, DocdeltaError, InfraError
from docdelta.experiment.plan import Experiment, cell_seed
from docdelta.experiment.progress import Progress
from docdelta.gateway.models import ModelCall
from docdelta.grading.answer import score_answer
from docdelta.grading.change import score_change
from docdelta.grading.checks import run_checks
from docdelta.grading.execute import execute_proposals
from docdelta.grading.hidden import capture_agent_diff, grade_change
from docdelta.grading.selftest import raise_for, selftest
from docdelta.grading.trigger import evidence as trigger_evidence
from docdelta.grading.trigger import score_trigger
from docdelta.instructions.audit import audit_run, body_reached
from docdelta.interrupts import deferred_signals
from docdelta.results.grades import ChecksResult, CommandsExecuted, HiddenTestResult, Score
from docdelta.results.layout import DIFF_FILE, RESULT_FILE, TRANSCRIPT_FILE
from docdelta.results.models import Cell, PhaseTimings, RunResult, TriggerEvidence
from docdelta.results.store import ResultStore
from docdelta.sandbox.base import ExecResult, Sandbox, SandboxProvider, SandboxSpec
from docdelta.tasks.models import Task
from docdelta.text import quoted
from docdelta.validate import valid_cost
from docdelta.vocabulary import sha256_hex


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
    forwarded = [c for c in calls if c.answered]
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
    stop_failed_alike: bool = False
    """Stop after a first round that failed all alike (`Runner.failed_alike`)."""


@dataclass
class MatrixReport:
    ran: int = 0
    reused: int = 0
    stopped: str | None = None
    results: list[RunResult] = field(default_factory=list)


@dataclass(frozen=True)
class Column:
    """What runs the cells of one column of the plan: the experiment's agent, or an arm's
    (`docdelta.experiment.arms`) in a sandbox built for it (a Docker gateway pins one model)."""

    agent: Agent
    provider: SandboxProvider
    spec: SandboxSpec


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
        columns: Mapping[str, Column] | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self.store, self.provider, self.spec, self.agent = store, provider, spec, agent
        self.columns = dict(columns or {})
        """Column name -> its own agent and sandbox (arms); every other column runs `agent`."""
        self.limits, self.progress, self.sleep = limits, progress, sleep
        self.secrets = tuple(s for s in secrets if s)
        """Values redacted from what proposed commands printed (gold.execute), e.g. the API keys."""
        self._live: set[Sandbox] = set()
        """Agent sandboxes of runs in flight, for `abort` to close."""
        self._aborted = threading.Event()
        self._lock = threading.Lock()
        self._first_round: list[RunResult] = []
        """Runs of the plan's first round as they end, until `failed_alike` has judged them."""
        self._failure: str | None = None
        """The one error every run of the first round failed with: the matrix stopped for it."""
        self._preflown: set[int] = set()
        """Agents (by id) `preflight` has seen start: once per runner, not once per round."""

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
        matrix = _RunInProgress(self, exp, todo, spent)
        self.progress.start(len(todo))
        try:
            with futures.ThreadPoolExecutor(max_workers=self.limits.jobs, thread_name_prefix="cell") as pool:
                matrix.drive(pool)
        finally:
            self.progress.finish()
        if self._failure is not None:
            self._give_up(exp, [*self._first_round, *matrix.report.results], self._failure)
        return matrix.report

    def failed_alike(self, exp: Experiment, result: RunResult) -> str | None:
        """Why the matrix stops after its first round (one run per task and condition), or
        None: every run of it ended `agent_error` with one and the same error, so the rounds
        still to come would fail the same way (a mistyped script, a model server that is
        down) and measure only that. Judged once per experiment, and only for a plan of more
        than one round with two runs or more in each (one failure is not a pattern)."""
        per_round = len({(c.task, c.condition) for c in exp.manifest.order})
        if (
            not self.limits.stop_failed_alike
            or per_round < 2
            or len(exp.manifest.order) <= per_round
            or len(self._first_round) >= per_round
        ):
            return None
        self._first_round.append(result)
        if len(self._first_round) < per_round:
            return None
        errors = {r.outcome.error if r.status is RunStatus.agent_error else None for r in self._first_round}
        (error,) = errors if len(errors) == 1 else (None,)
        if error is None:
            return None
        self._failure = error
        return f"all {per_round} runs of the first round failed with the same error"

    def _give_up(self, exp: Experiment, results: Sequence[RunResult], error: str) -> None:
        """Set the alike failures aside (as history beside their cells, like rate-limited
        runs), so the workdir holds no result of the broken command and the corrected one
        can run in it, and refuse, quoting the error."""
        failed = {
            r.cell: r for r in results if r.status is RunStatus.agent_error and r.outcome.error == error
        }
        for result in failed.values():
            self.set_aside(exp.repo_name, result, kind=result.status.value)
        rounds = len(exp.manifest.order) // len(self._first_round)
        raise AgentError(
            f"all {len(self._first_round)} runs of the first round failed with the same error, so the "
            f"matrix stopped there instead of running all {rounds} rounds of it: {quoted(error)}",
            hint="fix what the error names (`docdelta agent-check` runs one task and shows it from "
            f"both sides), then rerun in the same workdir: the failed runs are kept beside their "
            f"cells as {RunStatus.agent_error.value}-N.json, not as results",
        )

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

    def set_aside(self, repo: str, result: RunResult, kind: str | None = None) -> None:
        """A saved result that is not complete (see INCOMPLETE) becomes history beside the
        cell (`infra-1.json`, `rate_limited-1.json`, ...), so the cell runs again; `kind`
        names the history of a complete one (`failed_alike`)."""
        kind = kind or INCOMPLETE[result.status]
        cell_dir = self.store.cell_dir(repo, result.cell)
        n = len(list(cell_dir.glob(f"{kind}-*.json"))) + 1
        (cell_dir / RESULT_FILE).rename(cell_dir / f"{kind}-{n}.json")

    def column(self, name: str) -> Column:
        return self.columns.get(name) or Column(self.agent, self.provider, self.spec)

    def preflight(self, exp: Experiment, todo: Sequence[Cell]) -> None:
        """Check once per agent, in a sandbox of its first cell to run, that it can start:
        once for all the rounds of `--repeats auto`, each of which is a `run`."""
        pending = [
            c for c in todo if (r := self.store.load(exp.repo_name, c)) is None or r.status in INCOMPLETE
        ]
        for cell in pending:
            col = self.column(cell.condition)
            if id(col.agent) in self._preflown or col.agent.user_executable is None:
                continue
            with col.provider.create(exp.checkout(cell.task, cell.condition).path, col.spec) as sandbox:
                preflight(col.agent, sandbox)
            self._preflown.add(id(col.agent))

    def require_selftests(self, exp: Experiment, task_ids: Iterable[str]) -> None:
        """A change task whose selftest fails cannot be run: before its first cell, prove
        the reference passes, the untouched checkout fails and tampering fails. A passing
        report is kept in the workdir, keyed by everything it depends on, so a resumed
        matrix does not pay for it again: everything, the sandbox's environment included (its
        image, toolchain paths and env), so a pass from before a toolchain broke is not reused
        and the run stops here, naming the cause, instead of ending every run `no_test_ran`."""
        environment = None
        for task_id in sorted(set(task_ids) & exp.assets.keys()):
            loaded, assets = exp.tasks[task_id], exp.assets[task_id]
            sealed = exp.checkout(task_id, exp.manifest.conditions[0].name)
            environment = environment or self.provider.environment()
            key = sha256_hex(
                "\0".join(
                    [loaded.sha256, sealed.source_sha256, sha256_hex(assets.reference or b""), environment]
                    + [f"{p}:{sha256_hex(d)}" for p, d in sorted(assets.hidden.items())]
                ).encode()
            )
            if self.store.selftest_passed(task_id, key):
                continue
            report = selftest(
                loaded.task,
                sealed,
                assets.hidden,
                assets.reference,
                self.provider,
                spec=self.spec,
                raise_on_failure=False,
            )
            self.store.save_selftest(task_id, key, report)  # a failed one too: `report` shows it
            raise_for(report)

    def _check_running(self) -> None:
        """Raise when the matrix was aborted: this run is then neither retried nor saved
        (its cell has no result, so a rerun runs it)."""
        if self._aborted.is_set():
            raise InfraError("the matrix was interrupted during this run")

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
        checkout = exp.checkout(cell.task, cell.condition)
        col = self.column(cell.condition)
        ctx = AgentContext(
            seed=cell_seed(exp.manifest.seed, cell),
            timeout_s=self.limits.timeout_s,
            max_turns=self.limits.max_turns,
            api_retries=0 if self.limits.rate_limit == "stop" else None,
        )
        prompt = build_prompt(loaded.task)
        reserve = self.limits.reserve_usd
        spec = replace(
            col.spec,
            max_cost_usd=reserve if reserve > 0 else None,
            fingerprints=exp.audit_index.fingerprints,
        )
        attempt = 0
        while True:
            self._check_running()
            attempt += 1
            started = datetime.now(UTC)
            isolation = "unknown"
            calls: list[ModelCall] = []
            audit = None
            diff: bytes | None = None
            transcript: bytes | None = None
            hidden: HiddenTestResult | None = None
            executed: CommandsExecuted | None = None
            clock = _Clock()
            try:
                with clock.phase("sandbox"):
                    sandbox = col.provider.create(checkout.path, spec)
                clock.add(sandbox.phases)
                with clock.closing(sandbox), self._tracked(sandbox):
                    isolation = sandbox.isolation
                    with clock.phase("agent"):
                        outcome, printed = col.agent.execute(prompt, sandbox, ctx)
                    transcript = _transcript(printed)
                    if sandbox.gateway is not None:
                        calls = sandbox.gateway.calls()
                        outcome = with_gateway_telemetry(outcome, calls, sandbox.gateway.budget_exceeded())
                        audit = audit_run(exp.audit_index, cell.condition, calls)
                    if loaded.task.kind == "change":
                        with clock.phase("grading"):
                            diff = capture_agent_diff(sandbox, checkout.commit)
                clock.begin("grading")
                hidden = None if diff is None else self._hidden_tests(exp, cell, diff)
                executed = self._execute(loaded.task, checkout, outcome)
            except (InfraError, OSError) as exc:
                outcome = self._infra_outcome(col.agent, exc)
            if outcome.status is not RunStatus.infra_error or attempt > self.limits.infra_retries:
                break
        self._check_running()  # a run whose sandbox was closed under it leaves nothing
        trigger = self._trigger(exp, cell, loaded.task, calls, outcome, col.agent)
        score, checks = self._grade(loaded.task, outcome, checkout, diff, hidden, executed, trigger)
        for name, artifact in ((TRANSCRIPT_FILE, transcript), (DIFF_FILE, diff)):
            if artifact is not None:
                self.store.save_artifact(exp.repo_name, cell, name, artifact)
        clock.end("grading")
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
            executed=executed,
            trigger=trigger,
            timings=clock.timings(),
        )

    @staticmethod
    def _trigger(
        exp: Experiment,
        cell: Cell,
        task: Task,
        calls: Sequence[ModelCall],
        outcome: AgentOutcome,
        agent: Agent,
    ) -> TriggerEvidence | None:
        """A trigger task's evidence of loading: the gateway's record and the agent's tool calls
        (none for a run that failed for the harness's reasons: it is never graded)."""
        if task.trigger is None or outcome.status is RunStatus.infra_error:
            return None
        gateway = body_reached(exp.audit_index, cell.condition, task.trigger.file, calls)
        return trigger_evidence(
            task.trigger, gateway=gateway, metrics=outcome.metrics, tool_stream=agent.reads_from_tool_stream
        )

    def _hidden_tests(self, exp: Experiment, cell: Cell, diff: bytes) -> HiddenTestResult:
        """The hidden tests on the agent's diff, after the agent's sandbox is gone: a fresh,
        offline one from trusted copies. A grader that could not run is our failure."""
        hidden = grade_change(
            exp.tasks[cell.task].task,
            exp.checkout(cell.task, cell.condition),
            diff,
            exp.assets[cell.task].hidden,
            self.provider,
            spec=self.spec,
            instructions=sorted({p for c in exp.manifest.conditions for p in c.files}),
        )
        if hidden.status == "infra_error":
            raise InfraError("the hidden-test grader failed: " + "; ".join(hidden.notes))
        return hidden

    def _execute(
        self, task: Task, checkout: SealedCheckout, outcome: AgentOutcome
    ) -> CommandsExecuted | None:
        """gold.execute: the answer's proposed commands, run like hidden tests once the agent's
        sandbox is gone, each in a fresh offline one, tracked so that Ctrl-C closes it under
        its command. A timed-out run scores 0 anyway."""
        if task.gold.execute is None or outcome.answer is None or outcome.status is RunStatus.timeout:
            return None
        return execute_proposals(
            task,
            checkout.path,
            outcome.answer,
            self.provider,
            spec=self.spec,
            secrets=self.secrets,
            track=self._tracked,
        )

    @staticmethod
    def _grade(
        task: Task,
        outcome: AgentOutcome,
        checkout: SealedCheckout,
        diff: bytes | None,
        hidden: HiddenTestResult | None,
        executed: CommandsExecuted | None = None,
        trigger: TriggerEvidence | None = None,
    ) -> tuple[Score | None, ChecksResult | None]:
        """Answer tasks against gold; change tasks by hidden tests and hard checks; trigger
        tasks by what was loaded. Infra errors are never graded; a timeout scores 0 (`timed_out`)."""
        if outcome.status is RunStatus.infra_error:
            return None, None
        if trigger is not None:
            score, checks = score_trigger(trigger), None
        elif diff is None or hidden is None:
            score = score_answer(task, outcome.answer, checkout.path, executed)
            checks = None
        else:
            checks = run_checks(task.gold.checks, task.gold.mistakes, diff, outcome.metrics)
            score = score_change(hidden, checks)
        if outcome.status is RunStatus.timeout:
            return timed_out(score), checks
        return score, checks

    @staticmethod
    def _infra_outcome(agent: Agent, exc: DocdeltaError | OSError) -> AgentOutcome:
        return agent.make_outcome(
            RunStatus.infra_error,
            error=str(exc),
        )


class _Clock:
    """Wall seconds per phase of one attempt of a run (`PhaseTimings`), summed when a phase
    recurs; a phase begun and never ended (an attempt that failed in it) is not recorded."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._begun: dict[str, float] = {}

    def begin(self, name: str) -> None:
        self._begun[name] = time.perf_counter()

    def end(self, name: str) -> None:
        started = self._begun.pop(name, None)
        if started is not None:
            key = f"{name}_s"
            self.phases[key] = self.phases.get(key, 0.0) + time.perf_counter() - started

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.begin(name)
        yield
        self.end(name)

    @contextlib.contextmanager
    def closing(self, sandbox: Sandbox) -> Iterator[Sandbox]:
        """`sandbox` closed on every exit path, as `with sandbox:` does, the close timed."""
        try:
            yield sandbox
        finally:
            with self.phase("teardown"):
                sandbox.close()

    def add(self, measured: Mapping[str, float]) -> None:
        """A sandbox's own split of its making (`Sandbox.phases`), the names it shares with
        `PhaseTimings` only."""
        for name, seconds in measured.items():
            if f"{name}_s" in PhaseTimings.model_fields:
                self.phases[f"{name}_s"] = seconds

    def timings(self) -> PhaseTimings:
        return PhaseTimings(**self.phases)


@dataclass
class _RunInProgress:
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
                # Held: a Ctrl-C inside submit, while it starts a worker thread, would leave a
                # worker the pool never joins, still making sandboxes after we cleaned up.
                with deferred_signals():
                    future = pool.submit(self.runner.run_patiently, self.exp, cell)
                    self.in_flight[future] = index
            while self.in_flight:
                self._collect()
        except BaseException:
            # Ctrl-C, SIGTERM or our own fault: runs not started never start; the sandboxes
            # of runs in flight are closed under them (their execs killed) and their results
            # dropped (a rerun runs those cells), finished ones are saved already. Every
            # worker is joined before we go on to remove the providers' temporary roots.
            with deferred_signals():
                self.runner.abort()
                pool.shutdown(wait=True)
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
                self.report.stopped = self.report.stopped or self.runner.failed_alike(self.exp, result)
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
