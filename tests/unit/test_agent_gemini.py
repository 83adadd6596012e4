"""The Gemini CLI adapter: its command line, isolation and recorded `context.fileName`, and
its parser on the output of the real CLI (0.61.0), recorded in tests/fixtures/agents/gemini/
(stdout, stderr and the exit code): `ok` is the Docker test's run through the gateway
against the scripted server (a `cat GEMINI.md` shell call, then the JSON answer; 1200 + 1500
fresh input tokens, 300 cached, 20 + 40 output), `not_found` the CLI failing on a 404."""

from __future__ import annotations

import json

from recorded_agents import recorded_run, recording_sandbox

from docdelta.agents import AgentContext, get_agent
from docdelta.agents.gemini import PACKAGE, VERSION, GeminiAgent
from docdelta.agents.models import RunStatus
from docdelta.gateway.config import GEMINI
from docdelta.sandbox.base import ExecResult

SANDBOX = recording_sandbox()


def recorded(case: str) -> ExecResult:
    return recorded_run("gemini", case)


def test_a_successful_run_yields_the_answer_tokens_and_tool_calls_the_script_produced() -> None:
    outcome = GeminiAgent().parse(recorded("ok"), SANDBOX, AgentContext(seed=1))
    assert (outcome.status, outcome.exit_code, outcome.error) == (RunStatus.ok, 0, None)
    assert outcome.answer is not None
    assert (outcome.answer.answer, outcome.answer.commands, outcome.answer.files) == (
        "Run make check.",
        ["make check"],
        ["GEMINI.md"],
    )
    assert outcome.final_text.startswith("Found it.\n{")
    metrics = outcome.metrics
    # `prompt` (3000) counts the cached 300 too; the adapter reports fresh input apart.
    assert (metrics.tokens_in, metrics.cache_read_tokens, metrics.tokens_out) == (2700, 300, 60)
    assert metrics.tool_calls == 1
    # Not in the CLI's output, so not reported: never guessed from its request counts.
    assert (metrics.turns, metrics.commands, metrics.files_read, metrics.cost_usd) == (None, [], [], None)


def test_an_api_error_is_read_from_the_object_the_cli_prints_to_stderr() -> None:
    outcome = GeminiAgent().parse(recorded("not_found"), SANDBOX, AgentContext(seed=1))
    # A 404 from the model API is a routing failure of ours, not the agent's: retried, not scored.
    assert outcome.status is RunStatus.infra_error
    assert outcome.error is not None and outcome.error.startswith("Error (404): ")
    assert "no route for POST /v1beta/models/gemini-2.5-flash:streamGenerateContent" in outcome.error
    assert outcome.answer is None and outcome.exit_code == 148
    assert (outcome.agent_version, outcome.model) == (VERSION, "gemini-2.5-flash")


def test_a_cli_that_prints_nothing_parseable_is_an_agent_error_with_its_stderr() -> None:
    outcome = GeminiAgent().parse(
        ExecResult(1, b"", b"FATAL: settings.json is invalid", 0.3), SANDBOX, AgentContext(seed=1)
    )
    assert outcome.status is RunStatus.agent_error
    assert outcome.error == "FATAL: settings.json is invalid"


def test_the_command_line_is_headless_isolated_keyless_and_reads_only_gemini_md() -> None:
    agent = get_agent("gemini", model="gemini-x", max_turns=9)
    assert isinstance(agent, GeminiAgent) and agent.network == "gateway"
    inv = agent.invocation("the prompt", SANDBOX, AgentContext(seed=1))
    assert inv.argv == [
        "gemini",
        "-p",
        "",
        "-o",
        "json",
        "-m",
        "gemini-x",
        "-e",
        "none",
        "--approval-mode",
        "yolo",
    ]
    assert inv.stdin == b"the prompt"
    home = "/workspace/tools/gemini-home"
    assert inv.env == {"HOME": home, "GEMINI_CLI_HOME": home}  # key and URL come from the gateway env
    settings = json.loads(inv.files[f"{home}/.gemini/settings.json"])
    # Recorded on purpose: the CLI's default, and no AGENTS.md added behind the repo's back.
    assert settings["context"] == {"fileName": ["GEMINI.md"]}
    assert settings["model"] == {"maxSessionTurns": 9}
    assert settings["telemetry"] == {"enabled": False}
    assert agent.instruction_files == ["GEMINI.md"]


def test_the_gateway_route_carries_the_key_in_googles_header() -> None:
    assert (GEMINI.auth_header, GEMINI.auth_prefix) == ("x-goog-api-key", "")
    assert (GEMINI.base_url_env, GEMINI.key_env) == (["GOOGLE_GEMINI_BASE_URL"], ["GEMINI_API_KEY"])
    assert GeminiAgent.npm == (PACKAGE,)
