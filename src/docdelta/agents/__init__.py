"""Agent adapters, chosen by name.

Adapters are imported only when asked for; registering one is a line in `_AGENTS`.
"""

from __future__ import annotations

import importlib
from typing import Any

from docdelta.agents.base import Agent, AgentContext, Invocation, classify, extract_last_json, parse_answer
from docdelta.errors import AgentError

__all__ = [
    "Agent",
    "AgentContext",
    "Invocation",
    "agent_names",
    "classify",
    "extract_last_json",
    "get_agent",
    "parse_answer",
]

_AGENTS: dict[str, str] = {
    "fake": "docdelta.agents.fake:FakeAgent",
    "command": "docdelta.agents.command:CommandAgent",
}


def agent_names() -> list[str]:
    return sorted(_AGENTS)


def get_agent(name: str, **options: Any) -> Agent:
    """Build the agent registered as `name` (e.g. `get_agent("command", cmd="./my-agent")`)."""
    target = _AGENTS.get(name)
    if target is None:
        raise AgentError(f"unknown agent {name!r}", hint=f"choose one of: {', '.join(agent_names())}")
    module, _, attr = target.partition(":")
    cls: type[Agent] = getattr(importlib.import_module(module), attr)
    try:
        return cls(**options)
    except TypeError as exc:
        raise AgentError(f"bad options for agent {name!r}: {exc}", hint="check the agent settings") from exc
