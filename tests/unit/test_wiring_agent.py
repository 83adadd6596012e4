"""The agent the CLI and the Action build: `--max-output-tokens` reaches the built-in agent
and its recorded settings, and is refused with a clear error for agents that have no such cap."""

from __future__ import annotations

import pytest

from docdelta.agents.openai_loop import OpenAIAgent
from docdelta.errors import AgentError, ConfigError
from docdelta.wiring import AgentChoice, build_agent


def test_the_output_cap_reaches_the_openai_agent() -> None:
    agent = build_agent(AgentChoice("openai", model="m", max_output_tokens=300))
    assert isinstance(agent, OpenAIAgent)
    assert agent.recorded_settings["max_output_tokens"] == 300


def test_the_output_cap_is_refused_for_other_agents() -> None:
    with pytest.raises(ConfigError, match="--max-output-tokens is for the built-in openai agent") as err:
        build_agent(AgentChoice("fake", max_output_tokens=300))
    assert err.value.exit_code == 2 and "drop --max-output-tokens" in err.value.hint


def test_a_misspelt_agent_is_unknown_whatever_else_is_passed() -> None:
    """`--agent commandz --agent-cmd X` is a typo of the agent's name, not a misplaced --agent-cmd."""
    with pytest.raises(AgentError, match="unknown agent 'commandz'") as err:
        build_agent(AgentChoice("commandz", cmd="python3 agent.py"))
    assert err.value.exit_code == 2 and "did you mean 'command'?" in err.value.hint
