"""The Claude Code adapter: its command line and isolation, and its parser on stream-json
recorded from the real CLI (2.1.332) against the scripted model server through the gateway
(tests/fixtures/agents/claude_code/<case>/: stdout.jsonl and the exec's exit code)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from recorded_agents import recorded_run, recording_sandbox

from docdelta.agents import AgentContext, get_agent
from docdelta.agents.claude_code import VERSION, ClaudeCodeAgent, outcome_from_events
from docdelta.agents.models import AgentOutcome, CommandRun, RunStatus
from docdelta.sandbox.base import ExecResult, SandboxSpec
from docdelta.sandbox.local import LocalProvider

CTX = AgentContext(seed=1)


def recorded(case: str) -> ExecResult:
    return recorded_run("claude_code", case)


SANDBOX = recording_sandbox()


def parse(result: ExecResult) -> AgentOutcome:
    return ClaudeCodeAgent().parse(result, SANDBOX, CTX)


def test_a_finished_run_yields_the_answer_and_the_result_events_numbers() -> None:
    outcome = parse(recorded("ok"))
    assert outcome.status is RunStatus.ok
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    assert outcome.model == "claude-sonnet-4-5"  # from the init event when none was asked for
    m = outcome.metrics
    # Script: Bash `cat CLAUDE.md`, Bash `ls missing-dir` (exit 2), Read README.md, answer.
    assert m.commands == [
        CommandRun(command="cat CLAUDE.md", exit_code=0),
        CommandRun(command="ls missing-dir", exit_code=2),
    ]
    assert (m.tool_calls, m.turns, m.files_read) == (3, 4, ["README.md"])
    # The four model calls' usage as the server reported it (and the gateway logged it).
    assert (m.tokens_in, m.tokens_out, m.cache_read_tokens, m.cache_write_tokens) == (76353, 46, 0, 0)
    assert m.cost_usd == pytest.approx(0.229749)
    assert m.duration_s == pytest.approx(1.174)
    assert outcome.error is None and outcome.agent_version == VERSION


def test_hitting_the_turn_cap_is_max_turns_not_a_wrong_answer() -> None:
    outcome = parse(recorded("max_turns"))
    assert outcome.status is RunStatus.max_turns
    assert outcome.answer is None
    assert [c.command for c in outcome.metrics.commands] == ["true", "true"]


def test_an_api_429_is_rate_limited_with_the_apis_message() -> None:
    outcome = parse(recorded("rate_limited"))
    assert outcome.status is RunStatus.rate_limited
    assert outcome.error is not None and "429" in outcome.error
    assert outcome.metrics.tool_calls == 0


def test_an_unreachable_model_server_is_an_infra_error() -> None:
    # Recorded through the real gateway, whose upstream's name does not resolve: it answers
    # 502 `upstream failed: ... Name or service not known`, which is never the agent's fault.
    outcome = parse(recorded("upstream_unreachable"))
    assert outcome.status is RunStatus.infra_error
    assert outcome.error is not None and "502 upstream failed" in outcome.error


def test_a_cli_that_dies_before_any_event_is_an_agent_error_with_its_stderr() -> None:
    died = ExecResult(1, b"", b"Error: something broke", 0.1)
    outcome = parse(died)
    assert outcome.status is RunStatus.agent_error
    assert outcome.error == "Error: something broke"
    assert outcome.metrics.turns is None and outcome.metrics.cost_usd is None


def test_the_command_line_is_headless_isolated_and_keyless(tmp_path: Path) -> None:
    agent = get_agent("claude_code", model="claude-sonnet-4-5", max_turns=7)
    (tmp_path / "co").mkdir()
    with LocalProvider(root=tmp_path / "sb").create(tmp_path / "co", SandboxSpec()) as sandbox:
        inv = agent.invocation("the prompt", sandbox, AgentContext(seed=1, max_turns=3, api_retries=0))
    argv = inv.argv
    assert argv[:2] == ["claude", "-p"] and inv.stdin == b"the prompt"
    flag = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}
    assert flag["--output-format"] == "stream-json" and "--verbose" in argv
    assert flag["--max-turns"] == "3"  # the run's cap wins over the adapter's default
    assert flag["--permission-mode"] == "bypassPermissions"
    assert flag["--setting-sources"] == "project,local"
    assert json.loads(flag["--mcp-config"]) == {"mcpServers": {}} and "--strict-mcp-config" in argv
    assert json.loads(flag["--settings"])["autoMemoryEnabled"] is False
    assert "--no-session-persistence" in argv and "--bare" not in argv
    assert flag["--model"] == "claude-sonnet-4-5"
    # Fresh config and home under the tools dir, created by the files written before the run.
    assert inv.env["CLAUDE_CONFIG_DIR"].startswith(sandbox.tools_dir)
    assert inv.env["HOME"].startswith(sandbox.tools_dir)
    assert {p.rsplit("/", 1)[0] for p in inv.files} == {inv.env["CLAUDE_CONFIG_DIR"], inv.env["HOME"]}
    assert inv.env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert inv.env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == "1"
    # Key and URL come from the gateway's env, never from the adapter.
    assert not any("ANTHROPIC" in k for k in inv.env)


def test_it_declares_claude_files_and_not_agents_md() -> None:
    reads = ClaudeCodeAgent().instruction_files
    assert "CLAUDE.md" in reads and "CLAUDE.local.md" in reads
    assert not any("AGENTS" in glob for glob in reads)
    assert ClaudeCodeAgent().network == "gateway"
    assert ClaudeCodeAgent.npm == (f"@anthropic-ai/claude-code@{VERSION}",)


def test_a_skill_tool_call_is_a_read_of_that_skills_file() -> None:
    """Claude Code loads a skill with its `Skill` tool, not with Read: trigger grading takes the
    call as a read of `.claude/skills/<name>/SKILL.md` (a plugin's skill names no project file)."""
    uses = [
        {"type": "tool_use", "id": "s1", "name": "Skill", "input": {"skill": "release"}},
        {"type": "tool_use", "id": "s2", "name": "Skill", "input": {"skill": "office:pdf"}},
        {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "/workspace/repo/README.md"}},
    ]
    events: list[dict[str, Any]] = [
        {"type": "assistant", "message": {"content": uses}},
        {"type": "result", "subtype": "success", "result": '{"answer": "done"}', "num_turns": 2},
    ]
    outcome = outcome_from_events(
        events, ExecResult(0, b"", b"", 1.0), workspace="/workspace/repo", agent=ClaudeCodeAgent()
    )
    assert outcome.metrics.files_read == ["README.md", ".claude/skills/release/SKILL.md"]
