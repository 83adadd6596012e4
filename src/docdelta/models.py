"""The shared vocabulary: every serialized thing that crosses a module boundary.

Each arrow of the data flow (detect -> plan -> workspace -> sandbox + agent ->
grading -> store -> stats -> report) passes these pydantic models, so a result
written by one version of docdelta can be read, validated and compared by the
next. `SCHEMA_VERSION` is stored in every file we write.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

SCHEMA_VERSION = 1


class Frozen(BaseModel):
    """Strict, immutable base: unknown fields are errors, so typos in files surface."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def sha256_hex(data: bytes) -> str:
    """The one content hash used for every identifying hash we record."""
    return hashlib.sha256(data).hexdigest()


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


# ----------------------------------------------------------------- detection
class FileStatus(StrEnum):
    added = "added"
    modified = "modified"
    deleted = "deleted"
    renamed = "renamed"


class ChangedFile(Frozen):
    """One instruction file that differs between base and head."""

    path: str
    status: FileStatus
    old_path: str | None = None
    families: list[str] = Field(description="agent families that read this file, e.g. ['codex', 'opencode']")
    symlink: bool = False


class NearMiss(Frozen):
    """A file that is not an instruction file by our table but may be loaded anyway
    (e.g. `agents.md` via a case-insensitive lookup) — a confound, reported, not evaluated."""

    path: str
    reason: str


class Detection(Frozen):
    schema_version: int = SCHEMA_VERSION
    base: str
    head: str
    changed: list[ChangedFile]
    near_misses: list[NearMiss] = []

    @property
    def empty(self) -> bool:
        return not self.changed


# --------------------------------------------------------------------- tasks
class GoldCitation(Frozen):
    """Where the gold answer stands in the source commit; checked when the task loads."""

    path: str
    lines: Lines
    quote: str


class Gold(Frozen):
    docs: list[str] = Field(default=[], description="instruction files the answer depends on")
    files: list[str] = Field(default=[], description="repository paths a correct answer names")
    commands: list[str] = Field(default=[], description="commands a correct answer gives")
    guardrails: list[str] = Field(
        default=[], description="commands or snippets a correct answer must NOT recommend"
    )
    points: list[str] = Field(default=[], description="key points; scored only by the judge")
    verdict: str | None = Field(default=None, description="expected short verdict, e.g. 'yes' or 'no'")


class Task(Frozen):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    prompt: str = Field(min_length=1)
    kind: Literal["answer", "change"] = "answer"
    gold: Gold = Gold()
    gold_citations: list[GoldCitation] = []
    reviewed: bool = False


# -------------------------------------------------------------- agent output
class AnswerCitation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str
    lines: Lines | None = None


class AgentAnswer(BaseModel):
    """The JSON object every agent is asked to end with (see agents/prompt.py).

    Parsed leniently (unknown keys ignored): agents are not schema validators.
    """

    model_config = ConfigDict(extra="ignore")

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
    metrics: AgentMetrics = AgentMetrics()
    exit_code: int | None = None
    error: str | None = None


# ------------------------------------------------------------------ grading
class ScoreItem(Frozen):
    kind: Literal["command", "file", "citation", "verdict", "guardrail", "point"]
    expected: str
    hit: bool | None = Field(description="None: not scored (e.g. key points before a judge exists)")
    note: str = ""


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
    isolation: str = Field(description="how the run was isolated, e.g. 'netns', 'docker-internal', 'none'")
    seed: int
    attempt: int = 1
    started_at: datetime
    finished_at: datetime
    task_sha256: str
    overlay_sha256: str
    tree_sha256: str


class ConditionSpec(Frozen):
    """A condition is an overlay of instruction files on the source commit."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    files: dict[str, str] = Field(description="path -> sha256 of the file's bytes")
    overlay_sha256: str


class AgentInfo(Frozen):
    name: str
    version: str
    model: str | None = None


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
    agent: AgentInfo
    sandbox: str
    image_digest: str | None = None
    seed: int
    repeats: int
    order: list[Cell]
    created_at: datetime

    def identity(self) -> str:
        """sha256 of everything that makes two runs comparable (not the time it was made)."""
        return sha256_hex(self.model_dump_json(exclude={"created_at"}).encode())


# -------------------------------------------------------------------- report
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


class Delta(Frozen):
    """treatment - control of mean scores; None when either arm has no graded run."""

    treatment: str
    control: str
    value: float | None = None
    noise: bool | None = Field(default=None, description="True when |value| <= the noise band")


class TaskSummary(Frozen):
    task: str
    conditions: dict[str, ConditionStats]
    head_vs_base: Delta
    head_vs_none: Delta


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
    tasks: list[TaskSummary]
    overall: dict[str, ConditionStats]
    head_vs_base: Delta
    head_vs_none: Delta
    missed: dict[str, list[MissedItem]] = Field(description="condition -> most-missed items, most first")
    confounds: Confounds
