"""`gemini`: Google's Gemini CLI, headless (`gemini -p "" -o json`), through the gateway.

Gemini CLI speaks only Google's Gemini API (`/v1beta/models/<model>:streamGenerateContent`);
it has no OpenAI-compatible mode. It reaches the gateway through `GOOGLE_GEMINI_BASE_URL`
(its "gateway" auth type) with a placeholder `GEMINI_API_KEY`, so the gateway needs a
Gemini upstream (`GEMINI` below: key in the `x-goog-api-key` header). docdelta's scripted
model server speaks this API too, so the real CLI runs end to end in the Docker tests.

Isolation: a fresh `GEMINI_CLI_HOME` (and HOME) holding only our settings.json, so no user
settings, GEMINI.md memory, extensions, policies or credentials exist; `-e none` loads no
extension either way. `-m` names the model, which also skips the CLI's model router (an
extra classifier call on a flash-lite model per prompt). Tools run unattended (`--approval-
mode yolo`): the container is the sandbox.

Instruction files: `context.fileName` is set to the CLI's own default, `["GEMINI.md"]`, and
recorded here on purpose. Gemini CLI ignores AGENTS.md unless told to read it, and docdelta
measures the repository's docs as the agent would really load them, so the adapter does
NOT add AGENTS.md; a project that configures it in `.gemini/settings.json` gets it (the
workspace settings are the repository's own and still load).

Telemetry: `-o json` prints one object `{session_id, response, stats, error}` where
`stats.models[<model>].tokens` holds `prompt` (input including cached), `cached`,
`candidates` and `thoughts`, and `stats.tools.totalCalls` the tool calls. It lists no
commands, exit codes or file paths, and its request counts include the CLI's internal
calls, so commands, files read and turns are left unreported (None / empty), never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from docdelta.agents.base import (
    AgentContext,
    GatewayAgent,
    Invocation,
    classify,
    failed_stderr,
    parse_answer,
    status_for_api_error,
)
from docdelta.agents.models import AgentMetrics, AgentOutcome
from docdelta.sandbox.base import ExecResult, Sandbox

VERSION = "0.61.0"
PACKAGE = f"@google/gemini-cli@{VERSION}"
DEFAULT_MODEL = "gemini-2.5-flash"
CONTEXT_FILE_NAMES = ["GEMINI.md"]
"""`context.fileName`: the CLI's default, stated explicitly (see the module docstring)."""


class GeminiAgent(GatewayAgent):
    name: ClassVar[str] = "gemini"
    upstream: ClassVar[str | None] = "gemini"
    npm: ClassVar[tuple[str, ...]] = (PACKAGE,)
    """What `agents.images.agent_image` installs for this agent."""
    pinned: ClassVar[str] = VERSION
    default_model: ClassVar[str | None] = DEFAULT_MODEL

    def settings(self, ctx: AgentContext) -> dict[str, Any]:
        """The user settings.json of one run."""
        return {
            "context": {"fileName": CONTEXT_FILE_NAMES},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            # The checkout is trusted by construction; the gateway route is the only auth.
            "security": {"folderTrust": {"enabled": False}, "auth": {"selectedType": "gemini-api-key"}},
            "model": {"maxSessionTurns": self.turns(ctx.max_turns)},
        }

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        home = f"{sandbox.tools_dir}/gemini-home"
        settings = json.dumps(self.settings(ctx), indent=2).encode()
        # `-p ""` makes the run headless; the prompt itself arrives on stdin, which the CLI
        # prepends to `-p`, so it never appears in argv.
        argv = [
            "gemini",
            "-p",
            "",
            "-o",
            "json",
            "-m",
            self.required_model,
            "-e",
            "none",
            "--approval-mode",
            "yolo",
        ]
        env = {"HOME": home, "GEMINI_CLI_HOME": home}
        return Invocation(
            argv=argv, env=env, stdin=prompt.encode(), files={f"{home}/.gemini/settings.json": settings}
        )

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        # A failed run prints its `{session_id, error}` object to stderr, after a stack trace.
        output = _last_object(result.stdout) or _last_object(result.stderr)
        return self.outcome(output, result)

    def outcome(self, output: Mapping[str, Any], result: ExecResult) -> AgentOutcome:
        """The normalized outcome of one `gemini -o json` run (its one output object)."""
        text = output.get("response")
        text = text if isinstance(text, str) else ""
        answer, why = parse_answer(text)
        status = classify(result, answer)
        error_obj = output.get("error")
        error: str | None = None
        if isinstance(error_obj, dict):
            error = (
                f"{error_obj.get('type', 'Error')} ({error_obj.get('code')}): {error_obj.get('message', '')}"
            )
            if answer is None:
                status = status_for_api_error(error_obj.get("code"))
        elif answer is None and not output:
            error = failed_stderr(result)
        return self.make_outcome(
            status,
            answer=answer,
            final_text=text,
            metrics=_metrics(output.get("stats")),
            exit_code=result.exit_code,
            error=(error or (why if answer is None else None)),
        )


def _metrics(stats: Any) -> AgentMetrics:
    if not isinstance(stats, dict):
        return AgentMetrics()
    models = [m.get("tokens") or {} for m in (stats.get("models") or {}).values() if isinstance(m, dict)]
    tools = stats.get("tools") or {}

    def total(key: str) -> int:
        return sum(int(t.get(key) or 0) for t in models)

    return AgentMetrics(
        tokens_in=total("prompt") - total("cached"),  # `prompt` counts cached input too
        tokens_out=total("candidates") + total("thoughts"),
        cache_read_tokens=total("cached"),
        tool_calls=tools.get("totalCalls") if isinstance(tools.get("totalCalls"), int) else None,
    )


def _last_object(data: bytes) -> dict[str, Any]:
    """The output object: the CLI prints it pretty (indented) as the last thing on a stream."""
    text = data.decode("utf-8", errors="replace")
    start = text.rfind("\n{")
    candidate = text[start + 1 :] if start != -1 else text
    try:
        value = json.loads(candidate)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
