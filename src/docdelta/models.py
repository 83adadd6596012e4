"""The shared vocabulary: every serialized thing that crosses a module boundary.

Each arrow of the data flow (detect -> plan -> workspace -> sandbox + agent ->
grading -> store -> stats -> report) passes these pydantic models, so a result
written by one version of docdelta can be read, validated and compared by the
next. `SCHEMA_VERSION` is stored in every file we write.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

import re2
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

# Re-exported (the `X as X` form): what `docdelta detect` needs lives in models_core, so that
# it does not build the ~60 models below; everything else imports these names from here.
from docdelta.models_core import BASE as BASE
from docdelta.models_core import BUILTIN_CONDITIONS as BUILTIN_CONDITIONS
from docdelta.models_core import DEFAULT_CONDITIONS as DEFAULT_CONDITIONS
from docdelta.models_core import DEFAULT_NOISE_BAND as DEFAULT_NOISE_BAND
from docdelta.models_core import HEAD as HEAD
from docdelta.models_core import NONE as NONE
from docdelta.models_core import PATCHED as PATCHED
from docdelta.models_core import SCHEMA_VERSION as SCHEMA_VERSION
from docdelta.models_core import ChangedFile as ChangedFile
from docdelta.models_core import ConditionSpec as ConditionSpec
from docdelta.models_core import Detection as Detection
from docdelta.models_core import FileStatus as FileStatus
from docdelta.models_core import Frozen as Frozen
from docdelta.models_core import LoadMode as LoadMode
from docdelta.models_core import NearMiss as NearMiss
from docdelta.models_core import sha256_hex as sha256_hex


# --------------------------------------------------------------------- lines
def _parse_line_range(value: Any) -> Any:
    """Accept `12`, `"12"`, `"12-14"`, `[12, 14]` or `{start, end}` in task and answer files."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {"start": value, "end": value}
    if isinstance(value, str):
        m = re.fullmatch(r"\s*L?(\d+)\s*(?:[-:]\s*L?(\d+))?\s*", value)
        if not m:
            raise ValueError(f"expected a line number or range like '12' or '12-14', got {value!r}")
        start = int(m.group(1))
        return {"start": start, "end": int(m.group(2) or start)}
    if isinstance(value, list | tuple) and len(value) == 2:
        return {"start": value[0], "end": value[1]}
    return value


class LineRange(Frozen):
    """An inclusive, 1-based range of lines."""

    start: int = Field(ge=1)
    end: int = Field(ge=1)

    @field_validator("end")
    @classmethod
    def _ordered(cls, end: int, info: Any) -> int:
        start = info.data.get("start")
        if start is not None and end < start:
            raise ValueError(f"line range ends ({end}) before it starts ({start})")
        return end

    def overlaps(self, other: LineRange) -> bool:
        return self.start <= other.end and other.start <= self.end

    def __str__(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"


Lines = Annotated[LineRange, BeforeValidator(_parse_line_range)]


# --------------------------------------------------------------------- tasks
class GoldQuote(Frozen):
    """A quote in a file: it stands wherever the quote is in a condition's copy of the file."""

    path: str
    quote: str = Field(min_length=1)
    lines: Lines | None = Field(
        default=None, description="where the quote stood when the task was written: a hint, never scored"
    )


class GoldCitation(GoldQuote):
    """Where the gold answer stands: a quote in a file, located in each condition's files
    (`docdelta.tasks.quotes`); `any_of` lists other quotes that serve as well (a rule stated in
    AGENTS.md and in CONTRIBUTING.md)."""

    any_of: list[GoldQuote] = Field(default=[], description="alternatives: citing any one of them counts")

    def choices(self) -> list[GoldQuote]:
        return [GoldQuote(path=self.path, quote=self.quote, lines=self.lines), *self.any_of]


class RunnerKind(StrEnum):
    """The test runners docdelta recognises in a validation command (see grading/runners.py)."""

    pytest = "pytest"
    vitest = "vitest"
    jest = "jest"
    go_test = "go test"
    gotestsum = "gotestsum"
    cargo_test = "cargo test"
    nextest = "cargo nextest"
    declared = "declared report"
    """Any other command: it writes the JUnit file named by `gold.validation.report`."""


class Validation(Frozen):
    """How a change task is graded: hidden tests run after the agent, in a fresh sandbox.

    Hidden files live in the task folder (`<tasks dir>/<task id>/hidden/<path>`) or,
    failing that, in the source commit; either way they must be stripped from the
    agent's checkout. `command` is split into words (shlex) and run without a shell
    and without network. A command that starts a runner docdelta knows (pytest, vitest,
    jest, go test, gotestsum, cargo test, cargo nextest; through `uv run`, `poetry run`,
    `python -m`, `pnpm exec`, ...) gets that runner's report flags added (see
    grading/runners.py); any other command must declare the JUnit `report` it writes,
    because an exit code alone is no evidence that a test ran.
    """

    hidden: list[str] = Field(min_length=1, description="repository paths of the hidden test files")
    command: str = Field(min_length=1, description="e.g. 'uv run --frozen pytest -q tests/test_x.py'")
    exit_code: int = Field(default=0, description="exit code of a passing run")
    timeout_s: float = Field(default=300.0, gt=0)
    report: str | None = Field(
        default=None,
        description="JUnit XML path the command writes (workspace-relative); recognised runners: automatic",
    )
    reference: str = Field(
        default="reference.patch", description="reference solution, a unified diff in the task folder"
    )
    protect: list[str] = Field(
        default=[], description="extra globs of test/build files whose agent edits are never applied"
    )
    source: str | None = Field(
        default=None, description="commit the hidden tests were written for (tasks drafted from a commit)"
    )


class HardChecks(Frozen):
    """Deterministic checks on the agent's diff; globs are gitignore-like (`instructions.globs`)."""

    require_changed: list[str] = Field(default=[], description="globs; each must match a changed path")
    forbid_changed: list[str] = Field(default=[], description="globs no changed path may match")
    expect_added: list[str] = Field(default=[], description="snippets that must appear in added lines")
    forbid_added: list[str] = Field(default=[], description="snippets no added line may contain")
    min_files: int | None = Field(default=None, ge=0)
    max_files: int | None = Field(default=None, ge=0)
    max_lines: int | None = Field(default=None, ge=0, description="added + removed lines")


class MistakeRule(Frozen):
    """A "never do X" rule: a regex over added lines and/or the commands the agent ran."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    pattern: str = Field(min_length=1, description="RE2 regex, searched (not matched) per line")
    scope: Literal["added", "commands", "both"] = "both"
    paths: list[str] = Field(default=[], description="globs limiting which files' added lines count")
    description: str = ""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        mistake_regex(pattern)
        return pattern


def mistake_regex(pattern: str) -> re2._Regexp[str]:
    """A mistake rule's pattern, compiled with RE2: it matches in linear time, so a pattern
    that would backtrack catastrophically in Python's `re` (`(a+)+$`) cannot hang grading.
    RE2 has no backreferences or lookaround; a pattern that uses them is refused here, at
    task load, with RE2's reason."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(
            f"invalid regex {pattern!r}: {reason} (mistake patterns use RE2 syntax: no lookaround "
            "or backreferences)"
        ) from None


