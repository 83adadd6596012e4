"""The built-in `openai` agent as it runs for real: its loop in the agent container, the
model API reached only through the run's gateway, the scripted model server in a container
of its own. The adapter's outcome must match the script, and the gateway's usage log must
match what the server reported to the agent."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import pytest
from docker_helpers import SCRIPTED_CHAT, modelserver_image, own_network, run_scripted_agent
from modelserver.script import Script, TextTurn, ToolTurn, TurnUsage
from toolchain import CheckoutFactory

from docdelta.agents import AgentContext
from docdelta.agents.models import CommandRun, RunStatus
from docdelta.agents.openai_loop import OpenAIAgent
from docdelta.experiment.runner import with_gateway_telemetry

pytestmark = pytest.mark.docker

AGENTS_MD = "# Notes\n\n- Run the full test suite with `make check`.\n"
ANSWER = {"answer": "Run `make check`.", "commands": ["make check"], "files": ["AGENTS.md"], "verdict": None}
SCRIPT = Script(
    name="docker-openai",
    turns=[
        ToolTurn.shell("cat AGENTS.md", usage=TurnUsage(input_tokens=1000, output_tokens=20)),
        TextTurn(
            text=f"```json\n{json.dumps(ANSWER)}\n```",
            usage=TurnUsage(input_tokens=200, output_tokens=40, cache_read_tokens=1000),
        ),
    ],
)
KEY = f"sk-test-{uuid.uuid4().hex}"


def test_the_agent_runs_through_the_gateway_and_the_usage_log_matches_the_server(
    client: Any, base_image: str, gateway_image: str, tmp_checkout: CheckoutFactory
) -> None:
    agent = OpenAIAgent(model="gpt-4o-mini")
    with own_network(client) as name:
        run = run_scripted_agent(
            client,
            agent=agent,
            image=base_image,
            server_image=modelserver_image(client, base_image),
            gateway_image=gateway_image,
            network=name,
            upstream=SCRIPTED_CHAT,
            script=SCRIPT,
            checkout=tmp_checkout({"AGENTS.md": AGENTS_MD}),
            prompt="Which command runs the tests?",
            key=KEY,
            ctx=AgentContext(seed=5, timeout_s=120),
        )
    outcome, calls = run.outcome, run.calls

    assert agent.network == "gateway"
    assert outcome.status is RunStatus.ok, outcome.error
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    assert (outcome.metrics.turns, outcome.metrics.tool_calls) == (2, 1)
    assert outcome.metrics.commands == [CommandRun(command="cat AGENTS.md", exit_code=0)]

    # The shell ran in the agent's checkout and its output went back to the model; the
    # model is exactly the one asked for, and the real key (not the placeholder) arrived.
    posts = [r for r in run.requests if r["method"] == "POST"]
    assert len(posts) == 2
    assert posts[1]["body"]["messages"][-1]["content"] == f"exit code: 0\n{AGENTS_MD}"
    assert {r["body"]["model"] for r in posts} == {"gpt-4o-mini"}
    real = hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()
    assert all(r["auth"] == [["authorization", real]] for r in posts)

    # The gateway saw each call's usage exactly as the server reported it to the agent
    # (Chat Completions counts cached tokens inside prompt tokens), and priced it.
    assert [(c.status, c.error, c.tokens_in, c.tokens_out, c.cache_read_tokens) for c in calls] == [
        (200, None, 1000, 20, 0),
        (200, None, 1200, 40, 1000),
    ]
    measured = with_gateway_telemetry(outcome, calls, over_budget=False).metrics
    own = outcome.metrics
    assert (measured.tokens_in, measured.tokens_out, measured.cache_read_tokens) == (
        own.tokens_in,
        own.tokens_out,
        own.cache_read_tokens,
    )
    # gpt-4o-mini: $0.15 / M fresh input, $0.075 / M cached input, $0.60 / M output.
    assert measured.cost_usd == pytest.approx((1200 * 0.15 + 1000 * 0.075 + 60 * 0.60) / 1e6)
