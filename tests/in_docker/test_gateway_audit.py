"""Run control and the injected-instruction audit through the real gateway container:
the runner hands the gateway the experiment's fingerprints and each run's dollar reserve,
the gateway reports which instruction files each forwarded request held (never their
text), a run over its reserve is `budget`, and a 429 stops the matrix cleanly.

The agent is a small stand-in for Claude Code: it injects CLAUDE.md (never AGENTS.md)
into an Anthropic Messages request, as the real CLI does, and prints the model's answer."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from docker_helpers import UPSTREAM_PORT
from gitrepo import GitRepo
from modelserver.script import ErrorTurn, Script, TextTurn, TurnUsage
from toolchain import MAKE_CHECK_TASK

from docdelta.agents.base import Agent, AgentContext, Invocation, classify, parse_answer
from docdelta.agents.models import AgentOutcome, RunStatus
from docdelta.config import ProjectConfig
from docdelta.experiment.plan import Experiment, ExperimentRequest, prepare
from docdelta.experiment.progress import LineProgress
from docdelta.experiment.runner import RunLimits, Runner
from docdelta.gateway.config import GatewayConfig, Upstream
from docdelta.git import Repo
from docdelta.instructions.models import InstructionAudit
from docdelta.keys import Keys
from docdelta.report import render_markdown
from docdelta.results.models import Cell
from docdelta.results.store import ResultStore
from docdelta.sandbox.base import ExecResult, NetworkMode, Sandbox, SandboxSpec
from docdelta.sandbox.docker import DockerProvider
from docdelta.sandbox.gateway_container import GatewayContainer
from docdelta.scorecard.summarize import summarize

pytestmark = pytest.mark.docker

KEY = f"sk-ant-test-{uuid.uuid4().hex}"
CLAUDE_MD = "# Notes\nKeep every public function documented and type hinted.\n"
ANSWER = '{"answer": "run make check", "commands": ["make check"]}'
USAGE = TurnUsage(input_tokens=1000, output_tokens=10)
"""$0.00315 per call at claude-sonnet-4 prices ($3 in, $15 out per million)."""

AGENT = r"""
import json, os, sys, urllib.error, urllib.request
workspace, calls = sys.argv[1], int(sys.argv[2])
content = []
memory = os.path.join(workspace, "CLAUDE.md")
if os.path.exists(memory):
    text = open(memory).read()
    framing = " (project instructions, checked into the codebase):\n\n"
    reminder = "<system-reminder>\nContents of " + memory + framing + text + "\n</system-reminder>"
    content.append({"type": "text", "text": reminder})
content.append({"type": "text", "text": sys.stdin.read()})
body = {"model": "claude-sonnet-4-5", "max_tokens": 512, "messages": [{"role": "user", "content": content}]}
for _ in range(calls):
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=json.dumps(body).encode(),
        headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = json.load(response)
    except urllib.error.HTTPError as error:
        sys.exit(f"model API error {error.code}: {error.read().decode()}")
