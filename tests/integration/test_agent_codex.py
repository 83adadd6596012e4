"""The Codex adapter: its command line, its CODEX_HOME config, and its parser on JSONL
recorded from the real CLI (0.171.0) against the scripted model server through the gateway
(tests/fixtures/agents/codex/<case>/: stdout.jsonl and the exec's exit code)."""

from __future__ import annotations

import subprocess
import tomllib
from dataclasses import replace
from pathlib import Path

from recorded_agents import recorded_run, recording_sandbox

from docdelta.agents import AgentContext, get_agent
from docdelta.agents.codex import PROVIDER, VERSION, CodexAgent
from docdelta.agents.models import AgentOutcome, CommandRun, RunStatus
from docdelta.sandbox.base import ExecResult, SandboxSpec
from docdelta.sandbox.local import LocalProvider

CTX = AgentContext(seed=1)


def recorded(case: str) -> ExecResult:
    return recorded_run("codex", case)


SANDBOX = recording_sandbox()


def parse(result: ExecResult, agent: CodexAgent | None = None) -> AgentOutcome:
    return (agent or CodexAgent(model="gpt-4.1-mini")).parse(result, SANDBOX, CTX)


def test_a_finished_run_yields_the_answer_commands_and_summed_usage() -> None:
    outcome = parse(recorded("ok"))
    assert outcome.status is RunStatus.ok and outcome.error is None
    assert outcome.answer is not None and outcome.answer.files == ["CLAUDE.md"]
    m = outcome.metrics
    # Script: shell `cat AGENTS.md`, shell `ls missing-dir` (exit 2), answer. Codex wraps each
    # command in `/bin/sh -lc '...'`; the adapter reports the command the model asked for.
    assert m.commands == [
        CommandRun(command="cat AGENTS.md", exit_code=0),
        CommandRun(command="ls missing-dir", exit_code=2),
    ]
    # Three model calls: two tool calls and the answer (the gateway logged three too).
    assert (m.tool_calls, m.turns) == (2, 3)
    assert (m.tokens_in, m.tokens_out, m.cache_read_tokens) == (31446, 34, 0)
    assert m.cost_usd is None  # Codex reports no cost: the gateway's log prices the calls
    # A non-fatal `error` item (unknown model metadata) in the stream is not a failure.
    assert outcome.model == "gpt-4.1-mini" and outcome.agent_version == VERSION


def test_a_429_after_the_retries_is_rate_limited() -> None:
    outcome = parse(recorded("rate_limited"))
    assert outcome.status is RunStatus.rate_limited
    assert outcome.error == "exceeded retry limit, last status: 429 Too Many Requests"
    assert (outcome.metrics.turns, outcome.metrics.tool_calls, outcome.metrics.tokens_in) == (1, 0, None)


def test_an_unreachable_model_server_is_an_infra_error() -> None:
    # Recorded through the real gateway, whose upstream's name does not resolve (HTTP 502).
    outcome = parse(recorded("upstream_unreachable"))
    assert outcome.status is RunStatus.infra_error
    assert outcome.error is not None and outcome.error.startswith(
        "unexpected status 502 Bad Gateway: upstream failed"
    )


def test_a_cli_that_prints_nothing_is_an_agent_error_with_its_stderr() -> None:
    outcome = parse(ExecResult(2, b"", b"error: unknown config key", 0.1))
    assert outcome.status is RunStatus.agent_error
    assert outcome.error == "error: unknown config key"
    assert outcome.metrics.turns is None


def test_the_command_line_and_config_point_codex_at_the_gateway_only(tmp_path: Path) -> None:
    agent = get_agent("codex", model="gpt-4.1-mini")
    (tmp_path / "co").mkdir()
    with LocalProvider(root=tmp_path / "sb").create(tmp_path / "co", SandboxSpec()) as sandbox:
        inv = agent.invocation("the prompt", sandbox, replace(CTX, api_retries=0))
    assert inv.stdin == b"the prompt" and inv.argv[-1] == "-"
    for flag in (
        "--json",
        "--skip-git-repo-check",
        "--ephemeral",
        "--dangerously-bypass-approvals-and-sandbox",
    ):
        assert flag in inv.argv
    assert inv.argv[inv.argv.index("--model") + 1] == "gpt-4.1-mini"
    home = inv.env["CODEX_HOME"]
    assert home.startswith(sandbox.tools_dir) and inv.env["HOME"].startswith(sandbox.tools_dir)
    config = tomllib.loads(inv.files[f"{home}/config.toml"].decode())
    provider = config["model_providers"][PROVIDER]
    assert config["model_provider"] == PROVIDER
    assert (provider["wire_api"], provider["env_key"]) == ("responses", "OPENAI_API_KEY")
    assert (provider["request_max_retries"], provider["stream_max_retries"]) == (0, 0)
    # The base URL is the sandbox's OPENAI_BASE_URL, passed by the launching shell.
    echo = ["sh", "-c", inv.argv[2].replace("exec codex", "printf '%s\\n'"), *inv.argv[3:]]
    out = subprocess.run(
        echo,
        env={"OPENAI_BASE_URL": "http://gateway:8080/openai"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert f'model_providers.{PROVIDER}.base_url="http://gateway:8080/openai"' in out.stdout.splitlines()
    assert "exec" in out.stdout.splitlines()


def test_it_declares_agents_md() -> None:
    assert CodexAgent().instruction_files == ["AGENTS.md", "AGENTS.override.md"]
    assert CodexAgent.npm == (f"@openai/codex@{VERSION}",)
