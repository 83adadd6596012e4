"""The adapter contract every agent implements (fake, command, openai, claude_code, codex, ...).

An adapter only knows how to *invoke* its agent and how to *parse* what it printed;
running it inside a sandbox, enforcing the timeout and classifying kills is shared
(`Agent.run`), so every agent is measured the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from docdelta.models import AgentOutcome
from docdelta.sandbox.base import ExecResult, Sandbox


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

    @abstractmethod
    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        """Build the command line, environment and files for one run."""

    @abstractmethod
    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        """Turn what the agent printed (and any metrics file) into a normalized outcome."""

    @abstractmethod
    def run(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        """Invoke, wait, classify (timeout / oom / no_answer) and parse."""
