"""Gemini CLI in the agent container, through the run's gateway. The scripted model server
does not speak the Gemini API, so this run cannot succeed: it proves the route (the CLI's
request reaches the upstream through the gateway with the real key in Google's header),
the isolation and the instruction files (the checkout's GEMINI.md reaches the model, its
AGENTS.md and a GEMINI.md planted in HOME do not), and that the failure is parsed as the
API error it is. A successful end-to-end run needs a Gemini-speaking model server."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import CheckoutFactory
from docker_helpers import modelserver_image, run_scripted_agent

from docdelta.agents import AgentContext
from docdelta.agents.gemini import GEMINI, GeminiAgent
from docdelta.agents.images import agent_image
from docdelta.models import RunStatus
from docdelta.modelserver.script import Script, TextTurn
from docdelta.sandbox.dockerapi import LABEL, RUN_LABEL

pytestmark = pytest.mark.docker

HOME_MARKER = "home-leak-marker"
KEY = f"test-key-{uuid.uuid4().hex}"


def test_gemini_reaches_the_model_only_through_the_gateway_with_only_the_repos_gemini_md(
    client: Any, base_image: str, gateway_image: str, tmp_checkout: CheckoutFactory
) -> None:
    agent = GeminiAgent(model="gemini-2.5-flash")
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    image = agent_image(client, base=base_image, npm=agent.npm, extra_ca=bundle if bundle.exists() else None)
    name = f"docdelta-test-{uuid.uuid4().hex[:8]}"
    network = client.networks.create(name, labels={LABEL: "1", RUN_LABEL: name})
    checkout = tmp_checkout({"GEMINI.md": "gemini-md-marker\n", "AGENTS.md": "agents-md-marker\n"})
    try:
        run = run_scripted_agent(
            client,
            agent=agent,
            image=image.tag,
            server_image=modelserver_image(client, base_image),
            gateway_image=gateway_image,
            network=name,
            upstream=GEMINI.model_copy(update={"base_url": f"http://{name}-scripted:8000"}),
            script=Script(name="docker-gemini", turns=[TextTurn(text="unused")]),
            checkout=checkout,
            prompt="Which command runs the full test suite?",
            key=KEY,
            prepare=[f"mkdir -p $HOME/.gemini && echo {HOME_MARKER} > $HOME/.gemini/GEMINI.md"],
            ctx=AgentContext(seed=3, timeout_s=240),
        )
    finally:
        network.remove()

    posts = [r for r in run.requests if r["method"] == "POST"]
    assert [r["path"] for r in posts] == ["/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"]
    body = json.dumps(posts[0]["body"])
    assert "Which command runs the full test suite?" in body
    assert "gemini-md-marker" in body
    assert "agents-md-marker" not in body and HOME_MARKER not in body
    real = hashlib.sha256(KEY.encode()).hexdigest()
    assert posts[0]["auth"] == [["x-goog-api-key", real]]
    assert [c.status for c in run.calls] == [404]

    assert run.outcome.status is RunStatus.infra_error
    assert run.outcome.error is not None and "(404)" in run.outcome.error
    assert KEY.encode() not in run.result.stdout + run.result.stderr
