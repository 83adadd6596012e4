"""`opencode`: the OpenCode CLI, headless (`opencode run --format json`), through the gateway.

Configuration arrives in `OPENCODE_CONFIG_CONTENT`, which OpenCode merges last (after the
repository's own opencode.json), so our provider, permissions and switches win while the
repository's `instructions` still load as they would for a user. The provider is
OpenAI-compatible and reads the gateway's route and the placeholder key from the
environment the sandbox provides (`{env:OPENAI_BASE_URL}`, `{env:OPENAI_API_KEY}`), so
nothing here names either.

Isolation: HOME and every XDG directory are fresh per run, so no global opencode.json,
`~/.config/opencode/AGENTS.md` or `~/.claude/CLAUDE.md` exists to be loaded. The
session-title call is switched off (it would spend a model call, and a script turn, on
something that is not the task).

Which instruction files OpenCode 1.18.33 loads (read from its source and checked against
the scripted server's request log): globally the first of `~/.config/opencode/AGENTS.md`
and `~/.claude/CLAUDE.md`; in the project, walking up from the working directory, the
FIRST file name of AGENTS.md, CLAUDE.md, CONTEXT.md that exists anywhere on that walk
(every match of that one name, none of the others) — so a repository with both AGENTS.md
and CLAUDE.md gets only AGENTS.md. The Claude Code fallbacks are left ON on purpose:
`OPENCODE_DISABLE_CLAUDE_CODE` (and `_PROMPT`) would also stop the project's CLAUDE.md
from loading, which a real OpenCode user gets, and the global `~/.claude` files they
guard against cannot exist under the fresh HOME.

Telemetry comes from its JSON events: one `step_finish` per model call (tokens, cost,
finish reason), `tool_use` parts (bash commands with their exit codes, read paths),
`text` parts (the answer) and `error` events (the API's status code).
"""

from __future__ import annotations

import json
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
from docdelta.agents.models import AgentMetrics, AgentOutcome, CommandRun, RunStatus
from docdelta.sandbox.base import ExecResult, Sandbox

VERSION = "1.18.33"
PACKAGE = f"opencode-ai@{VERSION}"
PROVIDER = "docdelta"
"""The provider id in OpenCode's config: the model is `docdelta/<model>`."""
DEFAULT_MODEL = "gpt-4o-mini"

