"""Codex for real: the pinned CLI in its agent image, against the scripted model server's
Responses API through the real gateway, parsed by the adapter. One run proves the plumbing
(turns, commands with exit codes, tokens, answer) and the isolation (no home-directory
AGENTS.md reaches the model, the key never reaches the agent)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import ScriptedRun, modelserver_image, run_scripted_agent, with_home_files
from modelserver.script import Script, TextTurn, ToolTurn

from docdelta.agents.codex import CodexAgent
from docdelta.agents.images import agent_image
from docdelta.agents.models import CommandRun, RunStatus
from docdelta.gateway.config import OPENAI

pytestmark = pytest.mark.docker

CA = Path("/etc/ssl/certs/ca-certificates.crt")
MARKER = f"HOME-MARKER-{uuid.uuid4().hex}"
KEY = f"sk-docdelta-test-{uuid.uuid4().hex}"
PROJECT = "# Notes\n\nRun the full test suite with `make check`.\n"
ANSWER = {"answer": "Run make check.", "commands": ["make check"], "files": ["AGENTS.md"]}
MODEL = "gpt-4.1-mini"


@pytest.fixture(scope="module")
def run(
    client: Any, base_image: str, gateway_image: str, egress: str, tmp_path_factory: pytest.TempPathFactory
) -> ScriptedRun:
    image = agent_image(client, base=base_image, npm=CodexAgent.npm, extra_ca=CA).tag
    planted = with_home_files(client, image, {".codex/AGENTS.md": MARKER, "AGENTS.md": MARKER})
    checkout = tmp_path_factory.mktemp("codex") / "repo"
    checkout.mkdir()
    (checkout / "AGENTS.md").write_text(PROJECT)
    (checkout / "README.md").write_text("# demo\n")
    script = Script(
        name="codex-e2e",
        model=MODEL,
        turns=[
            ToolTurn.shell("cat AGENTS.md"),
            ToolTurn.shell("ls missing-dir"),
            TextTurn(text="Found it.\n" + json.dumps(ANSWER)),
        ],
    )
    return run_scripted_agent(
        client,
        agent=CodexAgent(model=MODEL),
        image=planted,
        server_image=modelserver_image(client, base_image),
        gateway_image=gateway_image,
        network=egress,
        upstream=OPENAI.model_copy(update={"base_url": "{server}/v1"}),
        script=script,
        checkout=checkout,
        prompt="Which command runs the full test suite? End with the JSON answer.",
        key=KEY,
        # The sandbox's default HOME is /tmp: plant there too, where a careless adapter looks.
        prepare=[f"mkdir -p /tmp/.codex && echo {MARKER} > /tmp/.codex/AGENTS.md"],
    )


def test_the_parsed_run_matches_the_script(run: ScriptedRun) -> None:
    outcome = run.outcome
    assert outcome.status is RunStatus.ok, (outcome.error, run.result.stderr[-2000:])
    assert outcome.answer is not None and outcome.answer.files == ["AGENTS.md"]
    m = outcome.metrics
    assert m.commands == [
        CommandRun(command="cat AGENTS.md", exit_code=0),
        CommandRun(command="ls missing-dir", exit_code=2),
    ]
    # Turns computed from the events match the model calls the server and gateway saw.
    assert [r["path"] for r in run.requests] == ["/v1/responses"] * 3
    forwarded = [c for c in run.calls if c.error is None and c.status == 200]
    assert (m.tool_calls, m.turns, len(forwarded)) == (2, 3, 3)
    assert m.tokens_in == sum(c.tokens_in or 0 for c in forwarded)
    assert m.tokens_out == sum(c.tokens_out or 0 for c in forwarded)
    # Codex reports no cost; the gateway prices its calls from the price table.
    assert m.cost_usd is None and all(c.cost_usd for c in forwarded)


def test_the_project_agents_md_reaches_the_model_and_home_files_do_not(run: ScriptedRun) -> None:
    first = json.dumps(run.requests[0]["body"])
    assert "Run the full test suite with `make check`." in first
    assert all(MARKER not in json.dumps(r["body"]) for r in run.requests)


def test_the_key_never_reaches_the_agent(run: ScriptedRun) -> None:
    assert KEY.encode() not in run.result.stdout + run.result.stderr
    assert all(KEY not in json.dumps(r) for r in run.requests)
