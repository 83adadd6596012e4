"""GitHub Copilot's CLI as it runs for real: the pinned CLI in the agent image, offline BYOK,
its model calls only through the run's gateway to the scripted model server (the sandbox's
internal network has no other peer). It must start with no GitHub sign-in, its parsed
outcome must match the script, a user-level instruction file planted in HOME must never
reach the model, the checkout's AGENTS.md must, and the real key must appear in nothing the
agent printed."""

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
from docdelta.agents.copilot import CopilotAgent
from docdelta.agents.images import agent_image
from docdelta.agents.models import CommandRun, RunStatus

pytestmark = pytest.mark.docker

AGENTS_MD = "# Notes\n\n- Run the full test suite with `make check`. agents-md-marker\n"
HOME_MARKER = "home-leak-marker"
ANSWER = {"answer": "Run `make check`.", "commands": ["make check"], "files": ["AGENTS.md"], "verdict": None}
SCRIPT = Script(
    name="docker-copilot",
    turns=[
        ToolTurn.shell(
            "cat AGENTS.md", text="Reading.", usage=TurnUsage(input_tokens=1000, output_tokens=20)
        ),
        TextTurn(
            text=f"```json\n{json.dumps(ANSWER)}\n```", usage=TurnUsage(input_tokens=1300, output_tokens=40)
        ),
    ],
)
# Where an unisolated Copilot would find user-level instructions: the sandbox's HOME.
PLANT = [f"mkdir -p $HOME/.copilot && echo {HOME_MARKER} > $HOME/.copilot/copilot-instructions.md"]
KEY = f"sk-test-{uuid.uuid4().hex}"


def test_copilot_runs_keyless_through_the_gateway_isolated_and_parsed_as_scripted(
    client: Any, base_image: str, gateway_image: str, tmp_checkout: CheckoutFactory
) -> None:
    agent = CopilotAgent(model="gpt-4o-mini")
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
            checkout=tmp_checkout({"AGENTS.md": AGENTS_MD}),
            prompt="Which command runs the full test suite?",
            key=KEY,
            prepare=PLANT,
            ctx=AgentContext(seed=3, timeout_s=300),
        )
    outcome = run.outcome

    assert outcome.status is RunStatus.ok, (outcome.error, run.result.stderr[-2000:])
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    m = outcome.metrics
    assert (m.turns, m.tool_calls) == (2, 1)
    assert m.commands == [CommandRun(command="cat AGENTS.md", exit_code=0)]

    # Exactly the script's two calls, each through the gateway (which counts their usage).
    posts = [r for r in run.requests if r["method"] == "POST"]
    assert len(posts) == 2 and [c.status for c in run.calls] == [200, 200]
    assert [(c.tokens_in, c.tokens_out) for c in run.calls] == [(1000, 20), (1300, 40)]
    bodies = [json.dumps(r["body"]) for r in posts]
    assert all("agents-md-marker" in b for b in bodies)  # the checkout's AGENTS.md, from the first call
    assert all(HOME_MARKER not in b for b in bodies)

    captured = run.result.stdout + run.result.stderr
    assert KEY.encode() not in captured and KEY not in outcome.model_dump_json()
    assert b"login" not in run.result.stderr.lower()  # no sign-in was asked for