_ENV = {
    # A measured run must not update itself, fetch the models.dev catalogue, download
    # language servers or install its default (auth) plugins from npm.
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


class OpenCodeAgent(GatewayAgent):
    name: ClassVar[str] = "opencode"
    upstream: ClassVar[str | None] = "openai"
    reads_from_tool_stream: ClassVar[bool] = True
    npm: ClassVar[tuple[str, ...]] = (PACKAGE,)
    """What `agents.images.agent_image` installs for this agent."""
    pinned: ClassVar[str] = VERSION
    default_model: ClassVar[str | None] = DEFAULT_MODEL

    def config(self, ctx: AgentContext) -> dict[str, Any]:
        """The OpenCode config of one run (see the module docstring for each choice)."""
        return {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            # The container is the sandbox: no permission prompt can be answered headless.
            "permission": "allow",
            "model": f"{PROVIDER}/{self.required_model}",
            # `steps` caps the agent loop's model calls (OpenCode then asks for a final answer).
            "agent": {"title": {"disable": True}, "build": {"steps": self.turns(ctx.max_turns)}},
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "docdelta gateway",
                    "options": {"baseURL": "{env:OPENAI_BASE_URL}", "apiKey": "{env:OPENAI_API_KEY}"},
                    "models": {self.required_model: {"name": self.required_model}},
                }
            },
        }

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        home = f"{sandbox.tools_dir}/opencode-home"
        env = {
            **_ENV,
            **fresh_home(home),
            "OPENCODE_CONFIG_CONTENT": json.dumps(self.config(ctx)),
        }
        # The prompt goes on stdin (OpenCode appends stdin to the message), not into argv.
        argv = ["opencode", "run", "--format", "json", "-m", f"{PROVIDER}/{self.required_model}"]
        return Invocation(argv=argv, env=env, stdin=prompt.encode(), files={f"{home}/.keep": b""})

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        return self.outcome(
            stdout_events(result), result, workspace=sandbox.workspace, max_turns=self.turns(ctx.max_turns)
        )

    def outcome(
        self, events: Sequence[Mapping[str, Any]], result: ExecResult, *, workspace: str, max_turns: int
    ) -> AgentOutcome:
        """The normalized outcome of one `opencode run --format json` run.

        A parser of its own: OpenCode's events (`part` payloads, one `step_finish` with tokens
        per model call, `tool_use` parts carrying their own state) share no shape with
        Copilot's or the other CLIs' streams."""
        parts = [e.get("part") or {} for e in events]
        steps = [p for e, p in zip(events, parts, strict=True) if e.get("type") == "step_finish"]
        tools = [p for e, p in zip(events, parts, strict=True) if e.get("type") == "tool_use"]
        text = "\n".join(
            str(p.get("text", "")) for e, p in zip(events, parts, strict=True) if e.get("type") == "text"
        )
        answer, why = parse_answer(text)
        errors = [e.get("error") or {} for e in events if e.get("type") == "error"]
        status = classify(result, answer)
        error = _describe(errors[-1]) if errors else None
        if answer is None and errors:
            status = status_for_api_error((errors[-1].get("data") or {}).get("statusCode"))
        elif answer is None and len(steps) >= max_turns:
            status = RunStatus.max_turns
        if error is None and answer is None:
            error = failed_stderr(result)
        return self.make_outcome(
            status,
            answer=answer,
            final_text=text,
            metrics=_metrics(steps, tools, workspace),
            exit_code=result.exit_code,
            error=error or (why if answer is None else None),
        )


def _metrics(
    steps: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], workspace: str
) -> AgentMetrics:
    tokens = [s.get("tokens") or {} for s in steps]
    costs = [float(s.get("cost") or 0) for s in steps]
    commands = [
        CommandRun(command=str(_input(t)["command"]), exit_code=_exit_code(t))
        for t in tools
        if t.get("tool") == "bash" and isinstance(_input(t).get("command"), str)
    ]
    reads = [
        workspace_relative(str(_input(t)["filePath"]), workspace)
        for t in tools
        if t.get("tool") == "read" and isinstance(_input(t).get("filePath"), str)
    ]
    return AgentMetrics(
        tokens_in=sum(int(t.get("input") or 0) for t in tokens) if steps else None,
        # OpenCode splits reasoning out of the output count; the API bills both as output.
        tokens_out=sum(int(t.get("output") or 0) + int(t.get("reasoning") or 0) for t in tokens)
        if steps
        else None,
        cache_read_tokens=sum(int((t.get("cache") or {}).get("read") or 0) for t in tokens)
        if steps
        else None,
        cache_write_tokens=sum(int((t.get("cache") or {}).get("write") or 0) for t in tokens)
        if steps
        else None,
        # OpenCode prices calls only for models it has a price for, and our provider's model
        # has none: its 0 means "unknown", so it is reported only when it is not 0.
        cost_usd=sum(costs) or None,
        turns=len(steps),
        tool_calls=len(tools),
        commands=commands,
        files_read=list(dict.fromkeys(reads)),
    )


def _input(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    value = (tool.get("state") or {}).get("input")
    return value if isinstance(value, dict) else {}


def _exit_code(tool: Mapping[str, Any]) -> int | None:
    """A bash call's exit code (`state.metadata.exit`); None when it never ran to an end."""
    code = ((tool.get("state") or {}).get("metadata") or {}).get("exit")
    return code if isinstance(code, int) else None


def _describe(error: Mapping[str, Any]) -> str:
    """`APIError (429): slow down`, from an `error` event's `{name, data: {message, statusCode}}`."""
    data = error.get("data") or {}
    code = data.get("statusCode")
    head = f"{error.get('name', 'error')} ({code})" if code is not None else str(error.get("name", "error"))
    return f"{head}: {data.get('message', '')}"[:2000]
