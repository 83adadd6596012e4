"""`claude_code`: Anthropic's Claude Code CLI, headless (`claude -p`), through the gateway.

Isolation: a fresh `CLAUDE_CONFIG_DIR` and HOME per run (so no user CLAUDE.md, settings,
memory, credentials or session history reach it), only project and local settings
(`--setting-sources project,local`), no MCP servers (`--strict-mcp-config` with an empty
list), auto memory and every non-essential network call off. Not `--bare`: that would
also skip the repository's CLAUDE.md, which is what is being measured. Claude Code does
not read AGENTS.md natively (see `instruction_files`).

Telemetry comes from its stream-json events: the final `result` event carries the answer
text, `num_turns`, usage and `total_cost_usd`; tool calls and commands come from the
assistant's `tool_use` blocks and their `tool_result`s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from docdelta.agents.base import (
    Agent,
    AgentContext,
    GatewayAgent,
    Invocation,
    classify,
    failed_stderr,
    parse_answer,
    status_for_api_error,
    stdout_events,
    workspace_relative,
)
from docdelta.agents.models import AgentMetrics, AgentOutcome, CommandRun, RunStatus
from docdelta.sandbox.base import ExecResult, Sandbox

VERSION = "2.1.332"
PACKAGE = f"@anthropic-ai/claude-code@{VERSION}"
DEFAULT_MODEL = "claude-sonnet-4-5"
"""The model without `--model`: one the price table holds. The pinned CLI's own default is a
model the table has no price for, so the gateway would refuse every call of a workflow
copied as shipped."""
MAX_OUTPUT_TOKENS = 32_000
"""Claude Code's per-call output cap. Its own (about 128k tokens) is what the gateway must
pre-authorise per call, which at the default model's price nearly fills the default run
budget on its own; 32k is more than a task's answer needs."""

_SETTINGS = {"autoMemoryEnabled": False, "includeCoAuthoredBy": False, "cleanupPeriodDays": 1}
_ENV = {
    # Everything a headless, measured run must not do: update itself, phone home, or
    # spend model calls on anything but the task.
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "IS_SANDBOX": "1",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(MAX_OUTPUT_TOKENS),
}
_EXIT_CODE = re.compile(r"(?:^|\n)(?:Error: )?Exit code (\d+)")
_RATE_LIMITED = re.compile(r"\b429\b|rate[ _-]?limit", re.IGNORECASE)


class ClaudeCodeAgent(GatewayAgent):
    name: ClassVar[str] = "claude_code"
    npm: ClassVar[tuple[str, ...]] = (PACKAGE,)
    """What `agents.images.agent_image` installs for this agent."""
    pinned: ClassVar[str] = VERSION
    upstream: ClassVar[str | None] = "anthropic"
    default_model: ClassVar[str | None] = DEFAULT_MODEL
    reads_from_tool_stream: ClassVar[bool] = True

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        home = f"{sandbox.tools_dir}/claude-home"
        config = f"{sandbox.tools_dir}/claude-config"
        argv = [
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--max-turns",
            str(self.turns(ctx.max_turns)),
            # The container is the sandbox: no permission prompt can be answered headless.
            "--permission-mode",
            "bypassPermissions",
            "--no-session-persistence",
            "--setting-sources",
            "project,local",
            "--strict-mcp-config",
            "--mcp-config",
            json.dumps({"mcpServers": {}}),
            "--settings",
            json.dumps(_SETTINGS),
        ]
        if self._model:
            argv += ["--model", self._model]
        # Key and base URL come from the sandbox's gateway env (ANTHROPIC_BASE_URL and a
        # placeholder ANTHROPIC_API_KEY); nothing here names either.
        env = {**_ENV, "HOME": home, "CLAUDE_CONFIG_DIR": config}
        if ctx.api_retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(ctx.api_retries)
        # Writing a file creates the fresh directories; the config dir starts empty.
        files = {f"{home}/.keep": b"", f"{config}/.keep": b""}
        return Invocation(argv=argv, env=env, stdin=prompt.encode(), files=files)

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        return outcome_from_events(stdout_events(result), result, workspace=sandbox.workspace, agent=self)