def _execute_switch(value: Any) -> Any:
    """`execute: true` turns execution on with its defaults; `false` leaves it off."""
    if value is True:
        return {}
    if value is False:
        return None
    return value


class CommandExecution(Frozen):
    """gold.execute: run the commands the answer proposes, each in a fresh offline sandbox of
    the run's sealed checkout (docdelta.grading.execute), so a command that looks right but
    does not exist in the project (a stale test path, a wrong make target or flag) is a miss."""

    timeout_s: float = Field(default=60.0, gt=0, le=600, description="per command; then it is killed")
    max_commands: int = Field(default=5, ge=1, le=20, description="proposals run per answer, in order")
    exit_code: int = Field(default=0, description="exit code of a command that works")


class Gold(Frozen):
    docs: list[str] = Field(default=[], description="instruction files the answer depends on")
    files: list[str | list[str]] = Field(
        default=[], description="repository paths a correct answer names; a list: any one of them"
    )
    commands: list[str | list[str]] = Field(
        default=[], description="commands a correct answer gives; a list: any one of them"
    )
    guardrails: list[str] = Field(
        default=[], description="commands or snippets a correct answer must NOT recommend"
    )
    points: list[str] = Field(default=[], description="key points; scored only by the judge")
    verdict: str | None = Field(default=None, description="expected short verdict, e.g. 'yes' or 'no'")
    validation: Validation | None = Field(default=None, description="change tasks: the hidden tests")
    checks: HardChecks = Field(default_factory=HardChecks)
    mistakes: list[MistakeRule] = []
    execute: Annotated[CommandExecution | None, BeforeValidator(_execute_switch)] = Field(
        default=None,
        description="answer tasks with gold commands: run the proposed commands (`true`, or limits)",
    )


class PassThreshold(Frozen):
    """A task's own bar, beside the statistical verdict: pass^k of an arm's graded runs (the
    chance that k of them drawn at random all score 1.0; k = 1 is the pass rate) must reach
    `fraction`. Users gate on "passes in at least 80 % of runs" as well as on a mean difference."""

    fraction: float = Field(gt=0, le=1, description="the share pass^k must reach, e.g. 0.8")
    k: int = Field(default=1, ge=1, description="runs that must all pass; 1: the plain pass rate")


class Task(Frozen):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    prompt: str = Field(min_length=1)
    kind: Literal["answer", "change"] = "answer"
    gold: Gold = Field(default_factory=Gold)
    gold_citations: list[GoldCitation] = []
    reviewed: bool = False
    holdout: bool = Field(
        default=False,
        description="run and counted in the aggregate, but its own results are never shown, so the "
        "instructions are not tuned to the visible tasks",
    )
    pass_threshold: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="share of runs (of pass^k with pass_k) that must score 1.0 in the head arm, or the "
        "check fails when base reached it; overrides the pass-threshold input / --pass-threshold",
    )
    pass_k: int | None = Field(
        default=None,
        ge=1,
        description="with pass_threshold: gate on pass^k, the chance that k runs all pass, not the pass rate",
    )

    @property
    def threshold(self) -> PassThreshold | None:
        """The task's own bar, when it sets one."""
        if self.pass_threshold is None:
            return None
        return PassThreshold(fraction=self.pass_threshold, k=self.pass_k or 1)

    @model_validator(mode="after")
    def _k_needs_threshold(self) -> Task:
        if self.pass_k is not None and self.pass_threshold is None:
            raise ValueError("pass_k needs pass_threshold (the share of pass^k to reach, e.g. 0.8)")
        return self

    @model_validator(mode="after")
    def _change_needs_validation(self) -> Task:
        if self.kind == "change" and self.gold.validation is None:
            raise ValueError("a change task needs gold.validation (hidden tests and a command)")
        if self.gold.execute is not None and (self.kind != "answer" or not self.gold.commands):
            raise ValueError("gold.execute runs proposed commands: it needs an answer task with commands")
        return self


