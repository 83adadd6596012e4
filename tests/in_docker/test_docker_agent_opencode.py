"""OpenCode as it runs for real: the pinned CLI in the agent image, its model calls only
through the run's gateway to the scripted model server. The parsed outcome must match the
script, files planted in the home directory must never reach the model, the checkout's
AGENTS.md must (and, being found first, shadow its CLAUDE.md), and the real key must not
appear in anything the agent printed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import SCRIPTED_CHAT, modelserver_image, own_network, run_scripted_agent
from modelserver.script import Script, TextTurn, ToolTurn, TurnUsage
from toolchain import CheckoutFactory

from docdelta.agents import AgentContext
from docdelta.agents.images import agent_image
from docdelta.agents.models import CommandRun, RunStatus
from docdelta.agents.opencode import OpenCodeAgent

pytestmark = pytest.mark.docker

AGENTS_MD = "# Notes\n\n- Run the full test suite with `make check`. agents-md-marker\n"
CLAUDE_MD = "# Claude\n\n- project-claude-md-marker\n"
HOME_MARKER = "home-leak-marker"
ANSWER = {"answer": "Run `make check`.", "commands": ["make check"], "files": ["AGENTS.md"], "verdict": None}
SCRIPT = Script(
    name="docker-opencode",
    turns=[
        ToolTurn.shell(
            "cat AGENTS.md", text="Reading.", usage=TurnUsage(input_tokens=1000, output_tokens=20)
        ),
        TextTurn(
            text=f"```json\n{json.dumps(ANSWER)}\n```",
            usage=TurnUsage(input_tokens=300, output_tokens=40, cache_read_tokens=1000),
        ),
    ],
)
# Where an unisolated OpenCode would find global instructions: the sandbox's HOME (/tmp).
PLANT = [
    f"mkdir -p $HOME/.config/opencode $HOME/.claude && echo {HOME_MARKER} > $HOME/.config/opencode/AGENTS.md"
    f" && echo {HOME_MARKER} > $HOME/.claude/CLAUDE.md"
]
KEY = f"sk-test-{uuid.uuid4().hex}"


def test_opencode_runs_through_the_gateway_isolated_and_parsed_as_scripted(
    client: Any, base_image: str, gateway_image: str, tmp_checkout: CheckoutFactory
) -> None:
    agent = OpenCodeAgent(model="gpt-4o-mini")
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    image = agent_image(client, base=base_image, npm=agent.npm, extra_ca=bundle if bundle.exists() else None)
    with own_network(client) as name:
        run = run_scripted_agent(
            client,
            agent=agent,
            image=image.tag,
            server_image=modelserver_image(client, base_image),
            gateway_image=gateway_image,
            network=name,
            upstream=SCRIPTED_CHAT,
            script=SCRIPT,
            checkout=tmp_checkout({"AGENTS.md": AGENTS_MD, "CLAUDE.md": CLAUDE_MD}),
            prompt="Which command runs the full test suite?",
            key=KEY,
            prepare=PLANT,
            ctx=AgentContext(seed=3, timeout_s=240),
        )
    outcome = run.outcome

    assert outcome.status is RunStatus.ok, (outcome.error, run.result.stderr[-2000:])
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    m = outcome.metrics
    assert (m.turns, m.tool_calls) == (2, 1)
    assert m.commands == [CommandRun(command="cat AGENTS.md", exit_code=0)]
    assert (m.tokens_in, m.tokens_out, m.cache_read_tokens) == (1300, 60, 1000)

    # Exactly the script's two calls (no title call), each through the gateway with usage.
    posts = [r for r in run.requests if r["method"] == "POST"]
    assert len(posts) == 2 and [c.status for c in run.calls] == [200, 200]
    assert [(c.tokens_in, c.tokens_out) for c in run.calls] == [(1000, 20), (1300, 40)]
    bodies = [json.dumps(r["body"]) for r in posts]
    assert all("agents-md-marker" in b for b in bodies)  # in the system prompt from the first call
    assert all(HOME_MARKER not in b for b in bodies)
    assert all("project-claude-md-marker" not in b for b in bodies)  # AGENTS.md is found first
    # The command's output went back to the model.
    assert "Run the full test suite with `make check`" in json.dumps(posts[1]["body"]["messages"][-1])

    captured = run.result.stdout + run.result.stderr
    assert KEY.encode() not in captured and KEY not in outcome.model_dump_json()