def outcome_from_events(
    events: Sequence[Mapping[str, Any]], result: ExecResult, *, workspace: str, agent: Agent
) -> AgentOutcome:
    """The normalized outcome of one `claude -p --output-format stream-json` run."""
    uses: list[Mapping[str, Any]] = []
    outputs: dict[str, Mapping[str, Any]] = {}
    texts: list[str] = []
    final: Mapping[str, Any] = {}
    model: str | None = agent.model
    for event in events:
        kind = event.get("type")
        content = (event.get("message") or {}).get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        if kind == "system" and event.get("subtype") == "init":
            model = model or event.get("model")
        elif kind == "assistant":
            uses += [b for b in blocks if b.get("type") == "tool_use"]
            texts += [b.get("text", "") for b in blocks if b.get("type") == "text"]
        elif kind == "user":
            outputs |= {b.get("tool_use_id", ""): b for b in blocks if b.get("type") == "tool_result"}
        elif kind == "result":
            final = event
    last = final.get("result")
    text = last if isinstance(last, str) else "\n".join(texts)
    answer, why = parse_answer(text)
    error = _error(final, result)
    status = _status(final, error, classify(result, answer))
    return agent.make_outcome(
        status,
        model=model,
        answer=answer,
        final_text=text,
        metrics=_metrics(final, uses, outputs, workspace),
        exit_code=result.exit_code,
        error=error or (why if answer is None else None),
    )


def _metrics(
    final: Mapping[str, Any],
    uses: Sequence[Mapping[str, Any]],
    outputs: Mapping[str, Mapping[str, Any]],
    workspace: str,
) -> AgentMetrics:
    usage = final.get("usage") or {}
    commands = [
        CommandRun(command=str(u["input"]["command"]), exit_code=_exit_code(outputs.get(u.get("id", ""))))
        for u in uses
        if u.get("name") == "Bash" and isinstance((u.get("input") or {}).get("command"), str)
    ]
    reads = [
        workspace_relative(str(u["input"]["file_path"]), workspace)
        for u in uses
        if u.get("name") == "Read" and isinstance((u.get("input") or {}).get("file_path"), str)
    ]
    reads += [path for u in uses if (path := _skill_file(u)) is not None]
    duration = final.get("duration_ms")
    return AgentMetrics(
        tokens_in=usage.get("input_tokens"),
        tokens_out=usage.get("output_tokens"),
        cache_read_tokens=usage.get("cache_read_input_tokens"),
        cache_write_tokens=usage.get("cache_creation_input_tokens"),
        cost_usd=final.get("total_cost_usd"),
        turns=final.get("num_turns"),
        tool_calls=len(uses),
        commands=commands,
        files_read=list(dict.fromkeys(reads)),
        duration_s=duration / 1000 if isinstance(duration, int | float) else 0.0,
    )


def _skill_file(use: Mapping[str, Any]) -> str | None:
    """The project skill a `Skill` tool call loads (`{"skill": "release"}`): Claude Code injects
    `.claude/skills/<name>/SKILL.md` into the conversation, a read without a Read call. A
    plugin's skill (`plugin:name`) is no file of the repository."""
    name = (use.get("input") or {}).get("skill") if use.get("name") == "Skill" else None
    if not isinstance(name, str) or not name or ":" in name or "/" in name or name.startswith("."):
        return None
    return f".claude/skills/{name}/SKILL.md"


def _exit_code(output: Mapping[str, Any] | None) -> int | None:
    """A Bash tool_result's exit code: 0 unless flagged as an error, whose text names it."""
    if output is None:
        return None
    if not output.get("is_error"):
        return 0
    match = _EXIT_CODE.search(_text(output.get("content")))
    return int(match.group(1)) if match else None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "")


def _status(final: Mapping[str, Any], error: str | None, fallback: RunStatus) -> RunStatus:
    """The sharpest status the events support; `fallback` (from the answer and exit code)
    when the run ended normally."""
    if final.get("subtype") == "error_max_turns":
        return RunStatus.max_turns
    if final.get("terminal_reason") == "api_error":  # the model API failed: its HTTP status says whose fault
        return status_for_api_error(final.get("api_error_status"))
    if error is not None and _RATE_LIMITED.search(error):
        return RunStatus.rate_limited
    if error is not None and fallback is RunStatus.ok:
        return RunStatus.agent_error  # an answer was printed, but the CLI says the run failed
    return fallback


def _error(final: Mapping[str, Any], result: ExecResult) -> str | None:
    """What went wrong, from the result event, else from stderr when the CLI failed."""
    if final.get("is_error") or final.get("subtype", "success") != "success":
        return str(final.get("result") or final.get("subtype"))[-2000:]
    return failed_stderr(result)
