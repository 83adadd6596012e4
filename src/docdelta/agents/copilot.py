"""`copilot`: GitHub Copilot's CLI (npm `@github/copilot`), headless, through the gateway, keyless.

Copilot's bring-your-own-key mode is configured by environment variables, read from the
pinned CLI's own `copilot help environment` and its bundled code (1.0.102):
`COPILOT_PROVIDER_BASE_URL` (setting it switches BYOK on: "GitHub authentication is not
required"), `COPILOT_PROVIDER_TYPE` (openai, azure or anthropic), `COPILOT_PROVIDER_API_KEY`
and `COPILOT_MODEL`. `COPILOT_OFFLINE=true` then "skips all network access: GitHub
authentication, telemetry, web tools, GitHub MCP server, and auto-update". So the CLI
starts with no GitHub sign-in, and its only peer is the gateway: the sandbox's
OpenAI-compatible route and placeholder key (`OPENAI_BASE_URL`, `OPENAI_API_KEY`), which
the launcher hands over because only the shell inside the sandbox knows them.

Isolation: HOME, `COPILOT_HOME` and every XDG directory are fresh per run, so no user-level
`~/.copilot/copilot-instructions.md`, agents, skills or MCP config exists; the built-in MCP
servers are switched off. Copilot loads the repository's own instruction files
(AGENTS.md, `.github/copilot-instructions.md`, ...) into its first request, as a user gets.

The npm package is a loader for a native single-executable binary, which unpacks its
JavaScript (about 235 MB) into `COPILOT_PKG_CACHE_HOME` on first start: here once per run,
under the run's home.

Telemetry comes from its `--output-format json` events: `assistant.message` per model call
(the text and the tool calls it asked for), `tool.execution_start` / `tool.execution_complete`
(bash commands with their exit codes, viewed paths), `model.call_failure` (the API's status
code). The events carry no token counts; the gateway's own count is the run's usage. The CLI
has no turn cap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from docdelta.agents.base import (
    AgentContext,
    GatewayAgent,
    Invocation,
    classify,
    failed_stderr,
    fresh_home,
    parse_answer,
    status_for_api_error,
    stdout_events,
    workspace_relative,
)
from docdelta.agents.models import AgentMetrics, AgentOutcome, CommandRun
from docdelta.sandbox.base import ExecResult, Sandbox

VERSION = "1.0.102"
PACKAGE = f"@github/copilot@{VERSION}"
DEFAULT_MODEL = "gpt-4o-mini"

_ENV = {
    "COPILOT_OFFLINE": "true",
    "COPILOT_PROVIDER_TYPE": "openai",
    "COPILOT_AUTO_UPDATE": "false",
}
# The gateway's URL and placeholder key are only known inside the sandbox; "$@" is the rest.
_LAUNCH = (
    'COPILOT_PROVIDER_BASE_URL="$OPENAI_BASE_URL" COPILOT_PROVIDER_API_KEY="$OPENAI_API_KEY" '
    'exec copilot "$@"'
)
_FLAGS = (
    "--allow-all-tools",  # the container is the sandbox: no permission prompt can be answered headless
    "--output-format",
    "json",
    "--no-color",
    "--disable-builtin-mcps",
    "--disable-client-telemetry",
)


class CopilotAgent(GatewayAgent):
    name: ClassVar[str] = "copilot"
    upstream: ClassVar[str | None] = "openai"
    reads_from_tool_stream: ClassVar[bool] = True
    npm: ClassVar[tuple[str, ...]] = (PACKAGE,)
    """What `agents.images.agent_image` installs for this agent."""
    pinned: ClassVar[str] = VERSION
    default_model: ClassVar[str | None] = DEFAULT_MODEL

    def turn_cap(self, requested: int | None) -> int | None:
        return None  # Copilot's CLI takes no turn limit

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        home = f"{sandbox.tools_dir}/copilot-home"
        env = {
            **_ENV,
            **fresh_home(home),
            "COPILOT_MODEL": self.required_model,
            "COPILOT_HOME": f"{home}/.copilot",
            "COPILOT_CACHE_HOME": f"{home}/.cache/copilot",
            "COPILOT_PKG_CACHE_HOME": f"{home}/.cache/copilot-pkg",
        }
        argv = ["sh", "-c", _LAUNCH, "copilot", "-p", prompt, *_FLAGS]
        return Invocation(argv=argv, env=env, files={f"{home}/.keep": b""})

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        return self.outcome(stdout_events(result), result, workspace=sandbox.workspace)

    def outcome(
        self, events: Sequence[Mapping[str, Any]], result: ExecResult, *, workspace: str
    ) -> AgentOutcome:
        """The normalized outcome of one `copilot -p ... --output-format json` run.

        A parser of its own: Copilot's events (`type` plus a `data` payload, tool calls as
        `tool.execution_*` pairs, no token counts) share no shape with OpenCode's or the
        other CLIs' streams."""
        data: list[Mapping[str, Any]] = [_data(e) for e in events]
        kinds = [str(e.get("type", "")) for e in events]
        messages = [d for k, d in zip(kinds, data, strict=True) if k == "assistant.message"]
        text = "\n".join(str(m.get("content") or "") for m in messages)
        answer, why = parse_answer(text)
        failures = [d for k, d in zip(kinds, data, strict=True) if k == "model.call_failure"]
        errors = [d for k, d in zip(kinds, data, strict=True) if k == "session.error"]
        status = classify(result, answer)
        error = None
        if answer is None and (failures or errors):
            last = errors[-1] if errors else failures[-1]  # session.error: after the CLI's own retries
            status = status_for_api_error(last.get("statusCode"))
            error = str(last.get("message") or last.get("errorMessage") or "")[:2000]
        if error is None and answer is None:
            error = failed_stderr(result)
        return self.make_outcome(
            status,
            answer=answer,
            final_text=text,
            metrics=_metrics(kinds, data, len(messages), workspace),
            exit_code=result.exit_code,
            error=error or (why if answer is None else None),
        )


def _metrics(
    kinds: Sequence[str], data: Sequence[Mapping[str, Any]], turns: int, workspace: str
) -> AgentMetrics:
    started = [d for k, d in zip(kinds, data, strict=True) if k == "tool.execution_start"]
    exits = {
        d.get("toolCallId"): (d.get("shellExecution") or {}).get("exitCode")
        for k, d in zip(kinds, data, strict=True)
        if k == "tool.execution_complete"
    }
    commands = [
        CommandRun(command=str(_args(t)["command"]), exit_code=_exit(exits.get(t.get("toolCallId"))))
        for t in started
        if t.get("toolName") == "bash" and isinstance(_args(t).get("command"), str)
    ]
    reads = [
        workspace_relative(str(_args(t)["path"]), workspace)
        for t in started
        if t.get("toolName") == "view" and isinstance(_args(t).get("path"), str)
    ]
    return AgentMetrics(
        turns=turns,
        tool_calls=len(started),
        commands=commands,
        files_read=list(dict.fromkeys(reads)),
    )


def _data(event: Mapping[str, Any]) -> Mapping[str, Any]:
    value = event.get("data")
    return value if isinstance(value, dict) else {}


def _args(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    value = tool.get("arguments")
    return value if isinstance(value, dict) else {}


def _exit(code: Any) -> int | None:
    return code if isinstance(code, int) else None
