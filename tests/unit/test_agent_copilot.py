"""The Copilot CLI adapter: its command line (keyless, offline, isolated), and its parser on
JSON events recorded from the real CLI (1.0.102, `--output-format json`) against the scripted
model server in BYOK offline mode (tests/fixtures/agents/copilot/<case>/: stdout.jsonl and
the exec's exit code; recorded with the checkout at /tmp/copilot-record/repo)."""

from __future__ import annotations

from recorded_agents import recorded_run, recording_sandbox

from docdelta.agents import AgentContext, agent_names, get_agent
from docdelta.agents.copilot import PACKAGE, VERSION, CopilotAgent
from docdelta.agents.models import AgentOutcome, CommandRun, RunStatus
from docdelta.sandbox.base import ExecResult

CTX = AgentContext(seed=1)


SANDBOX = recording_sandbox("/tmp/copilot-record/repo")


def recorded(case: str) -> ExecResult:
    return recorded_run("copilot", case)


def parse(result: ExecResult) -> AgentOutcome:
    return CopilotAgent().parse(result, SANDBOX, CTX)


def test_a_finished_run_yields_the_answer_commands_exit_codes_and_viewed_files() -> None:
    outcome = parse(recorded("ok"))
    assert outcome.status is RunStatus.ok, outcome.error
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    m = outcome.metrics
    # Script: shell `cat AGENTS.md`, shell `ls missing-dir` (exit 2), view of an absolute path
    # inside the checkout, answer: four model calls, three tool calls.
    assert m.commands == [
        CommandRun(command="cat AGENTS.md", exit_code=0),
        CommandRun(command="ls missing-dir", exit_code=2),
    ]
    assert (m.turns, m.tool_calls, m.files_read) == (4, 3, ["README.md"])
    assert m.tokens_in is None  # Copilot's events carry no token counts; the gateway counts them
    assert outcome.final_text.startswith("Let me read the notes.")
    assert (outcome.error, outcome.agent_version, outcome.model) == (None, VERSION, "gpt-4o-mini")


def test_a_429_after_the_clis_own_retries_is_rate_limited_with_its_message() -> None:
    outcome = parse(recorded("rate_limited"))
    assert outcome.status is RunStatus.rate_limited
    assert outcome.error is not None and "429 Rate limit reached for requests" in outcome.error
    assert outcome.metrics.turns == 0


def test_a_cli_that_dies_before_any_event_is_an_agent_error_with_its_stderr() -> None:
    outcome = parse(ExecResult(1, b"", b"GitHub Copilot CLI: no platform package found.", 0.4))
    assert outcome.status is RunStatus.agent_error
    assert outcome.error is not None and "no platform package" in outcome.error


def test_the_command_line_is_headless_offline_isolated_and_keyless() -> None:
    assert "copilot" in agent_names()
    agent = get_agent("copilot", model="my-model")
    assert isinstance(agent, CopilotAgent) and agent.network == "gateway"
    assert agent.turn_cap(5) is None  # the CLI takes no turn limit: none is claimed
    inv = agent.invocation("the prompt", SANDBOX, CTX)
    shell, flag, script, name, *args = inv.argv
    assert (shell, flag, name) == ("sh", "-c", "copilot")
    # The gateway's route and placeholder key, known only inside the sandbox, become BYOK's.
    assert 'COPILOT_PROVIDER_BASE_URL="$OPENAI_BASE_URL"' in script
    assert 'COPILOT_PROVIDER_API_KEY="$OPENAI_API_KEY"' in script
    assert script.endswith('exec copilot "$@"')
    assert args[:2] == ["-p", "the prompt"]
    assert {"--allow-all-tools", "--disable-builtin-mcps", "--disable-client-telemetry"} <= set(args)
    assert args[args.index("--output-format") + 1] == "json"
    env = inv.env
    assert (env["COPILOT_OFFLINE"], env["COPILOT_PROVIDER_TYPE"], env["COPILOT_MODEL"]) == (
        "true",
        "openai",
        "my-model",
    )
    home = "/workspace/tools/copilot-home"
    assert env["HOME"] == home and all(
        env[var].startswith(f"{home}/")
        for var in ("COPILOT_HOME", "COPILOT_PKG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
    )
    assert "COPILOT_PROVIDER_API_KEY" not in env and "GITHUB_TOKEN" not in " ".join(env)


def test_it_is_pinned_and_reads_the_files_copilot_reads() -> None:
    agent = CopilotAgent()
    assert agent.npm == (PACKAGE,) == ("@github/copilot@1.0.102",)
    assert "AGENTS.md" in set(agent.instruction_files)