print(reply["content"][0]["text"])
"""


class MemoryAgent(Agent):
    """Injects CLAUDE.md like Claude Code and calls the model `calls` times."""

    name: ClassVar[str] = "memory"

    def __init__(self, calls: int = 1) -> None:
        self.calls = calls

    @property
    def version(self) -> str:
        return "1"

    @property
    def network(self) -> NetworkMode:
        return "gateway"

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        script = f"{sandbox.tools_dir}/memory_agent.py"
        return Invocation(
            argv=["python3", script, sandbox.workspace, str(self.calls)],
            stdin=prompt.encode(),
            files={script: AGENT.encode()},
        )

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        answer, _ = parse_answer(result.stdout.decode())
        return AgentOutcome(
            agent=self.name,
            agent_version=self.version,
            status=classify(result, answer),
            answer=answer,
            exit_code=result.exit_code,
            error=result.stderr.decode()[-300:] or None,
        )


@pytest.fixture(scope="module")
def modelserver_script() -> Script:
    """Three runs of the matrix, one call of the budget run, then a rate limit."""
    answer = TextTurn(text=ANSWER, usage=USAGE)
    return Script(name="audit", turns=[answer, answer, answer, answer, ErrorTurn(error=429, retry_after=60)])


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Experiment, ResultStore]:
    root = tmp_path_factory.mktemp("audit")
    git = GitRepo.init(root / "proj")
    files = {"README.md": "# proj\n", "CLAUDE.md": CLAUDE_MD, ".docdelta/tasks/t.yaml": MAKE_CHECK_TASK}
    git.commit({**files, "AGENTS.md": "# Agents\nBe nice to the build server, always.\n"})
    git.commit({"AGENTS.md": "# Agents\nRun `make check` before you push, every time.\n"})
    store = ResultStore(root / "work")
    request = ExperimentRequest(base="HEAD~1", head="HEAD", tasks_dir=git.path / ".docdelta/tasks", repeats=1)
    exp = prepare(
        Repo(git.path), request, config=ProjectConfig(), store=store, agent=MemoryAgent(), sandbox="docker"
    )
    assert exp is not None
    return exp, store


@pytest.fixture(scope="module")
def provider(client: Any, base_image: str, gateway_image: str, egress: str) -> Iterator[DockerProvider]:
    route = Upstream(
        name="anthropic",
        base_url=f"http://{egress}-modelserver:{UPSTREAM_PORT}",
        paths=["/v1/messages"],
        auth_header="x-api-key",
        auth_prefix="",
        base_url_env=["ANTHROPIC_BASE_URL"],
        key_env=["ANTHROPIC_API_KEY"],
        key_from="ANTHROPIC_API_KEY",
    )
    gateway = GatewayContainer(
        config=GatewayConfig(upstreams=[route]),
        image=gateway_image,
        keys=Keys({"anthropic": KEY}),
        egress_network=egress,
    )
    provider = DockerProvider(client, base_image, gateway=gateway)
    yield provider
    provider.close()


def runner(store: ResultStore, provider: DockerProvider, agent: Agent, **limits: Any) -> Runner:
    return Runner(
        store,
        provider,
        SandboxSpec(network="gateway"),
        agent,
        RunLimits(timeout_s=120, infra_retries=0, **limits),
        LineProgress(out=io.StringIO()),
    )


def test_each_run_records_which_instruction_files_reached_the_model(
    experiment: tuple[Experiment, ResultStore], provider: DockerProvider
) -> None:
    exp, store = experiment
    report = runner(store, provider, MemoryAgent()).run(exp)
    assert report.stopped is None
    by_condition = {r.cell.condition: r for r in report.results}
    assert {c: r.status for c, r in by_condition.items()} == dict.fromkeys(
        ("base", "head", "none"), RunStatus.ok
    )
    # CLAUDE.md (the same in base and head) reached the model; the changed AGENTS.md never did.
    for condition in ("base", "head"):
        audit = by_condition[condition].instructions_seen
        assert audit == InstructionAudit(seen=["CLAUDE.md"], missing=["AGENTS.md"])
    assert by_condition["none"].instructions_seen == InstructionAudit()
    [head_call] = by_condition["head"].model_calls
    assert list(head_call.instructions.values()) == ["injected"]
    logged = "".join(c.model_dump_json() for r in report.results for c in r.model_calls)
    assert "type hinted" not in logged, "the gateway's log never holds an instruction file's text"

    text = render_markdown(summarize(exp.manifest, exp.detection, store.results(exp.repo_name)))
    assert (
        "- ⚠ `head`'s `AGENTS.md` did not reach the model in 1 of 1 audited run: the agent did not load it"
        in text
    )


def test_the_gateway_refuses_calls_past_the_run_s_reserve_and_the_run_is_budget(
    experiment: tuple[Experiment, ResultStore], provider: DockerProvider
) -> None:
    exp, store = experiment
    # Each call asks for up to 512 tokens out: its worst case (~$0.0085 at claude-sonnet-4's
    # $15/M out, plus its input) fits the $0.01 reserve once; settled at $0.00315, what is
    # left no longer holds a second worst case, so that one is refused before it is sent.
    result = runner(store, provider, MemoryAgent(calls=2), reserve_usd=0.01).run_cell(
        exp, Cell(task="test-cmd", condition="head", repeat=2)
    )
    assert [(c.status, c.error) for c in result.model_calls] == [(200, None), (402, "budget")]
    assert result.status is RunStatus.budget
    assert result.outcome.metrics.cost_usd == pytest.approx(0.00315)


def test_a_429_from_the_model_api_stops_the_matrix_cleanly(
    experiment: tuple[Experiment, ResultStore], provider: DockerProvider
) -> None:
    exp, store = experiment
    cell = Cell(task="test-cmd", condition="head", repeat=3)
    report = runner(store, provider, MemoryAgent()).run(exp, [cell])
    assert report.stopped is not None and report.stopped.startswith("rate limited at test-cmd/head/r3")
    assert store.load(exp.repo_name, cell) is None, "a rate-limited run is never a result"
    assert (store.cell_dir(exp.repo_name, cell) / "rate_limited-1.json").exists()
