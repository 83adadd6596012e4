"""The adapter contract every agent implements (fake, command, openai, claude_code, codex, ...).

An adapter only knows how to *invoke* its agent and how to *parse* what it printed;
running it inside a sandbox, enforcing the timeout and classifying kills is shared
(`Agent.run`), so every agent is measured the same way.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import ValidationError

from docdelta.models import AgentAnswer, AgentOutcome, RunStatus
from docdelta.sandbox.base import ExecResult, NetworkMode, Sandbox

_DECODER = json.JSONDecoder()
_SCAN_LIMIT = 1024 * 1024
"""Only the tail of a transcript is scanned: the answer is asked for at the end."""


def extract_last_json(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object in `text`, or None.

    Agents wrap their answer in prose and ```json fences; scanning forward and
    skipping over each object that decodes means a nested object is never mistaken
    for the answer, and whatever surrounds the objects is ignored.
    """
    text = text[-_SCAN_LIMIT:]
    found: dict[str, Any] | None = None
    pos = text.find("{")
    while pos != -1:
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            found = value
        pos = text.find("{", end)
    return found


def parse_answer(text: str) -> tuple[AgentAnswer | None, str | None]:
    """The agent's answer from its final text, or None and why not."""
    data = extract_last_json(text)
    if data is None:
        return None, "no JSON object in the agent's output"
    try:
        return AgentAnswer.model_validate(data), None
    except ValidationError as exc:
        return None, f"the final JSON object does not have the answer shape: {exc.errors()[0]['msg']}"


def classify(result: ExecResult, answer: AgentAnswer | None) -> RunStatus:
    """How a run ended, the same way for every agent."""
    if result.timed_out:
        return RunStatus.timeout
    if result.oom:
        return RunStatus.oom
    if answer is None:
        return RunStatus.no_answer if result.exit_code == 0 else RunStatus.agent_error
    return RunStatus.ok


@dataclass(frozen=True)
class AgentContext:
    """Per-run knobs, identical across conditions except for the seed's repeat part."""

    seed: int
    timeout_s: float = 600.0
    max_turns: int | None = None


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    """Files to write (in-sandbox path -> bytes) before the agent starts, e.g. config."""


class Agent(ABC):
    name: ClassVar[str]

    @property
    @abstractmethod
    def version(self) -> str:
        """Pinned version string, recorded in the manifest and every result."""

    @property
    def model(self) -> str | None:
        return None

    @property
    def network(self) -> NetworkMode:
        """What the agent needs to reach: "none" for self-contained agents (fake, command),
        "gateway" for agents that call a model API (only ever through the gateway)."""
        return "none"

    @abstractmethod
    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        """Build the command line, environment and files for one run."""

    @abstractmethod
    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        """Turn what the agent printed (and any metrics file) into a normalized outcome.

        Adapters set `status` with `classify` (or a sharper status they can see, such
        as `max_turns`); `run` still overrides it when the sandbox killed the agent.
        """

    def run(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        """Invoke, wait, classify (timeout / oom / no_answer) and parse.

        Sandbox failures propagate (SandboxError / InfraError): they are our
        machinery's fault and the runner records them as `infra_error`, not as the
        agent's.
        """
        inv = self.invocation(prompt, sandbox, ctx)
        for path, data in inv.files.items():
            sandbox.write_file(path, data)
        result = sandbox.exec(inv.argv, stdin=inv.stdin, env=inv.env, timeout=ctx.timeout_s)
        outcome = self.parse(result, sandbox, ctx)
        update: dict[str, Any] = {}
        if result.timed_out or result.oom:
            update["status"] = classify(result, outcome.answer)
        if not outcome.metrics.duration_s:
            update["metrics"] = outcome.metrics.model_copy(update={"duration_s": result.duration_s})
        return outcome.model_copy(update=update) if update else outcome
