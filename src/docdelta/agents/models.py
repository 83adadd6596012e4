"""What an agent run produced: its answer, status, metrics and the model calls behind it."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from docdelta.tasks.models import Lines
from docdelta.vocabulary import Frozen


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
