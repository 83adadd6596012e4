"""Gemini CLI for real: the pinned CLI in its agent image, against the scripted model
server (speaking the Gemini API) through the real gateway, parsed by the adapter. One run
proves the plumbing (the tool call runs in the sandbox and its output goes back, tokens
and the answer are read from the CLI's JSON), the route (Google's key header, added by the
gateway), the isolation and the instruction files (the checkout's GEMINI.md reaches the
model, its AGENTS.md and a GEMINI.md planted in the image's home do not), and that the key
never reaches the agent."""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import ScriptedRun, modelserver_image, own_network, run_scripted_agent
from modelserver.script import Script, TextTurn, ToolTurn, TurnUsage

from docdelta.agents import AgentContext
from docdelta.agents.gemini import VERSION, GeminiAgent
from docdelta.agents.images import agent_image
from docdelta.agents.models import RunStatus
from docdelta.gateway.config import GEMINI

pytestmark = pytest.mark.docker

CA = Path("/etc/ssl/certs/ca-certificates.crt")
HOME_MARKER = f"home-leak-marker-{uuid.uuid4().hex}"
KEY = f"test-key-{uuid.uuid4().hex}"
PROJECT = "gemini-md-marker: run the full test suite with `make check`.\n"
ANSWER = {"answer": "Run make check.", "commands": ["make check"], "files": ["GEMINI.md"]}
FINAL = "Found it.\n" + json.dumps(ANSWER)
MODEL = "gemini-2.5-flash"
PROMPT = "Which command runs the full test suite?"
SCRIPT = Script(
    name="gemini-e2e",
    turns=[
        ToolTurn.shell(
            "cat GEMINI.md", usage=TurnUsage(input_tokens=1200, output_tokens=20, cache_read_tokens=300)
        ),
        TextTurn(
            text="Found it.\n" + json.dumps(ANSWER), usage=TurnUsage(input_tokens=1500, output_tokens=40)
        ),
    ],
)
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"


@pytest.fixture(scope="module")
def run(
    client: Any, base_image: str, gateway_image: str, tmp_path_factory: pytest.TempPathFactory
) -> ScriptedRun:
    image = agent_image(client, base=base_image, npm=GeminiAgent.npm, extra_ca=CA).tag
    checkout = tmp_path_factory.mktemp("gemini") / "repo"
    checkout.mkdir()
    (checkout / "GEMINI.md").write_text(PROJECT)
    (checkout / "AGENTS.md").write_text("agents-md-marker\n")
    # A repository, as the runner's sealed checkout is: the CLI looks for GEMINI.md up to its root.
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    with own_network(client) as name:
        return run_scripted_agent(
            client,
            agent=GeminiAgent(model=MODEL),
            image=image,
            server_image=modelserver_image(client, base_image),
            gateway_image=gateway_image,
            network=name,
            upstream=GEMINI.model_copy(update={"base_url": "{server}"}),
            script=SCRIPT,
            checkout=checkout,
            prompt=PROMPT,
            key=KEY,
            # A developer's own global memory file, where the CLI would look without isolation.
            prepare=[f"mkdir -p $HOME/.gemini && echo {HOME_MARKER} > $HOME/.gemini/GEMINI.md"],
            ctx=AgentContext(seed=3, timeout_s=240),
        )


def test_the_outcome_is_what_the_script_did(run: ScriptedRun) -> None:
    outcome = run.outcome
    assert outcome.status is RunStatus.ok, (outcome.error, run.result.stderr[-2000:])
    assert outcome.answer is not None and outcome.answer.model_dump(include=set(ANSWER)) == ANSWER
    assert outcome.final_text == FINAL
    assert (outcome.agent_version, outcome.model, outcome.exit_code) == (VERSION, MODEL, 0)
    metrics = outcome.metrics
    # The script's two turns: 1200 + 1500 fresh input, 300 cached, 20 + 40 output.
    assert (metrics.tokens_in, metrics.cache_read_tokens, metrics.tokens_out) == (2700, 300, 60)
    assert metrics.tool_calls == 1


def test_the_shell_call_ran_in_the_sandbox_and_its_output_went_back(run: ScriptedRun) -> None:
    posts = [r for r in run.requests if r["method"] == "POST"]
    assert [(r["path"], r["turn"]) for r in posts] == [(STREAM, 0), (STREAM, 1)]
    (reply,) = [p for c in posts[1]["body"]["contents"] for p in c["parts"] if "functionResponse" in p]
    response = reply["functionResponse"]
    assert (response["name"], response["id"]) == ("run_shell_command", "call_gemini_e2e_0")
    assert PROJECT.strip() in json.dumps(response["response"])


def test_only_the_checkouts_gemini_md_reaches_the_model(run: ScriptedRun) -> None:
    first = json.dumps(run.requests[0]["body"])
    assert PROMPT in first
    assert "gemini-md-marker" in first  # loaded as context before any tool ran
    for request in run.requests:
        body = json.dumps(request["body"])
        assert "agents-md-marker" not in body and HOME_MARKER not in body


def test_the_gateway_adds_googles_key_header_and_the_agent_never_holds_the_key(run: ScriptedRun) -> None:
    # The gateway logs each call but reads no tokens from Gemini's `usageMetadata` yet
    # (gateway/usage.py knows only the `usage` blocks), so only the calls are checked here.
    real = hashlib.sha256(KEY.encode()).hexdigest()
    assert [r["auth"] for r in run.requests] == [[["x-goog-api-key", real]]] * 2
    routed = f"/gemini/v1beta/models/{MODEL}:streamGenerateContent"  # as the agent called the gateway
    assert [(c.upstream, c.path, c.status, c.streamed) for c in run.calls] == [
        ("gemini", routed, 200, True)
    ] * 2
    assert KEY.encode() not in run.result.stdout + run.result.stderr
