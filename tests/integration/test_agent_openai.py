"""The built-in `openai` agent end to end on the host: the adapter writes its loop into a
local sandbox (run unisolated so it can reach loopback) and the loop talks to the scripted
model server on 127.0.0.1; every assertion is about what reached the server or came back."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from modelserver import ScriptedModelServer
from modelserver.script import ErrorTurn, Script, TextTurn, ToolTurn, TurnUsage
from toolchain import CheckoutFactory

from docdelta.agents import AgentContext, get_agent
from docdelta.agents.models import AgentOutcome, CommandRun, RunStatus
from docdelta.agents.openai_loop import OpenAIAgent
from docdelta.errors import AgentError
from docdelta.sandbox import Sandbox, SandboxSpec
from docdelta.sandbox.local import LocalProvider

AGENTS_MD = "# Notes\n\n- Run the full test suite with `make check`.\n"
ANSWER = {"answer": "Run `make check`.", "commands": ["make check"], "files": ["AGENTS.md"], "verdict": None}
MODEL = "local-model-7b"


@pytest.fixture
def sandbox(tmp_path: Path, tmp_checkout: CheckoutFactory) -> Iterator[Sandbox]:
    provider = LocalProvider(root=tmp_path / "sb", allow_network=True)
    with provider.create(tmp_checkout({"AGENTS.md": AGENTS_MD}), SandboxSpec(network="open")) as sb:
        yield sb


def run(
    sandbox: Sandbox, script: Script, ctx: AgentContext | None = None, **options: Any
) -> tuple[AgentOutcome, list[dict[str, Any]]]:
    """Run the agent against `script`; (outcome, the request bodies the server received)."""
    with ScriptedModelServer(script) as server:
        agent = OpenAIAgent(model=MODEL, base_url=f"{server.url}/v1", **options)
        outcome = agent.run("Which command runs the tests?", sandbox, ctx or AgentContext(seed=7))
        return outcome, [entry["body"] for entry in server.requests]


def usage(tokens_in: int, tokens_out: int, cached: int = 0) -> TurnUsage:
    return TurnUsage(input_tokens=tokens_in, output_tokens=tokens_out, cache_read_tokens=cached)


def test_tool_calls_run_in_the_checkout_and_the_final_message_is_the_answer(sandbox: Sandbox) -> None:
    script = Script(
        name="answer",
        turns=[
            ToolTurn.shell("cat AGENTS.md", usage=usage(100, 10)),
            ToolTurn.shell("ls no-such-file", text="Checking.", usage=usage(150, 12, cached=100)),
            TextTurn(text=f"Done.\n```json\n{json.dumps(ANSWER)}\n```", usage=usage(40, 30, cached=200)),
        ],
    )
    outcome, bodies = run(sandbox, script)

    assert outcome.status is RunStatus.ok, outcome.error
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    assert outcome.agent == "openai" and outcome.model == MODEL
    metrics = outcome.metrics
    assert (metrics.turns, metrics.tool_calls) == (3, 2)
    assert metrics.commands == [
        CommandRun(command="cat AGENTS.md", exit_code=0),
        CommandRun(command="ls no-such-file", exit_code=2),
    ]
    # Chat Completions counts cached tokens inside prompt tokens: 100 + 250 + 240.
    assert (metrics.tokens_in, metrics.tokens_out, metrics.cache_read_tokens) == (590, 52, 300)

    assert metrics.files_read == ["AGENTS.md"]
    assert len(bodies) == 3
    assert AGENTS_MD in bodies[0]["messages"][0]["content"], "AGENTS.md is in the system prompt"
    for body in bodies:
        assert body["model"] == MODEL
        assert (body["temperature"], body["seed"], body["max_tokens"]) == (0, 7, 4096)
        assert [tool["function"]["name"] for tool in body["tools"]] == ["shell"]
    tool_messages = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == f"exit code: 0\n{AGENTS_MD}"
    assert tool_messages[1]["content"].startswith("exit code: 2\n")
    assert "no-such-file" in tool_messages[1]["content"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_answer_0", "call_answer_1"]


def test_the_turn_cap_ends_the_run_as_max_turns_and_tool_output_is_capped(sandbox: Sandbox) -> None:
    loud = "python3 -c \"print('x' * 50000)\""
    script = Script(name="endless", turns=[ToolTurn.shell(loud) for _ in range(4)])
    assert sandbox.exec(["rm", "AGENTS.md"]).exit_code == 0
    outcome, bodies = run(sandbox, script, AgentContext(seed=1, max_turns=2), max_tool_output=1000)

    assert outcome.status is RunStatus.max_turns
    assert outcome.answer is None and "2 turns" in (outcome.error or "")
    assert (outcome.metrics.turns, outcome.metrics.tool_calls) == (2, 2)
    assert len(bodies) == 2, "no request past the cap"
    assert "AGENTS.md" not in bodies[0]["messages"][0]["content"] and outcome.metrics.files_read == []
    output = bodies[1]["messages"][-1]["content"]
    assert len(output) < 1200 and "characters cut" in output


@pytest.mark.parametrize(
    ("turn", "status", "said"),
    [
        (ErrorTurn(error=429, message="slow down"), RunStatus.rate_limited, "HTTP 429"),
        # A server that fails is our infrastructure's fault, never the agent's: retried, not scored.
        (ErrorTurn(error=500, message="boom"), RunStatus.infra_error, "HTTP 500"),
        (
            ErrorTurn(error=502, message="upstream failed: Name or service not known"),
            RunStatus.infra_error,
            "502",
        ),
        (ErrorTurn(error=503, message="loading model"), RunStatus.infra_error, "HTTP 503"),
        (ErrorTurn(error=402, message="run budget exhausted"), RunStatus.budget, "HTTP 402"),
        (ErrorTurn(error=400, message="context too long"), RunStatus.agent_error, "HTTP 400"),
        (TextTurn(text="I am not sure."), RunStatus.no_answer, "no JSON object"),
    ],
)
def test_api_errors_and_answers_without_json_are_classified(
    sandbox: Sandbox, turn: ErrorTurn | TextTurn, status: RunStatus, said: str
) -> None:
    outcome, bodies = run(sandbox, Script(name="fail", turns=[turn]))
    assert outcome.status is status
    assert said in (outcome.error or "")
    assert len(bodies) == 1, "errors are not retried by the loop"


def test_a_run_killed_at_its_timeout_still_reports_its_turns(sandbox: Sandbox) -> None:
    script = Script(name="slow", turns=[ToolTurn.shell("sleep 30", usage=usage(80, 5))])
    outcome, _ = run(sandbox, script, AgentContext(seed=1, timeout_s=2))
    assert outcome.status is RunStatus.timeout
    assert (outcome.metrics.turns, outcome.metrics.tokens_in, outcome.metrics.tokens_out) == (1, 80, 5)


def test_the_agent_needs_a_model_and_uses_the_gateway() -> None:
    with pytest.raises(AgentError, match="needs a model") as err:
        get_agent("openai")
    assert "--model" in err.value.hint
    agent = get_agent("openai", model="gpt-4o-mini")
    assert isinstance(agent, OpenAIAgent)
    assert (agent.model, agent.network, agent.instruction_files) == ("gpt-4o-mini", "gateway", ["/AGENTS.md"])
    assert agent.version == OpenAIAgent(model="other").version and agent.version.startswith("openai-")


def test_a_server_that_is_down_is_an_infra_error(sandbox: Sandbox) -> None:
    with socket.socket() as bound:  # bound, never listening: every connection is refused
        bound.bind(("127.0.0.1", 0))
        agent = OpenAIAgent(model=MODEL, base_url=f"http://127.0.0.1:{bound.getsockname()[1]}/v1")
        outcome = agent.run("Which command runs the tests?", sandbox, AgentContext(seed=1))
    assert outcome.status is RunStatus.infra_error
    assert outcome.error is not None and outcome.error.startswith("api_error: cannot reach")


def test_a_reply_cut_off_at_the_output_cap_is_not_an_answer(sandbox: Sandbox) -> None:
    # What SmolLM2 did: ran out of tokens while echoing the prompt's JSON example.
    echo = 'The answer format is:\n```json\n{"path": "path/to/file", "lines": "10-12"}\n```\nSo'
    outcome, bodies = run(
        sandbox, Script(name="cut", turns=[TextTurn(text=echo, truncated=True)]), max_output_tokens=64
    )
    assert bodies[0]["max_tokens"] == 64
    assert outcome.status is RunStatus.no_answer and outcome.answer is None
    assert outcome.error is not None and outcome.error.startswith("max_tokens: the reply was cut off")
    assert "--max-tokens 64" in outcome.error


def test_a_truncated_tool_call_is_answered_with_an_error_and_never_replayed(sandbox: Sandbox) -> None:
    script = Script(
        name="broken-call",
        turns=[
            ToolTurn(tool="shell", raw_arguments="{", truncated=True),
            ToolTurn.shell("cat AGENTS.md"),
            TextTurn(text=json.dumps(ANSWER)),
        ],
    )
    outcome, bodies = run(sandbox, script)
    assert outcome.status is RunStatus.ok, outcome.error
    assert (outcome.metrics.tool_calls, [c.command for c in outcome.metrics.commands]) == (
        2,
        ["cat AGENTS.md"],
    )
    history = bodies[1]["messages"]
    replayed = [call for m in history if m["role"] == "assistant" for call in m["tool_calls"]]
    assert [c["function"]["arguments"] for c in replayed] == ["{}"], "the broken arguments are not sent back"
    (error,) = [m for m in history if m["role"] == "tool"]
    assert error["tool_call_id"] == replayed[0]["id"]
    assert error["content"].startswith("error: the arguments of this call are not a JSON object ('{'")


def test_the_transcript_shows_every_tool_call_and_result_and_the_server_is_recorded(sandbox: Sandbox) -> None:
    script = Script(
        name="transcript",
        model="served-model-q4",
        turns=[ToolTurn.shell("cat AGENTS.md", text="Let me look."), TextTurn(text=json.dumps(ANSWER))],
    )
    with ScriptedModelServer(script) as server:
        agent = OpenAIAgent(model=MODEL, base_url=f"{server.url}/v1")
        outcome, printed = agent.execute("Which command runs the tests?", sandbox, AgentContext(seed=3))
    assert outcome.status is RunStatus.ok
    conversation = printed.stderr.decode()
    assert "Let me look." in conversation
    assert '[tool call] shell {"command": "cat AGENTS.md"}' in conversation
    assert f"[tool result]\nexit code: 0\n{AGENTS_MD}" in conversation
    assert outcome.served_by == {"model": "served-model-q4"}


def test_the_output_cap_is_a_recorded_setting() -> None:
    agent = OpenAIAgent(model=MODEL, max_output_tokens=256)
    assert agent.recorded_settings == {"max_output_tokens": 256, "max_tool_output": 16000}
    assert OpenAIAgent(model=MODEL).recorded_settings["max_output_tokens"] == 4096
    assert agent.server_identity == {}
    assert OpenAIAgent(model=MODEL, server={"model_file": "m.gguf"}).server_identity == {
        "model_file": "m.gguf"
    }
