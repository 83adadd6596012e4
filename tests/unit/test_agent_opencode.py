"""The OpenCode adapter: its command line and isolation, and its parser on JSON events
recorded from the real CLI (1.18.33) in the agent container against the scripted model
server through the gateway (tests/fixtures/agents/opencode/<case>/: stdout.jsonl and the
exec's exit code)."""

from __future__ import annotations

import json

from recorded_agents import recorded_run, recording_sandbox

from docdelta.agents import AgentContext, get_agent
from docdelta.agents.models import AgentOutcome, CommandRun, RunStatus
from docdelta.agents.opencode import PACKAGE, VERSION, OpenCodeAgent
from docdelta.sandbox.base import ExecResult

CTX = AgentContext(seed=1)


SANDBOX = recording_sandbox()


def recorded(case: str) -> ExecResult:
    return recorded_run("opencode", case)


def parse(result: ExecResult, ctx: AgentContext = CTX) -> AgentOutcome:
    return OpenCodeAgent().parse(result, SANDBOX, ctx)


def test_a_finished_run_yields_the_answer_and_what_each_step_reported() -> None:
    outcome = parse(recorded("ok"))
    assert outcome.status is RunStatus.ok, outcome.error
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    m = outcome.metrics
    # Script: shell `cat AGENTS.md`, shell `ls missing-dir` (exit 2), read of an absolute
    # path inside the checkout, answer — four model calls, three tool calls.
    assert m.commands == [
        CommandRun(command="cat AGENTS.md", exit_code=0),
        CommandRun(command="ls missing-dir", exit_code=2),
    ]
    assert (m.turns, m.tool_calls, m.files_read) == (4, 3, ["README.md"])
    # The script's usage, summed: fresh input 1000+1100+1200+1300, cached 900+1000+1100.
    assert (m.tokens_in, m.tokens_out, m.cache_read_tokens, m.cache_write_tokens) == (4600, 87, 3000, 0)
    assert m.cost_usd is None  # OpenCode has no price for the gateway's model: its 0 is no measurement
    assert outcome.final_text.startswith("Let me read the notes.")
    assert (outcome.error, outcome.agent_version, outcome.model) == (None, VERSION, "gpt-4o-mini")


def test_running_out_of_steps_is_max_turns_not_a_wrong_answer() -> None:
    outcome = parse(recorded("max_turns"), AgentContext(seed=1, max_turns=2))
    assert outcome.status is RunStatus.max_turns
    assert (outcome.metrics.turns, outcome.metrics.tool_calls) == (3, 2)
    # The same events with a higher cap are a plain missing answer.
    assert parse(recorded("max_turns"), AgentContext(seed=1, max_turns=10)).status is RunStatus.no_answer


def test_an_api_429_after_the_clis_own_retries_is_rate_limited_with_the_apis_message() -> None:
    outcome = parse(recorded("rate_limited"))
    assert outcome.status is RunStatus.rate_limited
    assert outcome.error == "APIError (429): Rate limit reached for requests"
    assert outcome.metrics.turns == 0 and outcome.metrics.tokens_in is None


def test_a_cli_that_dies_before_any_event_is_an_agent_error_with_its_stderr() -> None:
    outcome = parse(ExecResult(1, b"", b"Error: Unexpected token in opencode.json", 0.4))
    assert outcome.status is RunStatus.agent_error
    assert outcome.error is not None and "opencode.json" in outcome.error


def test_the_command_line_is_headless_isolated_and_keyless() -> None:
    agent = get_agent("opencode", model="my-model", max_turns=7)
    assert isinstance(agent, OpenCodeAgent) and agent.network == "gateway"
    inv = agent.invocation("the prompt", SANDBOX, AgentContext(seed=1, max_turns=3))
    assert inv.argv == ["opencode", "run", "--format", "json", "-m", "docdelta/my-model"]
    assert inv.stdin == b"the prompt"  # never in argv
    home = "/workspace/tools/opencode-home"
    assert inv.env["HOME"] == home and all(
        inv.env[var].startswith(f"{home}/")
        for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
    )
    assert f"{home}/.keep" in inv.files
    config = json.loads(inv.env["OPENCODE_CONFIG_CONTENT"])
    provider = config["provider"]["docdelta"]
    # Base URL and key are the sandbox's gateway env, resolved by OpenCode at run time.
    assert provider["options"] == {"baseURL": "{env:OPENAI_BASE_URL}", "apiKey": "{env:OPENAI_API_KEY}"}
    assert provider["npm"] == "@ai-sdk/openai-compatible" and list(provider["models"]) == ["my-model"]
    assert config["agent"] == {"title": {"disable": True}, "build": {"steps": 3}}
    assert config["permission"] == "allow"
    # The project CLAUDE.md fallback stays on (a real user gets it); HOME is what isolates.
    assert not any(var.startswith("OPENCODE_DISABLE_CLAUDE_CODE") for var in inv.env)
    assert "API_KEY" not in " ".join(inv.env) and "sk-" not in json.dumps(inv.env)


def test_it_is_pinned_and_declares_the_files_opencode_reads() -> None:
    agent = OpenCodeAgent()
    assert agent.npm == (PACKAGE,) == ("opencode-ai@1.18.33",)
    assert {"AGENTS.md", "CLAUDE.md"} <= set(agent.instruction_files)
