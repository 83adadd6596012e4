"""Agent adapters, chosen by name.

Adapters are imported only when asked for; registering one is a line in `_AGENTS`.
"""

from __future__ import annotations

from typing import Any

from docdelta.agents.base import Agent, AgentContext, Invocation, classify, extract_last_json, parse_answer
from docdelta.errors import AgentError
from docdelta.registry import build, lookup

__all__ = [
    "Agent",
    "AgentContext",
    "Invocation",
    "agent_class",
    "agent_names",
    "agent_upstream",
    "classify",
    "extract_last_json",
    "get_agent",
    "parse_answer",
]

_AGENTS: dict[str, str] = {
    "fake": "docdelta.agents.fake:FakeAgent",
    "command": "docdelta.agents.command:CommandAgent",
    "openai": "docdelta.agents.openai_loop:OpenAIAgent",
    "claude_code": "docdelta.agents.claude_code:ClaudeCodeAgent",
    "codex": "docdelta.agents.codex:CodexAgent",
    "opencode": "docdelta.agents.opencode:OpenCodeAgent",
    "gemini": "docdelta.agents.gemini:GeminiAgent",
    "copilot": "docdelta.agents.copilot:CopilotAgent",
}


def agent_names() -> list[str]:
    return sorted(_AGENTS)


def get_agent(name: str, **options: Any) -> Agent:
    """Build the agent registered as `name` (e.g. `get_agent("command", cmd="./my-agent")`)."""
    # mypy refuses an abstract class for type[T] (python/mypy#4717); it is only an isinstance check.
    return build(_AGENTS, name, options, base=Agent, kind="agent", error=AgentError)  # type: ignore[type-abstract]


def agent_class(name: str) -> type[Agent]:
    """The adapter registered as `name`, without building it: `docdelta selftest --agent`
    grades in the image a run of it uses (its `npm` layer, published at its `pinned`)."""
    return lookup(_AGENTS, name, base=Agent, kind="agent", error=AgentError)  # type: ignore[type-abstract]


def agent_upstream(name: str) -> str | None:
    """The gateway upstream the agent registered as `name` speaks to (`Agent.upstream`), without
    building it: the Action's one api-key is for that API unless `provider` names another."""
    return lookup(_AGENTS, name, base=Agent, kind="agent", error=AgentError).upstream  # type: ignore[type-abstract]
