"""The real-local-model tier: the built-in `openai` agent against llama.cpp's llama-server
serving SmolLM2-135M-Instruct, THROUGH the gateway, in the Docker sandbox.

The model is far too small to solve anything; these tests prove the plumbing with a real
server (its chat template, tool-call parsing, usage blocks and counters), not quality.
The first run builds llama-server from source (minutes); after that it is a cache hit.
Run this tier alone with `pytest -m llm`.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import CheckoutFactory

from docdelta.agents import AgentContext
from docdelta.agents.openai_loop import OpenAIAgent
from docdelta.gateway.config import GatewayConfig, Upstream
from docdelta.gateway.runtime import Gateway, gateway_image
from docdelta.llm.llamacpp import PORT, llama_image
from docdelta.models import RunStatus
from docdelta.runner import with_gateway_telemetry
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider
from docdelta.sandbox.dockerapi import LABEL, RUN_LABEL

pytestmark = [pytest.mark.llm, pytest.mark.docker, pytest.mark.timeout(3600)]

ALIAS = "smollm2-135m"
SERVE = [
    "--alias",
    ALIAS,
    "--parallel",
    "1",
    "--ctx-size",
    "8192",
    "--threads",
    "2",
    "--metrics",
    "--no-webui",
]
README = "# tiny\n\nRun the tests with `make check`.\n"
PROMPT = (
    "You are in a repository. Use the shell tool to run `cat README.md`, then answer with a JSON object "
    'like {"answer": "...", "commands": ["..."]} saying which command runs the tests.'
)
PROBE = """
import sys, time, urllib.request
for _ in range(600):
    try:
        sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()); break
    except OSError:
        time.sleep(0.2)
else:
    sys.exit(1)
"""


@dataclass(frozen=True)
class Served:
    client: Any
    base_image: str
    network: str
    server: Any

    @property
    def url(self) -> str:
        return f"http://{self.server.name}:{PORT}"

    def get(self, path: str) -> str:
        """GET from inside the server's network (waiting while the model loads)."""
        done = self.client.containers.run(
            self.base_image,
            ["python3", "-c", PROBE, self.url + path],
            network=self.network,
            labels={LABEL: "1", RUN_LABEL: self.network},
            detach=True,
        )
        try:
            assert done.wait(timeout=180)["StatusCode"] == 0, done.logs()
            return str(done.logs(stdout=True, stderr=False).decode())
        finally:
            done.remove(force=True)

    def counters(self) -> dict[str, float]:
        """llama-server's own Prometheus counters (`--metrics`)."""
        found = re.findall(r"^llamacpp:(\w+) ([0-9.e+-]+)$", self.get("/metrics"), re.MULTILINE)
        return {name: float(value) for name, value in found}


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    import docker  # noqa: PLC0415 - only this tier needs the SDK at import time

    client = docker.from_env()
    base_image = os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")
    image = llama_image(client, base_image).tag  # builds llama-server on the first run only
    name = f"docdelta-test-{uuid.uuid4().hex[:8]}"
    labels = {LABEL: "1", RUN_LABEL: name}
    network = client.networks.create(name, labels=labels)
    server = client.containers.run(
        image, SERVE, name=f"{name}-llama", network=name, labels=labels, detach=True
    )
    try:
        served = Served(client, base_image, name, server)
        assert '"ok"' in served.get("/health"), server.logs()[-2000:]
        yield served
    finally:
        server.remove(force=True)
        network.remove()


def test_the_openai_agent_completes_runs_against_llama_server_through_the_gateway(
    served: Served, tmp_checkout: CheckoutFactory
) -> None:
    route = Upstream(
        name="openai",
        base_url=f"{served.url}/v1",
        paths=["/chat/completions"],
        base_url_env=["OPENAI_BASE_URL"],
        key_env=["OPENAI_API_KEY"],
        key_from="OPENAI_API_KEY",
    )
    gateway = Gateway(
        config=GatewayConfig(upstreams=[route]),
        image=gateway_image(served.client, served.base_image).tag,
        keys={"openai": "llama-server-ignores-keys"},
        egress_network=served.network,
    )
    agent = OpenAIAgent(model=ALIAS, max_output_tokens=128)
    provider = DockerProvider(served.client, served.base_image, gateway=gateway)
    checkout = tmp_checkout({"README.md": README})
    cached = []
    # Two runs: the second one's prompt starts like the first, so the server serves part
    # of it from its prompt cache, and the cached tokens must be accounted for too.
    for seed in (1, 2):
        before = served.counters()
        with provider.create(checkout, SandboxSpec(network=agent.network)) as sandbox:
            outcome = agent.run(PROMPT, sandbox, AgentContext(seed=seed, timeout_s=600, max_turns=3))
            assert sandbox.gateway is not None
            calls = sandbox.gateway.calls()
        after = served.counters()
        served_tokens = {name: after[name] - before.get(name, 0.0) for name in after}

        # The loop ended on its own terms: an answer (JSON or not) or its turn cap.
        assert outcome.status in {RunStatus.ok, RunStatus.no_answer, RunStatus.max_turns}, outcome.error
        assert outcome.final_text.strip() or outcome.status is RunStatus.max_turns
        own = outcome.metrics
        assert own.turns is not None and 1 <= own.turns <= 3
        assert own.tool_calls is not None and own.tool_calls >= len(own.commands)

        # Every model call went through the gateway, whose log agrees with the usage the
        # server reported to the agent...
        assert len(calls) == own.turns
        assert all(c.status == 200 and c.error is None and c.model == ALIAS for c in calls)
        measured = with_gateway_telemetry(outcome, calls, over_budget=False).metrics
        assert measured.tokens_in and measured.tokens_out
        assert (measured.tokens_in, measured.tokens_out, measured.cache_read_tokens) == (
            own.tokens_in,
            own.tokens_out,
            own.cache_read_tokens,
        )
        # ...and with the server's own counters: every token generated was reported, and
        # every prompt token was either evaluated or served from the prompt cache.
        assert measured.tokens_out == served_tokens["tokens_predicted_total"]
        assert measured.cache_read_tokens == served_tokens["prompt_tokens_cached_total"]
        assert measured.tokens_in == served_tokens["prompt_tokens_total"] + measured.cache_read_tokens
        cached.append(measured.cache_read_tokens)
    assert cached[1] > 0, "the second run reused the server's prompt cache"
