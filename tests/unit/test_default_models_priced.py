"""An agent run without `--model` (every example workflow) asks for the adapter's default
model, and the gateway refuses a model it has no price for: each adapter's default must be
one the built-in price table holds, or a workflow copied as shipped fails every call."""

from __future__ import annotations

import pytest

from docdelta.agents import agent_names, get_agent
from docdelta.agents.base import GatewayAgent
from docdelta.gateway.config import DEFAULT_PRICES
from docdelta.gateway.usage import price_for

PRICES = {name: price.model_dump() for name, price in DEFAULT_PRICES.items()}
NEEDS_OPTIONS = {"command", "openai"}
"""Agents made only with what the user names (a command, a model): no default to check."""
DEFAULTS = {
    name: agent.default_model
    for name in agent_names()
    if name not in NEEDS_OPTIONS
    and isinstance(agent := get_agent(name), GatewayAgent)
    and agent.default_model is not None
}


def test_the_example_workflows_agent_has_a_default_model() -> None:
    assert "claude_code" in DEFAULTS, "the examples run claude_code without a model input"


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_an_adapters_default_model_has_a_built_in_price(name: str) -> None:
    assert price_for(PRICES, DEFAULTS[name]) is not None, f"{name}'s default {DEFAULTS[name]} has no price"
