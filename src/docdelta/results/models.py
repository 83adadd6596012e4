"""The workdir record: cells, run results, arms and the manifest that identifies the experiment."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from docdelta.agents.models import AgentOutcome, RunStatus
from docdelta.gateway.models import ModelCall
from docdelta.instructions.models import InstructionAudit
from docdelta.results.grades import (
    ChecksResult,
    CommandsExecuted,
    HiddenTestResult,
    JudgeInfo,
    JudgeRuling,
    Score,
)
from docdelta.tasks.models import PassThreshold
from docdelta.vocabulary import DEFAULT_NOISE_BAND, SCHEMA_VERSION, ConditionSpec, Frozen, sha256_hex


class Cell(Frozen):
    """One (task, condition, repeat); repeats count from 1."""

    task: str
    condition: str
    repeat: int = Field(ge=1)

    @property
    def key(self) -> str:
        return f"{self.task}/{self.condition}/r{self.repeat}"


class EvidenceSource(StrEnum):
    """Where a trigger task's "loaded" comes from; never the agent's answer."""

    gateway = "gateway"
    """The file's body reached the model in a request the gateway forwarded."""
    tool_stream = "tool stream"
    """The agent's own tool calls read the file (`Agent.reads_from_tool_stream`)."""


class TriggerEvidence(Frozen):
    """Whether a trigger task's on-demand file was loaded in one run, and from what evidence."""

    file: str
    should_load: bool
    loaded: bool | None = Field(description="None: no evidence (no gateway and no tool stream saw the run)")
    sources: list[EvidenceSource] = Field(
        default=[], description="what was consulted; `loaded` is true when any of them saw the file"
    )


class PhaseTimings(Frozen):
    """Wall seconds of one run's phases (its last attempt), as the runner and its sandbox
    measured them: where a cell's time goes (bench/bench_docker.py prints the split). None: the
    phase was not measured (a provider that does not split it, an attempt that ended before).
    Never part of a result's identity, and absent from results written before it existed."""

    sandbox_s: float | None = Field(default=None, description="making the run's sandbox (all of it)")
    create_s: float | None = Field(
        default=None, description="of sandbox_s: its objects (Docker: volume, container, network, gateway)"
    )
    copy_s: float | None = Field(
        default=None, description="of sandbox_s: the checkout put into it (Docker: one archive)"
    )
    start_s: float | None = Field(default=None, description="of sandbox_s: its container started")
    agent_s: float | None = Field(
        default=None, description="the agent: its files written, its exec, its output read back"
    )
    teardown_s: float | None = Field(
        default=None,
        description="closing the sandbox on the run's path (removal a provider defers is not in it)",
    )
    grading_s: float | None = Field(
        default=None,
        description="the diff, hidden tests, proposed commands, scoring and the artifacts saved",
    )


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
    trigger: TriggerEvidence | None = Field(
        default=None, description="trigger tasks: whether the on-demand file was loaded, and the evidence"
    )
    timings: PhaseTimings | None = Field(
        default=None, description="wall seconds per phase of the run, for speed work; None before it was kept"
    )


ARM_FACTORS = ("agent", "model", "condition", "overlay")
"""What an arm may vary: the agent, its model, the condition's instruction files, and extra
files laid over the checkout. Two compared arms should differ in one of them."""


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
    agent_command: str | None = Field(
        default=None,
        description="the command agent's command line as given: its hash is the agent's version, "
        "so this only names it in messages (never part of the identity)",
    )
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

    def _not_compared(self) -> set[str]:
        """The fields that do not make two runs incomparable: the time it was made, and
        `thresholds` and `noise_band` (they judge runs, they do not change them; a task's own
        threshold is in its file's hash anyway), and `agent_command` (its hash is the agent's
        version already). `arms`, `pooled_only`, `unreviewed` and `skipped` count only when
        set, so a plan without them keeps its identity."""
        unset = {"created_at", "thresholds", "noise_band", "agent_command"} | (
            {"arms"} if not self.arms else set()
        )
        unset |= {"pooled_only"} if not self.pooled_only else set()
        unset |= {"unreviewed"} if not self.unreviewed else set()
        unset |= {"skipped"} if not self.skipped else set()
        return unset

    def identity(self) -> str:
        """sha256 of everything that makes two runs comparable (`comparable`)."""
        return sha256_hex(self.model_dump_json(exclude=self._not_compared()).encode())

    def comparable(self) -> dict[str, Any]:
        """The fields `identity` hashes, for naming what a refused resume or merge changed:
        a field that may change (`noise_band`) is never listed as the reason."""
        return self.model_dump(exclude=self._not_compared())

    @property
    def band(self) -> float:
        """The noise band every report of this run uses: the one it was planned with."""
        return DEFAULT_NOISE_BAND if self.noise_band is None else self.noise_band

    def agent_of(self, column: str) -> AgentInfo:
        """The agent that runs a column: its arm's, else the experiment's."""
        arm = self.arms.get(column)
        return self.agent if arm is None else arm.agent


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
