"""`codex`: OpenAI's Codex CLI, headless (`codex exec --json`), through the gateway.

Isolation: a fresh `CODEX_HOME` (so no user config.toml, AGENTS.md, auth, rules or
session history) and a fresh HOME per run, `--ephemeral` (nothing persisted), and a
config.toml that declares one model provider: the gateway's OpenAI route, spoken with
the Responses wire API (the only one Codex 0.171 speaks to custom providers), keyed by
the placeholder in OPENAI_API_KEY. `--strict-config` makes a config key this version
does not know an error instead of a silent no-op.

Codex's own sandbox is bypassed: it cannot start in our capability-less container, and
the container is the sandbox (no network but the gateway, read-only root, limits).

Its JSONL gives tokens per turn but neither cost nor a model-call count: turns are
counted from the events (one per tool call plus one per answer; see `_metrics`), and
cost is left to the gateway's log, priced per model (the runner takes tokens and cost
from there for every agent).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
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
)
from docdelta.agents.models import AgentMetrics, AgentOutcome, CommandRun, RunStatus
from docdelta.sandbox.base import ExecResult, Sandbox

VERSION = "0.171.0"
PACKAGE = f"@openai/codex@{VERSION}"
PROVIDER = "docdelta"

# The gateway's URL is only known inside the sandbox (OPENAI_BASE_URL), so the shell
# passes it as a config override; "$@" is the rest of the command line.
_LAUNCH = f'exec codex exec -c "model_providers.{PROVIDER}.base_url=\\"$OPENAI_BASE_URL\\"" "$@"'
_RATE_LIMITED = re.compile(r"\b429\b|rate[ _-]?limit|too many requests", re.IGNORECASE)
_API_STATUS = re.compile(r"(?:unexpected status|last status:) (\d{3})\b")
"""How Codex names the HTTP status of a failed model call (`exceeded retry limit, last
status: 429 Too Many Requests`, `unexpected status 502 Bad Gateway: ...`)."""
_SHELLS = {"sh", "bash", "zsh", "dash"}
_TOOL_ITEMS = {"command_execution", "mcp_tool_call", "web_search", "file_change"}


def _config(max_retries: int | None) -> str:
    """CODEX_HOME/config.toml: the gateway as the only provider, nothing else on."""
    retries = (
        ""
        if max_retries is None
        else f"request_max_retries = {max_retries}\nstream_max_retries = {max_retries}\n"
    )
    return (
        f'model_provider = "{PROVIDER}"\n'
        "check_for_update_on_startup = false\n"
        # Codex offers the model OpenAI's own web search by default: a way out of the
        # sandbox through the provider, which the gateway refuses. Off at the source.
        'web_search = "disabled"\n\n'
        f"[model_providers.{PROVIDER}]\n"
        'name = "docdelta gateway"\n'
        'wire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\n'
        f"{retries}\n"
        "[analytics]\n"
        "enabled = false\n"
    )


class CodexAgent(GatewayAgent):
    name: ClassVar[str] = "codex"
    npm: ClassVar[tuple[str, ...]] = (PACKAGE,)
    """What `agents.images.agent_image` installs for this agent."""
    pinned: ClassVar[str] = VERSION
    upstream: ClassVar[str | None] = "openai"

    def turn_cap(self, requested: int | None) -> int | None:
        """Codex has no turn cap: the wall timeout and the gateway's budget bound a run."""
        return None

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        codex_home = f"{sandbox.tools_dir}/codex-home"
        argv = [
            "sh",
            "-c",
            _LAUNCH,
            "codex",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "--strict-config",
            "--dangerously-bypass-approvals-and-sandbox",
            "--cd",
            sandbox.workspace,
        ]
        if self._model:
            argv += ["--model", self._model]
        argv.append("-")  # the prompt comes on stdin
        env = {"CODEX_HOME": codex_home, "HOME": f"{sandbox.tools_dir}/codex-user"}
        files = {f"{codex_home}/config.toml": _config(ctx.api_retries).encode(), f"{env['HOME']}/.keep": b""}
        return Invocation(argv=argv, env=env, stdin=prompt.encode(), files=files)

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        return outcome_from_events(stdout_events(result), result, agent=self)


def outcome_from_events(
    events: Sequence[Mapping[str, Any]], result: ExecResult, *, agent: Agent
) -> AgentOutcome:
    """The normalized outcome of one `codex exec --json` run."""
    items = [e["item"] for e in _typed(events, "item.completed") if isinstance(e.get("item"), dict)]
    messages = [str(i.get("text", "")) for i in items if i.get("type") == "agent_message"]
    text = messages[-1] if messages else ""
    answer, why = parse_answer(text)
    errors = [_message(e) for e in _typed(events, "error", "turn.failed")]
    stderr = None if errors else failed_stderr(result)
    if stderr is not None:
        errors.append(stderr)
    status = classify(result, answer)
    api_status = _API_STATUS.search(errors[-1]) if errors else None
    if api_status is not None:  # the model API failed: its HTTP status says whose fault
        status = status_for_api_error(int(api_status.group(1)))
    elif errors and _RATE_LIMITED.search(errors[-1]):
        status = RunStatus.rate_limited
    elif errors and status is RunStatus.ok:
        status = RunStatus.agent_error
    return agent.make_outcome(
        status,
        answer=answer,
        final_text=text,
        metrics=_metrics(events, items),
        exit_code=result.exit_code,
        error=errors[-1][-2000:] if errors else (why if answer is None else None),
    )


def _metrics(events: Sequence[Mapping[str, Any]], items: Sequence[Mapping[str, Any]]) -> AgentMetrics:
    """Tokens summed over `turn.completed` usages (OpenAI style: input includes the cached
    part, which is also reported as cache reads). Turns count model responses as Codex
    shows them: each tool call came from one response and each finished or failed turn
    ended with one more; parallel calls in one response are counted once each."""
    usages = [e["usage"] for e in _typed(events, "turn.completed") if isinstance(e.get("usage"), dict)]
    tools = [i for i in items if i.get("type") in _TOOL_ITEMS]
    ends = len(_typed(events, "turn.completed", "turn.failed"))
    commands = [
        CommandRun(command=_unwrap(str(i.get("command", ""))), exit_code=i.get("exit_code"))
        for i in tools
        if i.get("type") == "command_execution"
    ]
    return AgentMetrics(
        tokens_in=_sum(usages, "input_tokens"),
        tokens_out=_sum(usages, "output_tokens"),
        cache_read_tokens=_sum(usages, "cached_input_tokens"),
        cache_write_tokens=_sum(usages, "cache_write_input_tokens"),
        turns=len(tools) + ends if events else None,
        tool_calls=len(tools),
        commands=commands,
    )


def _typed(events: Sequence[Mapping[str, Any]], *types: str) -> list[Mapping[str, Any]]:
    return [e for e in events if e.get("type") in types]


def _unwrap(command: str) -> str:
    """`/bin/sh -lc 'cat AGENTS.md'` -> `cat AGENTS.md`: Codex runs every command through a
    login shell; the command the model asked for is what rules and reports compare."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    if len(argv) == 3 and posixpath.basename(argv[0]) in _SHELLS and argv[1] in ("-c", "-lc"):
        return argv[2]
    return command


def _sum(usages: Sequence[Mapping[str, Any]], key: str) -> int | None:
    values = [u[key] for u in usages if isinstance(u.get(key), int)]
    return sum(values) if values else None


def _message(event: Mapping[str, Any]) -> str:
    error = event.get("error")
    if isinstance(error, dict):
        return str(error.get("message", json.dumps(error)))
    return str(event.get("message", json.dumps(dict(event))))