# -------------------------------------------------------------- agent output
class AnswerCitation(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    path: str
    lines: Lines | None = None


class AgentAnswer(BaseModel):
    """The JSON object every agent is asked to end with (see agents/prompt.py).

    Parsed leniently (unknown keys ignored): agents are not schema validators.
    """

    model_config = ConfigDict(extra="ignore", defer_build=True)

    answer: str = ""
    commands: list[str] = []
    files: list[str] = []
    citations: list[AnswerCitation] = []
    verdict: str | None = None


class RunStatus(StrEnum):
    """How a run ended. Only `infra_error` is excluded from scoring (and retried)."""

    ok = "ok"
    no_answer = "no_answer"
    timeout = "timeout"
    oom = "oom"
    disk_full = "disk_full"
    pids_limit = "pids_limit"
    budget = "budget"
    max_turns = "max_turns"
    rate_limited = "rate_limited"
    agent_error = "agent_error"
    infra_error = "infra_error"


class CommandRun(Frozen):
    command: str
    exit_code: int | None = None


class AgentMetrics(Frozen):
    """Normalized telemetry; None means the agent did not report it (never a guess)."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    tool_calls: int | None = None
    commands: list[CommandRun] = []
    files_read: list[str] = []
    duration_s: float = 0.0


class AgentOutcome(Frozen):
    """One agent execution, normalized across adapters."""

    agent: str
    agent_version: str
    model: str | None = None
    status: RunStatus
    answer: AgentAnswer | None = None
    final_text: str = ""
    metrics: AgentMetrics = Field(default_factory=AgentMetrics)
    exit_code: int | None = None
    error: str | None = None
    served_by: dict[str, str] = Field(
        default={},
        description="what the model server said answered (Chat Completions `model`, `system_fingerprint`)",
    )


class ModelCall(Frozen):
    """One forwarded (or refused) call, as logged by the gateway; keys never appear here."""

    upstream: str | None
    method: str
    path: str
    status: int
    latency_s: float
    streamed: bool = False
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = Field(
        default=None,
        description="None, or why the gateway did not complete it: 'budget', 'refused', "
        "'unauthorized', 'too_large', 'timeout', 'busy', 'upstream', 'unfinished', "
        "'client_gone' (the agent hung up mid-reply; the call is still booked)",
    )
    count: int = Field(
        default=1, ge=1, description="refusals past the first few are logged as one entry with their count"
    )
    instructions: dict[str, Literal["injected", "tool"]] = Field(
        default={},
        description="audit fingerprint id -> how that file's text reached this request: in the "
        "prompt the agent built ('injected') or only in a tool's output ('tool')",
    )

    @property
    def answered(self) -> bool:
        """The upstream answered in full and billed it (even if the agent hung up meanwhile)."""
        return self.error in (None, "client_gone")


# -------------------------------------------------------------------- audit
class InstructionAudit(Frozen):
    """Which instruction files' text reached the model in one run, as the gateway saw the
    requests (see docdelta.instructions.audit). Files are named `path`, or `condition:path` /
    `near-miss:path` for files that are not this condition's."""

    seen: list[str] = Field(default=[], description="this condition's instruction files that reached it")
    missing: list[str] = Field(
        default=[], description="this condition's changed instruction files that never reached it"
    )
    foreign: list[str] = Field(
        default=[], description="files that reached it although they are not this condition's"
    )

    @property
    def flagged(self) -> bool:
        return bool(self.missing or self.foreign)


class InstructionFlag(Frozen):
    """Runs of one condition where a file did not reach the model (`missing`) or a file
    that is not the condition's did (`foreign`)."""

    condition: str
    kind: Literal["missing", "foreign"]
    file: str
    runs: int
    audited: int = Field(description="runs of the condition whose requests were audited")


# ------------------------------------------------------------------ grading
class ScoreItem(Frozen):
    kind: Literal["command", "file", "citation", "verdict", "guardrail", "point", "rule", "tests", "check"]
    expected: str
    hit: bool | None = Field(description="None: not scored (e.g. key points before a judge exists)")
    note: str = ""
    attainable: bool = Field(
        default=True,
        description="False: the gold is not in this condition's files (a citation whose quote is absent)",
    )


class ExecutedCommand(Frozen):
    """One proposed command, run with `sh -c` in its own fresh offline sandbox."""

    command: str = Field(description="as proposed, without the backticks, quotes or `$ ` around it")
    exit_code: int | None = Field(description="None: killed (timeout, out of memory)")
    seconds: float
    timed_out: bool = False
    first_error: str | None = Field(
        default=None, description="the first line of its output that says what went wrong (redacted)"
    )
    output_tail: str = Field(default="", description="the end of its output, truncated and redacted")


class CommandsExecuted(Frozen):
    """What running an answer's proposed commands found (gold.execute)."""

    isolation: str = Field(description="the sandboxes' isolation, e.g. 'bwrap', 'docker-none'")
    commands: list[ExecutedCommand] = []
    refused: str | None = Field(
        default=None, description="why nothing was run (no sandbox to run it in); scored by matching only"
    )
    skipped: list[str] = Field(default=[], description="proposals beyond gold.execute.max_commands")


class Score(Frozen):
    value: float = Field(ge=0.0, le=1.0)
    items: list[ScoreItem]

    @property
    def missed(self) -> list[ScoreItem]:
        return [i for i in self.items if i.hit is False]


# -------------------------------------------------------------------- matrix
class Cell(Frozen):
    """One (task, condition, repeat); repeats count from 1."""

    task: str
    condition: str
    repeat: int = Field(ge=1)

    @property
    def key(self) -> str:
        return f"{self.task}/{self.condition}/r{self.repeat}"


class RunResult(Frozen):
    """result.json: written once, atomically, when a run is complete."""

    schema_version: int = SCHEMA_VERSION
    cell: Cell
    status: RunStatus
    outcome: AgentOutcome
    score: Score | None = Field(description="None only for infra_error runs, which are never graded")
    isolation: str = Field(description="how the run was isolated, e.g. 'bwrap', 'docker-internal', 'none'")
    seed: int
    attempt: int = 1
    started_at: datetime
    finished_at: datetime
    task_sha256: str
    overlay_sha256: str
    tree_sha256: str
    model_calls: list[ModelCall] = Field(
        default=[], description="every model call the gateway forwarded or refused for this run"
    )
    hidden_tests: HiddenTestResult | None = Field(
        default=None, description="change tasks: the hidden tests' verdict on the agent's edits"
    )
    checks: ChecksResult | None = Field(
        default=None, description="change tasks: hard checks and mistake-rule hits on the agent's diff"
    )
    instructions_seen: InstructionAudit | None = Field(
        default=None, description="None: no gateway saw the run's requests, so nothing was audited"
    )
    executed: CommandsExecuted | None = Field(
        default=None, description="gold.execute: the answer's proposed commands, as they ran"
    )


ARM_FACTORS = ("agent", "model", "condition", "overlay")
"""What an arm may vary: the agent, its model, the condition's instruction files, and extra
files laid over the checkout. Two compared arms should differ in one of them."""


class ArmSpec(Frozen):
    """An arm as the user declares it (`--arms`, `.docdelta.yml` `arms:`): a condition run by
    an agent and model of its own, optionally with extra files (a skills folder, a docs export)
    laid over its checkout. Unset fields take the run's own (`--agent`, `--model`)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$", description="the arm's column in the scorecard")
    condition: str = Field(
        default="head", description="the condition it builds on: base, head, none, patched"
    )
    agent: str | None = Field(default=None, description="default: the run's --agent")
    agent_cmd: str | None = Field(default=None, description="the command agent's command line")
    model: str | None = Field(default=None, description="default: the run's --model")
    overlay: str | None = Field(
        default=None,
        description="a directory whose files are laid over the checkout as they are laid out in it "
        "(CLI: a host path; .docdelta.yml: a directory of the repository at the base ref)",
    )
    vs: str | None = Field(default=None, description="the arm or condition it is compared with")


class AgentInfo(Frozen):
    name: str
    version: str
    model: str | None = None
    settings: dict[str, int | str] = Field(
        default={},
        description="the agent's knobs that change what it does, e.g. the per-turn output cap",
    )
    server: dict[str, str] = Field(
        default={},
        description="the model server's identity where it exposes one (llama-server: model, "
        "chat template hash, build, flags)",
    )


class ArmRecord(Frozen):
    """An arm in the manifest: what its column runs, beside its `ConditionSpec` (whose files
    and overlay hash already include the arm's overlay)."""

    condition: str
    agent: AgentInfo
    overlay: str | None = Field(default=None, description="the overlay directory as declared")
    overlay_sha256: str | None = Field(default=None, description="of the overlay's files alone")
    vs: str | None = None


class RunBounds(Frozen):
    """What bounds every run, as part of the experiment's identity (manifest and cross-PR
    cache key): a run cut off at 5 turns or $0.10 is not comparable with one allowed 50
    turns or $1, so a resume or a cached arm under other bounds is refused, never mixed.
    The matrix's spend cap, retries and rate-limit policy are not here: they decide which
    cells run now, not what a run may do."""

    timeout_s: float
    turn_cap: int | None = Field(description="the cap the agent really enforces; None: it has none")
    run_budget_usd: float | None = Field(description="per-run reserve, and its cost budget at the gateway")
    gateway_budget: dict[str, float | int | None] | None = Field(
        default=None, description="the gateway's per-run budget as configured (gateway agents only)"
    )
    upstreams: dict[str, str] | None = Field(
        default=None, description="gateway route -> upstream base URL (gateway agents only)"
    )


class Manifest(Frozen):
    """manifest.json: the plan and every hash that identifies the experiment."""

    schema_version: int = SCHEMA_VERSION
    repo: str
    base_sha: str
    head_sha: str
    source_sha: str
    source_tree_sha256: str
    conditions: list[ConditionSpec]
    tasks: dict[str, str] = Field(description="task id -> sha256 of the task file")
    task_sources: dict[str, str] = Field(
        default={},
        description="change task id -> the commit its cells run on, when the task names its own "
        "(gold.validation.source); every other task runs on source_sha",
    )
    agent: AgentInfo
    sandbox: str
    image_digest: str | None = None
    seed: int
    repeats: int
    adaptive: bool = Field(
        default=False, description="--repeats auto: `repeats` is the cap, rounds stop tasks once decided"
    )
    bounds: RunBounds | None = None
    noise_band: float | None = Field(
        default=None, description="the noise band the run was planned with (None: planned before it was kept)"
    )
    docdelta_version: str = Field(default="", description="the docdelta that planned and ran it")
    order: list[Cell]
    holdout: list[str] = Field(default=[], description="task ids whose results are shown only in aggregate")
    unreviewed: list[str] = Field(
        default=[], description="task ids run with `reviewed: false` gold (--allow-unreviewed)"
    )
    skipped: dict[str, str] = Field(
        default={},
        description="task id -> the gold quote that stands in no condition: the task cannot apply "
        "to this PR (e.g. a past PR's, written before the rule) and is not run",
    )
    pooled_only: list[str] = Field(
        default=[],
        description="conditions this plan runs none of: their control is the pooled earlier batches",
    )
    arms: dict[str, ArmRecord] = Field(
        default={},
        description="column name -> the arm it runs (agent, model, overlay); conditions are not here",
    )
    thresholds: dict[str, PassThreshold] = Field(
        default={},
        description="task id -> its pass threshold (its own, else the run's default); read by the report",
    )
    created_at: datetime

    def identity(self) -> str:
        """sha256 of everything that makes two runs comparable (not the time it was made).
        `arms`, `pooled_only`, `unreviewed` and `skipped` count only when set, so a plan without
        them keeps its identity. `thresholds` never count: they judge runs, they do not change
        them (a task's own is in its file's hash anyway)."""
        unset = {"created_at", "thresholds"} | ({"arms"} if not self.arms else set())
        unset |= {"pooled_only"} if not self.pooled_only else set()
        unset |= {"unreviewed"} if not self.unreviewed else set()
        unset |= {"skipped"} if not self.skipped else set()
        unset |= {"noise_band"}  # how runs are judged, not what they ran
        return sha256_hex(self.model_dump_json(exclude=unset).encode())

    @property
    def band(self) -> float:
        """The noise band every report of this run uses: the one it was planned with."""
        return DEFAULT_NOISE_BAND if self.noise_band is None else self.noise_band

    def agent_of(self, column: str) -> AgentInfo:
        """The agent that runs a column: its arm's, else the experiment's."""
        arm = self.arms.get(column)
        return self.agent if arm is None else arm.agent


# -------------------------------------------------------------------- report
VerdictKind = Literal["improved", "regressed", "no_change", "inconclusive"]


class Certainty(StrEnum):
    """The one vocabulary of certainty every shown delta carries, read off the decision rule
    that set the verdict (`decision.decide`): a hypothesis it rejected is `significant`; a
    delta inside the configured noise band is `noise_band` (the rule never calls it a change,
    whatever its p); anything else is `not_significant`. So no mark can contradict the verdict."""

    significant = "significant"
    not_significant = "not significant"
    noise_band = "within noise band"


"""improved/regressed: significant and beyond the noise band; no_change: the whole
interval lies inside the band; inconclusive: the interval spans the band and an effect."""
GatePolicy = Literal["regression", "no-improvement", "never"]


class Quartiles(Frozen):
    """Min, quartiles and max of one metric over the graded runs of an arm."""

    low: float
    q1: float
    q3: float
    high: float


class ConditionStats(Frozen):
    """One arm (all runs of one condition), for one task or pooled over tasks.

    `runs` counts graded runs only; `infra_error` runs never lower a mean and are
    counted in `infra_errors` instead. `mean_score` is the mean of per-task means,
    so a task with more surviving runs does not weigh more in the pooled figure.
    """

    condition: str
    runs: int
    infra_errors: int = 0
    mean_score: float | None = None
    score_min: float | None = None
    score_max: float | None = None
    runs_at_1: int = 0
    median_tokens: float | None = Field(default=None, description="tokens in + out, runs that reported both")
    median_cost_usd: float | None = None
    total_cost_usd: float | None = None
    median_turns: float | None = None
    median_duration_s: float | None = None
    statuses: dict[str, int] = {}
    pass_rate: float | None = Field(default=None, description="share of graded runs at 1.0")
    pass_all: float | None = Field(
        default=None, description="pass^k with k = runs: 1.0 when every repeat passed, else 0.0"
    )
    spreads: dict[str, Quartiles] = Field(
        default={}, description="metric (tokens, cost_usd, turns, duration_s) -> quartiles"
    )


class Delta(Frozen):
    """treatment - control of mean scores; None when either arm has no graded run."""

    treatment: str
    control: str
    value: float | None = None
    noise: bool | None = Field(default=None, description="True when |value| <= the noise band")
    p_value: float | None = Field(
        default=None,
        description="per task: the Holm-adjusted sequential p the task's decision (head vs base, or "
        "head vs none) used, in the direction of the delta; Fisher's exact test on passes without one",
    )
    flip: bool | None = Field(
        default=None,
        description="per task: the pass/fail majority differs between the arms and (head vs base) the "
        "task's change is significant, so a flip is never noise sold as a finding",
    )
    aa_noise: bool | None = Field(
        default=None,
        description="head vs base: True when |value| <= the A/A noise band (a task's own band per task, "
        "the stratified band overall); words only, the verdict never reads it",
    )
    certainty: Certainty | None = Field(
        default=None,
        description="the mark the decision rule gives this delta (None without a decision, e.g. refused)",
    )


class JudgedTally(Frozen):
    """The judge's rulings on one task's arm: key points made and rules respected, of all ruled."""

    hits: int
    rulings: int = Field(ge=1)
    runs: int = Field(description="graded runs that carry at least one ruling")


class ArmPass(Frozen):
    """One arm of one task against the task's pass threshold."""

    passes: int
    runs: int
    value: float | None = Field(description="pass^k (k = 1: the pass rate); None with fewer than k runs")
    met: bool | None = Field(description="value >= the threshold's fraction; None when there is no value")


class ThresholdSummary(Frozen):
    """A task's pass threshold per arm, and whether it fails the check: the head arm missed it
    and the base arm did not (a miss base already had is not this PR's doing)."""

    threshold: PassThreshold
    arms: dict[str, ArmPass]
    blocks: bool


class TaskSummary(Frozen):
    task: str
    conditions: dict[str, ConditionStats]
    head_vs_base: Delta
    head_vs_none: Delta
    judged: dict[str, JudgedTally] = Field(
        default={}, description="condition -> the judge's hits; empty when no run of the task was judged"
    )
    decision: TaskDecisionSummary | None = Field(
        default=None, description="head vs base: this task's call; None when an arm has no graded run"
    )
    threshold: ThresholdSummary | None = Field(default=None, description="when the task has a pass threshold")


class AANoise(Frozen):
    """What identical docs produce at this experiment's size: the band |head - base| stays
    within in `quantile` of simulated A/A experiments drawn from the observed per-task scores."""

    band: float
    quantile: float
    simulations: int
    tasks: int
    repeats: int


class MissedItem(Frozen):
    """A gold item the agent missed, counted over the graded runs of one condition."""

    task: str
    kind: str
    expected: str
    count: int
    runs: int
    note: str = ""


class Confounds(Frozen):
    isolation: dict[str, int] = Field(default={}, description="isolation value -> runs")
    weak_isolation: list[str] = Field(default=[], description="isolation values seen that are not full")
    near_misses: list[NearMiss] = []
    unscored_points: int = Field(default=0, description="distinct (task, key point) pairs left to the judge")
    missing_conditions: list[str] = []
    missing_runs: int = Field(default=0, description="planned cells with no result at all")
    instruction_flags: list[InstructionFlag] = Field(
        default=[], description="the injected-instruction audit's findings, per condition and file"
    )
    unread_changes: list[str] = Field(
        default=[],
        description="changed instruction files the agent under test does not read natively "
        "(e.g. AGENTS.md for Claude Code): their edit cannot change its behaviour",
    )
    code_changes: int = Field(
        default=0,
        description="files other than instruction files changed between base and head: every "
        "condition runs on the source commit's code, so the other side's docs meet code they were "
        "not written for",
    )
    source: Literal["base", "head", "other"] = Field(default="head", description="which commit's code ran")
    task_sources: dict[str, str] = Field(
        default={}, description="task id -> the commit whose code its runs got instead (its own source)"
    )
    unguarded: list[str] = Field(
        default=[],
        description="change tasks whose hidden tests passed in a run graded without docdelta's pytest "
        "guard: only the runner's own report says they passed",
    )
    skipped: dict[str, str] = Field(
        default={}, description="task id -> the gold quote that stands in no condition (the task was not run)"
    )


class ArmUse(Frozen):
    """How many graded runs of one arm used a reference (ran, read or named it)."""

    used: int
    runs: int


class InstructionRef(Frozen):
    """A command or path named by one added or removed line of the docs diff (head vs base
    instruction files), and per arm how many runs used it: did the edit change behaviour?"""

    file: str
    line: int = Field(ge=1, description="line number in the head file (added) or the base file (removed)")
    change: Literal["added", "removed"]
    text: str = Field(description="the changed line, stripped")
    kind: Literal["command", "path"]
    ref: str = Field(description="the command or path as the line names it")
    arms: dict[str, ArmUse] = Field(default={}, description="condition -> runs that used it")
    p_value: float | None = Field(default=None, description="Fisher exact test of using runs, head vs base")


class PoolBatch(Frozen):
    """One complete base arm of an earlier PR, as its pool lists it."""

    digest: str = Field(description="the cached arm entry (cache.ArmKey digest)")
    source_commit: str
    finished_at: datetime
    runs: int


class PoolDrift(Frozen):
    """The batch that ended a pool: its scores differ from the newer pooled runs."""

    batch: PoolBatch
    p_value: float
    delta: float = Field(description="stratified mean score, that batch minus the newer runs")
    alpha: float


class PooledControl(Frozen):
    """Earlier runs of the base arm used as extra control runs (`pooled.json` in the workdir)."""

    condition: str
    batches: list[PoolBatch]
    results: list[RunResult]
    drift: PoolDrift | None = None


class PoolSummary(Frozen):
    """What the comment says about the pooled base runs: how many, from which batches, and the
    drift that ended the pool (if one did)."""

    runs: int
    batches: list[PoolBatch]
    since: datetime
    drift: PoolDrift | None = None
    only: bool = False
    """The plan ran no base arm of its own: the pooled runs are the whole control."""


class ArmComparison(Frozen):
    """One arm against the arm or condition it is compared with (`vs`): per task and over
    tasks, with a stratified permutation test, and the factors in which the two differ."""

    arm: str
    vs: str
    differs_in: list[str] = Field(description="the ARM_FACTORS in which the two columns differ")
    described: dict[str, str] = Field(
        default={}, description="both columns -> what runs them: agent, model, condition and overlay"
    )
    tasks: dict[str, Delta] = Field(description="task -> arm - vs of mean scores (holdout tasks left out)")
    overall: Delta
    arm_runs: int
    vs_runs: int
    warning: str | None = Field(
        default=None, description="set when the two differ in more than one factor: no single cause"
    )


class Summary(Frozen):
    """The scorecard's numbers; rendered as markdown, JSON, a badge and (later) a PR comment."""

    schema_version: int = SCHEMA_VERSION
    repo: str
    base_sha: str
    head_sha: str
    source_sha: str
    agent: AgentInfo
    repeats: int
    noise_band: float
    conditions: list[str]
    changed: list[ChangedFile]
    tasks: list[TaskSummary] = Field(description="per task; holdout tasks are left out")
    holdout_tasks: int = Field(default=0, description="tasks counted in the aggregates but not shown")
    unreviewed: list[str] = Field(
        default=[], description="shown tasks whose gold is `reviewed: false`: the verdict rests on it"
    )
    unreviewed_holdout: int = Field(default=0, description="holdout tasks with unreviewed gold (not named)")
    overall: dict[str, ConditionStats]
    head_vs_base: Delta
    head_vs_none: Delta
    missed: dict[str, list[MissedItem]] = Field(description="condition -> most-missed items, most first")
    confounds: Confounds
    alpha: float = 0.05
    verdict: VerdictSummary | None = Field(default=None, description="head vs base")
    verdict_vs_none: VerdictSummary | None = Field(default=None, description="head vs none")
    power: PowerSummary | None = None
    pooled: PoolSummary | None = Field(
        default=None, description="earlier base runs pooled into the head-vs-base control"
    )
    usage: list[ShiftSummary] = Field(default=[], description="tokens and cost, head vs base")
    infra_error_rate: float | None = Field(default=None, description="infra_error runs / all runs")
    unmeasured: list[str] = Field(
        default=[],
        description="tasks whose runs had no scored item (key points only, no judge): no score, "
        "left out of every statistic",
    )
    verdict_refused: str | None = Field(
        default=None, description="why no verdict is given although arms have runs (too many infra errors)"
    )
    faults: dict[str, int] = Field(
        default={}, description="runs per status that is the harness's or agent command's failure"
    )
    broken: str | None = Field(
        default=None,
        description="set when so many runs are faults that the evaluation measured the failure; "
        "the scorecard leads with it and there is no verdict",
    )
    instruction_usage: list[InstructionRef] = Field(
        default=[], description="commands and paths named by changed instruction lines, and who used them"
    )
    grading_failures: list[GradingFailure] = Field(
        default=[], description="hidden-test gradings (selftest legs or runs) in which no test ran"
    )
    aa_noise: AANoise | None = Field(
        default=None, description="the A/A-derived noise band of head vs base; informative, not the verdict's"
    )
    arms: list[ArmComparison] = Field(
        default=[], description="each declared arm against the column it is compared with"
    )
    threshold_failures: list[str] = Field(
        default=[], description="shown tasks whose head arm missed its pass threshold where base met it"
    )

    @property
    def unreviewed_note(self) -> str:
        """What the scorecard's header and verdict line (and so the check summary, which is the
        comment) add when tasks ran with unreviewed gold (`--allow-unreviewed`): a verdict
        partly measured against drafts nobody checked. Holdout tasks are counted, never
        named. Empty when every task was reviewed."""
        count = len(self.unreviewed) + self.unreviewed_holdout
        if not count:
            return ""
        held = self.unreviewed_holdout
        named = [*self.unreviewed, *([f"{held} holdout task{'s' * (held != 1)}"] if held else [])]
        return f"the suite included {count} unreviewed task{'s' * (count != 1)} ({', '.join(named)})"


class VerdictSummary(Frozen):
    """The call on treatment vs control (`docdelta.scorecard.decision`), with the numbers that justify it."""

    treatment: str
    control: str
    kind: VerdictKind
    subject: str = Field(
        default="overall",
        description="the hypothesis estimate, interval and p belong to: a task id or 'overall'",
    )
    estimate: float = Field(description="the subject's raw mean-score difference (overall: mean over tasks)")
    ci_low: float | None = Field(
        description="the subject's interval: contains the estimate, excludes 0 exactly when p <= alpha; "
        "None when an arm is too small"
    )
    ci_high: float | None
    confidence: float | None
    p_value: float | None = Field(
        description="the subject's own p: Holm-adjusted sequential p (a change, inconclusive), TOST p "
        "(no change); None where no test can reject"
    )
    threshold: float = Field(description="what p_value was compared with (alpha)")
    decided_by: list[str] = Field(default=[], description="task ids and/or 'overall' that decided")
    exact: bool = Field(description="True when every permutation test enumerated every arrangement")
    alpha: float
    band: float
    tasks: int
    design: str = Field(description="fixed N repeats, or auto with its looks")
    rounds: int = Field(description="repeats per arm the longest task ran")
    repeats_needed: int | None = Field(
        default=None, description="inconclusive: repeats per arm at which this spread would show no change"
    )
    reason: str


class TaskDecisionSummary(Frozen):
    """One task's own call, within the Holm family of all tasks and the overall mean."""

    kind: VerdictKind
    p_regressed: float = Field(description="Holm-adjusted sequential mid-p of head worse than base")
    p_improved: float
    rounds: int = Field(description="repeats per arm this task ran (adaptive designs stop tasks early)")
    treatment_runs: int
    control_runs: int = Field(description="including pooled runs of earlier batches")
    ci_low: float | None = None
    ci_high: float | None = None


class PowerSummary(Frozen):
    """What the design can see, from the power simulation the run cached (`power.json`)."""

    tasks: int
    design: str
    drop: float | None = Field(
        description="smallest drop of one task's success rate (from `rate`) caught in `target` of "
        "simulated PRs; None when even the largest simulated drop is missed more often"
    )
    rate: float
    target: float
    largest: float = Field(description="the largest drop simulated (what `drop` None was missed at)")
    text: str = Field(description="the same, in words, as printed before the first run")


class ShiftSummary(Frozen):
    """A usage metric compared with a rank test; shift = Hodges-Lehmann, treatment - control."""

    metric: str
    treatment: str
    control: str
    shift: float
    p_value: float
    n_treatment: int
    n_control: int


# ------------------------------------------------------------------ grading
class TestCounts(Frozen):
    """Tests counted from parsed output (JUnit XML or pytest's summary line)."""

    __test__ = False  # not a pytest test class, despite the name

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped


class DroppedEdit(Frozen):
    """An agent edit left out of the grading checkout, and why."""

    path: str
    reason: str


TAIL_NOTE = "last lines of output:"
"""Starts the grading note that quotes the command's output (`HiddenTestResult.notes`' last)."""


class HiddenTestResult(Frozen):
    """The hidden tests' verdict on one run's edits.

    `status` is `pass` only when the exit code is the expected one AND parsed test
    output shows tests ran and passed; `infra_error` means the grader itself failed
    (never the agent's fault: the run is retried, not scored).
    """

    status: Literal["pass", "fail", "infra_error"]
    exit_code: int | None = None
    expected_exit_code: int = 0
    timed_out: bool = False
    counts: TestCounts | None = Field(default=None, description="from the JUnit report, if one was read")
    summary: TestCounts | None = Field(default=None, description="from pytest's summary line, if printed")
    applied: list[str] = Field(default=[], description="paths of agent edits applied")
    dropped: list[DroppedEdit] = []
    notes: list[str] = Field(default=[], description="why the status is what it is, for a maintainer")
    isolation: str = ""
    duration_s: float = 0.0
    output_tail: str = ""
    runner: RunnerKind | None = Field(default=None, description="the test runner the command started")
    guarded: bool = Field(
        default=False,
        description="docdelta's pytest guard checked the runner (pytest without a declared report); "
        "otherwise the runner's own report is all the evidence",
    )

    @property
    def no_test_ran(self) -> bool:
        """A failure with no evidence that any test ran (a command not found, a missing
        runner, no JUnit report): it says the environment could not run the tests, not how
        good the edits were, so it is a fault of the evaluation, never the agent's grade."""
        return self.status == "fail" and (self.counts is None or self.counts.total == 0)

    def reason_and_output(self) -> tuple[str, str]:
        """(the notes saying why, the command's quoted last lines): the grader ends a failure's
        notes with the output, which a scorecard folds away and a one-line message keeps."""
        reasons = [n for n in self.notes if not n.startswith(TAIL_NOTE)]
        quoted = next((n for n in self.notes if n.startswith(TAIL_NOTE)), "")
        return "; ".join(reasons), quoted.removeprefix(TAIL_NOTE).removeprefix("\n").strip()


class GradingFailure(Frozen):
    """Hidden-test gradings in which no test ran, grouped by what they printed: the scorecard
    shows each in a folded section with the command's last lines, where the real cause
    (`No module named pytest`, `uv: No such file or directory`) is."""

    task: str
    where: list[str] = Field(description="`selftest: <leg>` or `<condition> r<repeat>`, per grading")
    reason: str = Field(description="the grader's notes, without the quoted output")
    output: str = Field(default="", description="the command's last lines of output")


class CheckResult(Frozen):
    name: str
    passed: bool
    note: str = ""


class MistakeHit(Frozen):
    """One mistake rule's hits in one run (count 0 rules are listed too, so absence is visible)."""

    rule: str
    count: int
    examples: list[str] = Field(default=[], description="first few offending lines or commands")


class ChecksResult(Frozen):
    checks: list[CheckResult]
    mistakes: list[MistakeHit]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def mistake_count(self) -> int:
        return sum(m.count for m in self.mistakes)


class SelftestLeg(Frozen):
    name: str
    passed: bool
    note: str = ""
    result: HiddenTestResult | None = None


class SelftestReport(Frozen):
    task: str
    legs: list[SelftestLeg]

    @property
    def passed(self) -> bool:
        return all(leg.passed for leg in self.legs)


class SelftestRecord(Frozen):
    """A change task's selftest, kept in the workdir; `key` hashes the task file, its hidden
    tests, its reference and the source tree, so any change makes it stale."""

    schema_version: int = SCHEMA_VERSION
    key: str
    report: SelftestReport


# -------------------------------------------------------------------- judge
JudgeProvider = Literal["openai", "anthropic"]


class JudgeInfo(Frozen):
    """Which judge ruled: the API family it speaks and its model id."""

    provider: JudgeProvider
    model: str = Field(min_length=1)

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


class JudgeRuling(Frozen):
    """The judge's ruling on one criterion of one answer, after the quote was checked.

    A point is credited only when the judge says it is made AND its quote stands
    verbatim (whitespace-normalized) in the answer; a rule is broken only on the
    judge's word, but that word must also come with a quote. A ruling whose quote is
    missing or not in the answer is `supported=False` and never earns credit.
    """

    kind: Literal["point", "rule"]
    expected: str = Field(description="the key point or rule, as the task states it")
    met: bool = Field(description="the judge's claim: the point is made / the rule is respected")
    quote: str = ""
    supported: bool = Field(description="False: the quote the claim needs is not in the answer")
    hit: bool = Field(description="the scored outcome")
    reason: str = ""


class JudgedResult(Frozen):
    """judged.json, beside result.json: the judge's rulings on one run's answer.

    Reused while the rubric, the judge and the answer are the same; rewritten (the
    run itself never is) when any of them changed.
    """

    schema_version: int = SCHEMA_VERSION
    cell: Cell
    judge: JudgeInfo
    rubric_sha256: str
    answer_sha256: str = Field(description="of the text the judge read and the quotes were checked against")
    rulings: list[JudgeRuling]
    tokens_in: int | None = None
    tokens_out: int | None = None
    judged_at: datetime


class CalibrationRecord(Frozen):
    """How one judge did on one rubric's labeled fixtures, per class.

    `pass_accuracy`: share of pass-labeled (fixture, criterion) pairs the judge credited;
    `fail_accuracy`: share of fail-labeled pairs it did not. Both are needed: a judge
    that credits everything is perfect on the first and useless.
    """

    task: str
    judge: JudgeInfo
    rubric_sha256: str
    fixtures_sha256: str
    pass_accuracy: float = Field(ge=0.0, le=1.0)
    fail_accuracy: float = Field(ge=0.0, le=1.0)
    pass_labels: int = Field(ge=1)
    fail_labels: int = Field(ge=1)
    errors: list[str] = Field(default=[], description="fixture #, criterion and what the judge got wrong")
    calibrated_at: datetime


class CalibrationFile(Frozen):
    """`<calibration dir>/<task id>.json`: one record per judge that was calibrated on the task."""

    schema_version: int = SCHEMA_VERSION
    task: str
    records: list[CalibrationRecord] = []
