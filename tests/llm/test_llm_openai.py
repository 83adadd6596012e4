"""The real-local-model tier: the built-in `openai` agent against llama.cpp's llama-server
serving SmolLM2-135M-Instruct, THROUGH the gateway, in the Docker sandbox.

These tests assert the harness, never the model. What a 135M model answers depends on the
machine (thread count, float paths, seed): it may call a tool or not, answer or run into
its output cap. So every assertion here holds whatever it says: the run ends with a status
from the closed set (never `infra_error`), every model request went through the gateway,
the token counts in the result equal llama-server's own counters, the transcript and the
result are stored, and nothing the run started outlives it. What the loop does with a
particular reply (tool calls run and answered, the turn cap, a reply cut at the output
cap) is asserted deterministically against the scripted model server in
tests/integration/test_agent_openai.py and tests/in_docker/test_docker_agent_openai.py.

SmolLM2's own template has no tool support, so llama-server drops `tools` (its `/props`
says `supports_tools: false`); with the repository's tool-aware template
(`--chat-template-file`) it keeps them, and `docdelta run` records that template's hash in
the experiment's identity.

The server's `--threads` and the sampling seed come from DOCDELTA_LLAMA_THREADS and
DOCDELTA_LLAMA_SEED, so the tier can be proven on several server settings (tests/README.md).
The first run builds llama-server from source (minutes); after that it is a cache hit.
Run this tier alone with `pytest -m llm`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import leftovers
from gitrepo import GitRepo
from llamacpp import MODEL_FILE, PORT, TOOLS_TEMPLATE, TOOLS_TEMPLATE_PATH, llama_image
from toolchain import CheckoutFactory

from docdelta.agents import AgentContext
from docdelta.agents.models import AgentMetrics, AgentOutcome, RunStatus
from docdelta.agents.openai_loop import OpenAIAgent
from docdelta.cli.main import main
from docdelta.experiment.runner import with_gateway_telemetry
from docdelta.gateway.config import GatewayConfig, Price, Upstream
from docdelta.gateway.models import ModelCall
from docdelta.keys import Keys
from docdelta.results.models import RunResult
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider
from docdelta.sandbox.dockerapi import LABEL, OWNER_LABEL, RUN_LABEL, owner_id
from docdelta.sandbox.gateway_container import GatewayContainer, gateway_image
from docdelta.sandbox.upstream_identity import server_identity

pytestmark = [pytest.mark.llm, pytest.mark.docker, pytest.mark.timeout(3600)]

ALIAS = "smollm2-135m"
THREADS = int(os.environ.get("DOCDELTA_LLAMA_THREADS", "2"))
SEED = int(os.environ.get("DOCDELTA_LLAMA_SEED", "1"))
"""The server's sampling seed, and the first run's request seed (the next run takes SEED + 1)."""
SERVE = [
    "--alias",
    ALIAS,
    "--parallel",
    "1",
    "--ctx-size",
    "8192",
    "--threads",
    str(THREADS),
    "--seed",
    str(SEED),
    "--metrics",
    "--no-webui",
]
MODEL_ENDINGS = {RunStatus.ok, RunStatus.no_answer, RunStatus.max_turns}
"""How a run may end whatever the model says: an answer (JSON or not), a reply cut at the
output cap, or the turn cap. The loop, the gateway and the server add no other ending."""
SERVED_TEMPLATE_SHA256 = hashlib.sha256(TOOLS_TEMPLATE.rstrip("\n").encode()).hexdigest()
"""The tool-aware template as llama-server reports it (it drops the file's final newline)."""
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


@contextmanager
def serve(flags: list[str]) -> Iterator[Served]:
    """llama-server with `flags`, on a network of its own (removed afterwards)."""
    import docker  # noqa: PLC0415 - only this tier needs the SDK at import time

    client = docker.from_env()
    base_image = os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")
    image = llama_image(client, base_image).tag  # builds llama-server on the first run only
    name = f"docdelta-test-{uuid.uuid4().hex[:8]}"
    labels = {LABEL: "1", RUN_LABEL: name}
    network = client.networks.create(name, labels=labels)
    server = client.containers.run(
        image, flags, name=f"{name}-llama", network=name, labels=labels, detach=True
    )
    try:
        served = Served(client, base_image, name, server)
        assert '"ok"' in served.get("/health"), server.logs()[-2000:]
        yield served
    finally:
        server.remove(force=True)
        network.remove()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """SmolLM2 with its own chat template (which has no tool support)."""
    with serve(SERVE) as server:
        yield server


@pytest.fixture(scope="module")
def served_with_tools() -> Iterator[Served]:
    """SmolLM2 with the repository's tool-aware template."""
    with serve([*SERVE, "--chat-template-file", TOOLS_TEMPLATE_PATH]) as server:
        yield server


def provider_for(served: Served) -> DockerProvider:
    """The Docker sandbox whose gateway routes the openai API to `served`."""
    route = Upstream(
        name="openai",
        base_url=f"{served.url}/v1",
        paths=["/chat/completions"],
        base_url_env=["OPENAI_BASE_URL"],
        key_env=["OPENAI_API_KEY"],
        key_from="OPENAI_API_KEY",
    )
    gateway = GatewayContainer(
        config=GatewayConfig(upstreams=[route], prices={ALIAS: Price(input=0, output=0)}),
        image=gateway_image(served.client, served.base_image).tag,
        keys=Keys({"openai": "llama-server-ignores-keys"}),
        egress_network=served.network,
    )
    return DockerProvider(served.client, served.base_image, gateway=gateway)


def test_runs_against_llama_server_end_in_a_closed_status_with_the_servers_own_token_counts(
    served: Served, tmp_checkout: CheckoutFactory
) -> None:
    # SmolLM2's own template has no tool support: llama-server says so, and drops `tools`.
    assert server_identity(json.loads(served.get("/props")))["supports_tools"] == "false"
    agent = OpenAIAgent(model=ALIAS, max_output_tokens=128)
    provider = provider_for(served)
    checkout = tmp_checkout({"README.md": README})
    cached = []
    # Two runs: the second one's prompt starts like the first, so the server serves part
    # of it from its prompt cache, and the cached tokens must be accounted for too.
    for seed in (SEED, SEED + 1):
        outcome, calls, served_tokens = run_once(agent, provider, served, checkout, seed)
        measured = _tokens_agree(outcome, calls, served_tokens)
        assert measured.tokens_in and measured.cache_read_tokens is not None
        cached.append(measured.cache_read_tokens)
    # The system prompt and the task are the same in both runs: that prefix is the server's
    # prompt cache at work (its slot keeps the last prompt), whatever the model answered.
    assert cached[1] > 0, "the second run reused the server's prompt cache"


def run_once(
    agent: OpenAIAgent, provider: DockerProvider, served: Served, checkout: Path, seed: int
) -> tuple[AgentOutcome, list[ModelCall], dict[str, float]]:
    """One run of `agent`, checked for what holds whatever the model said; returns its
    outcome, the gateway's log and what the server's counters moved by meanwhile."""
    before = served.counters()
    with provider.create(checkout, SandboxSpec(network=agent.network)) as sandbox:
        run_id = sandbox.run_id
        outcome = agent.run(PROMPT, sandbox, AgentContext(seed=seed, timeout_s=600, max_turns=3))
        assert sandbox.gateway is not None
        calls = sandbox.gateway.calls()
    after = served.counters()
    provider.removals.drain()  # removal is off the run's path
    assert leftovers(served.client, run_id) == [], "the sandbox and its gateway are gone"

    assert outcome.status in MODEL_ENDINGS, (outcome.status, outcome.error)
    own = outcome.metrics
    assert own.turns is not None and 1 <= own.turns <= 3
    assert own.tool_calls is not None and own.tool_calls >= len(own.commands)
    # Every model request went through the gateway, one per turn, and reached the server.
    assert len(calls) == own.turns
    assert all(c.status == 200 and c.error is None and c.model == ALIAS for c in calls), calls
    return outcome, calls, {name: after[name] - before.get(name, 0.0) for name in after}


def _tokens_agree(outcome: AgentOutcome, calls: list[ModelCall], served: dict[str, float]) -> AgentMetrics:
    """The gateway's log agrees with the usage the server reported to the agent, and with the
    server's own counters: every token generated was reported, and every prompt token was
    either evaluated or served from the prompt cache. Returns the gateway's measurement."""
    own = outcome.metrics
    measured = with_gateway_telemetry(outcome, calls, over_budget=False).metrics
    assert (measured.tokens_in, measured.tokens_out, measured.cache_read_tokens) == (
        own.tokens_in,
        own.tokens_out,
        own.cache_read_tokens,
    )
    assert measured.tokens_out == served["tokens_predicted_total"]
    assert measured.cache_read_tokens == served["prompt_tokens_cached_total"]
    assert measured.tokens_in == served["prompt_tokens_total"] + measured.cache_read_tokens
    return measured


ROUND_TRIP_CHECKOUT = {
    "README.md": README
    + "".join(f"\nNote {n}: the fixture word for line {n} is canary-{n:02d}." for n in range(12)),
    **{f"note-{n:02d}.txt": f"note {n}\n" for n in range(30)},
}
"""Files whose listing and README are both long enough (well over 100 tokens) that carrying
a command's output back to the model shows in the size of its next prompt."""


def test_a_tool_aware_run_accounts_every_turn_and_runs_each_call_in_the_sandbox(
    served_with_tools: Served, tmp_checkout: CheckoutFactory
) -> None:
    served = served_with_tools
    agent = OpenAIAgent(model=ALIAS, max_output_tokens=128)
    outcome, calls, served_tokens = run_once(
        agent, provider_for(served), served, tmp_checkout(ROUND_TRIP_CHECKOUT), SEED
    )
    own = outcome.metrics
    # Whether the model calls a tool is its business; each call it makes runs in the sandbox
    # and its result is sent back, so every later prompt holds the whole conversation.
    assert len(own.commands) <= (own.tool_calls or 0)
    prompts = [call.tokens_in or 0 for call in calls]
    assert all(later > earlier > 0 for earlier, later in pairwise(prompts)), prompts
    # The tokens are the server's own: gateway log == agent's usage == llama-server /metrics.
    _tokens_agree(outcome, calls, served_tokens)


def test_docdelta_run_records_the_servers_identity_stores_the_run_and_leaves_nothing_behind(
    served_with_tools: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = served_with_tools
    config = f"""\
gateway:
  egress_network: {served.network}
  upstreams:
    - name: local
      base_url: {served.url}/v1
      paths: ["/chat/completions"]
      base_url_env: [OPENAI_BASE_URL]
      key_env: [OPENAI_API_KEY]
      key_from: LLAMA_KEY
  prices:
    {ALIAS}: {{input: 0, output: 0}}
"""
    task = (
        "id: readme\nprompt: Which command runs the tests? Run `cat README.md` to find out.\nreviewed: true\n"
    )
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(
        {".docdelta.yml": config, ".docdelta/tasks/t.yaml": task, "README.md": README, "AGENTS.md": "x\n"}
    )
    repo.commit({"AGENTS.md": "Use the shell tool.\n"})
    monkeypatch.setenv("LLAMA_KEY", "llama-server-ignores-keys")
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "openai", "--model", ALIAS, "--sandbox", "docker", "--conditions", "head",
        "--repeats", "1", "--max-turns", "2", "--max-output-tokens", "96",
    ]  # fmt: skip
    main(args)

    agent = json.loads((workdir / "manifest.json").read_text())["agent"]
    assert agent["settings"]["max_output_tokens"] == 96
    server = agent["server"]
    assert server["local.chat_template_sha256"] == SERVED_TEMPLATE_SHA256
    assert server["local.model_file"] == MODEL_FILE and server["local.model_alias"] == ALIAS
    assert server["local.supports_tools"] == "true"
    (result_file,) = workdir.glob("runs/*/*/head/r1/result.json")
    result = RunResult.model_validate_json(result_file.read_text())
    assert result.status in MODEL_ENDINGS, (result.status, result.outcome.error)
    assert result.outcome.served_by.get("model") == ALIAS
    # The transcript beside the result shows each turn as the loop saw it.
    transcript = (result_file.parent / "transcript.txt").read_text()
    assert "--- turn 1 (finish: " in transcript
    # Every sandbox, gateway, network and volume this process started is gone.
    mine = {"label": f"{OWNER_LABEL}={owner_id()}"}
    client = served.client
    left = [*client.containers.list(all=True, filters=mine), *client.networks.list(filters=mine)]
    assert [*left, *client.volumes.list(filters=mine)] == []
