"""What the gateway lets through: the exact calls, headers and request bodies a run needs.

An instruction file from a pull request can make the agent send anything to the gateway,
and the gateway holds the real key, so it forwards only what the supported agents really
send (Claude Code, Codex, OpenCode, Gemini CLI and the built-in OpenAI loop, as the
scripted model server's request logs of their real CLIs show):

- **calls**: exact `(method, path template)` pairs per upstream, matched after the path is
  normalised (percent-decoding, dot segments, repeated slashes); encoded separators and
  unknown query parameters are refused, and only the canonical path is forwarded;
- **headers**: an allowlist (no organisation/project switches, cookies or forwarding
  headers), and of `anthropic-beta` only the feature flags on `ANTHROPIC_BETAS`;
- **bodies**: no provider-side tools (MCP servers, web fetch/search, code execution,
  file/container tools, background jobs) unless the project enables one, and the model
  pinned to the run's.

Stdlib only: this module runs inside the gateway container.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

MODEL_SEGMENT = "{model}"
_MODEL_RE = r"(?P<model>[A-Za-z0-9][A-Za-z0-9._-]{0,127})"
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c|2e|00)", re.IGNORECASE)
"""Percent-encoded `/`, `\\`, `.` and NUL: no agent sends them, and they hide traversal."""

FORWARDED_HEADERS = frozenset(
    {
        "accept",
        "content-type",
        "user-agent",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
        "x-app",  # Claude Code
        "originator",  # Codex
        "session_id",  # Codex
        "x-goog-api-client",  # Gemini CLI
    }
)
"""Client headers passed upstream; every other one (auth, `openai-organization`,
`openai-project`, `x-goog-user-project`, cookies, `x-forwarded-*`, ...) is dropped."""

ANTHROPIC_BETAS = (
    "claude-code-",
    "interleaved-thinking-",
    "fine-grained-tool-streaming-",
    "context-management-",
    "prompt-caching-",
    "token-efficient-tools-",
    "output-128k-",
    "extended-cache-ttl-",
)
"""`anthropic-beta` flags (by prefix) that change only how the model answers; the rest
(`mcp-client-`, `web-fetch-`, `code-execution-`, `files-api-`, `context-1m-` at another
price, ...) are dropped."""

CLIENT_TOOL_TYPES = {
    "chat": frozenset({"function", "custom"}),
    "responses": frozenset({"function", "custom", "local_shell"}),
    "anthropic": frozenset({"custom"}),
}
"""Tools the agent runs itself; any other tool type runs on the provider's side."""
_GEMINI_CLIENT_TOOLS = frozenset({"functionDeclarations", "function_declarations"})


class Api(Enum):
    """The request shape a call template speaks, which decides how its body is checked."""

    chat = "chat"
    responses = "responses"
    anthropic = "anthropic"
    gemini = "gemini"
    listing = "listing"  # GET model lists: no body, no model, no cost


class Denied(Exception):
    """A request the policy refuses; `kind` is the log's error ('refused')."""


@dataclass(frozen=True)
class Template:
    method: str
    path: str
    api: Api
    pattern: re.Pattern[str]

    @classmethod
    def parse(cls, spec: str) -> Template:
        method, _, path = spec.strip().rpartition(" ")
        method = method.strip().upper() or "POST"
        if method not in ("GET", "POST") or not path.startswith("/"):
            raise ValueError(f"gateway path {spec!r}: write `POST /path` or `GET /path`")
        regex = re.escape(path).replace(re.escape(MODEL_SEGMENT), _MODEL_RE)
        return cls(method, path, _api_of(method, path), re.compile(regex))

    @property
    def free(self) -> bool:
        """Token counting: checked like a model call, but the providers do not bill it."""
        return self.path.endswith(("/count_tokens", ":countTokens"))

    def match(self, method: str, path: str) -> re.Match[str] | None:
        return self.pattern.fullmatch(path) if method == self.method else None


def _api_of(method: str, path: str) -> Api:
    if method == "GET":
        return Api.listing
    if path.endswith("/chat/completions"):
        return Api.chat
    if path.endswith("/responses"):
        return Api.responses
    if "/messages" in path:
        return Api.anthropic
    if ":" in path.rsplit("/", 1)[-1]:
        return Api.gemini
    raise ValueError(f"gateway path {path!r}: not a model API this gateway knows how to check")


def normalise(raw_path: str) -> str:
    """The canonical form of a request path: percent-decoded once, `.`/`..` resolved and
    empty segments dropped. Denied when the raw path encodes a separator or a dot, or when
    `..` climbs above the root."""
    if _ENCODED_SEPARATOR.search(raw_path):
        raise Denied("percent-encoded separators are not allowed in the path")
    decoded = unquote(raw_path, errors="strict")
    if "%" in decoded or "\\" in decoded or any(ord(c) < 0x21 or ord(c) == 0x7F for c in decoded):
        raise Denied("the path holds characters no model API uses")
    segments: list[str] = []
    for segment in decoded.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise Denied("the path climbs above the gateway's root")
            segments.pop()
        else:
            segments.append(segment)
    return "/" + "/".join(segments)


def query(raw: str, allowed: Iterable[str]) -> tuple[str, list[str]]:
    """(the query string to forward, credentials sent as `key=`); an unknown parameter is
    Denied. Gemini clients may put their key in `key`: it is checked, never forwarded."""
    names = set(allowed)
    kept: list[tuple[str, str]] = []
    keys: list[str] = []
    for name, value in parse_qsl(raw, keep_blank_values=True):
        if name == "key":
            keys.append(value)
        elif name in names:
            kept.append((name, value))
        else:
            raise Denied(f"query parameter {name[:40]!r} is not allowed")
    return urlencode(kept), keys


def headers(client: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers that may go upstream, `anthropic-beta` filtered flag by flag."""
    kept = []
    for name, value in client:
        lower = name.lower()
        if lower not in FORWARDED_HEADERS:
            continue
        if lower == "anthropic-beta":
            flags = [f.strip() for f in value.split(",")]
            betas = ",".join(f for f in flags if f.startswith(ANTHROPIC_BETAS))
            if betas:
                kept.append((name, betas))
            continue
        kept.append((name, value))
    return kept


@dataclass(frozen=True)
class Checked:
    """A request body the policy accepts: the model it names, its worst-case output tokens
    and the body to forward (`None`: forward the client's bytes unchanged)."""

    model: str | None
    max_output_tokens: int | None
    body: bytes | None = None


def check_body(
    api: Api,
    body: bytes,
    path_model: str | None,
    *,
    pinned: str | None,
    enabled: Sequence[str],
) -> Checked:
    """Refuse provider-side tools and foreign models; turn on usage reporting in Chat
    Completions streams (without it a stream reports no tokens and could not be billed)."""
    if api is Api.listing:
        return Checked(None, None)
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        raise Denied("the request body is not JSON") from None
    if not isinstance(parsed, dict):
        raise Denied("the request body is not a JSON object")
    model = path_model if api is Api.gemini else parsed.get("model")
    if not isinstance(model, str) or not model:
        raise Denied("the request names no model")
    if pinned is not None and model != pinned:
        raise Denied(f"model {model[:80]!r} is not this run's model {pinned!r}")
    _check_tools(api, parsed, enabled)
    rewritten = None
    if api is Api.chat and parsed.get("stream") is True:
        options = parsed.get("stream_options")
        if not isinstance(options, dict) or options.get("include_usage") is not True:
            parsed["stream_options"] = {
                **(options if isinstance(options, dict) else {}),
                "include_usage": True,
            }
            rewritten = json.dumps(parsed).encode()
    return Checked(model, _max_output(api, parsed), rewritten)


def _enabled(kind: str, enabled: Sequence[str]) -> bool:
    return any(kind.startswith(name) for name in enabled)


def _refuse_tool(kind: str, enabled: Sequence[str]) -> None:
    if not _enabled(kind, enabled):
        raise Denied(
            f"provider-side tool {kind[:60]!r} is not enabled (it would reach the network from the "
            "provider's side); a project enables one with gateway.server_tools"
        )


def _check_tools(api: Api, body: Mapping[str, Any], enabled: Sequence[str]) -> None:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise Denied("`tools` is not a list")
    if api is Api.gemini:
        for tool in tools:
            for key in tool if isinstance(tool, dict) else ["?"]:
                if key not in _GEMINI_CLIENT_TOOLS:
                    _refuse_tool(str(key), enabled)
        return
    _check_client_tools(tools, api, enabled)
    _check_server_fields(api, body, enabled)


def _check_server_fields(api: Api, body: Mapping[str, Any], enabled: Sequence[str]) -> None:
    """Body fields outside `tools` that switch on provider-side work."""
    if api is Api.chat and "web_search_options" in body:
        _refuse_tool("web_search", enabled)
    if api is Api.responses and body.get("background"):
        raise Denied("background responses run on after the run and are not allowed")
    if api is Api.anthropic:
        if body.get("mcp_servers"):
            _refuse_tool("mcp", enabled)
        if body.get("container"):
            _refuse_tool("code_execution", enabled)


def _check_client_tools(tools: list[Any], api: Api, enabled: Sequence[str]) -> None:
    """Every tool must be one the agent runs itself; a Responses `namespace` (Codex groups
    its sub-agent tools in one) is checked tool by tool."""
    allowed = CLIENT_TOOL_TYPES[api.value]
    for tool in tools:
        kind = tool.get("type", "custom") if isinstance(tool, dict) else "?"
        if kind == "namespace" and api is Api.responses and isinstance(tool.get("tools"), list):
            _check_client_tools(tool["tools"], api, enabled)
        elif not isinstance(kind, str) or kind not in allowed:
            _refuse_tool(str(kind), enabled)


def _max_output(api: Api, body: Mapping[str, Any]) -> int | None:
    """The output limit the request itself sets, if any."""
    if api is Api.gemini:
        config = body.get("generationConfig")
        names: tuple[str, ...] = ("maxOutputTokens",)
        body = config if isinstance(config, dict) else {}
    elif api is Api.responses:
        names = ("max_output_tokens",)
    else:
        names = ("max_completion_tokens", "max_tokens")
    for name in names:
        value = body.get(name)
        if isinstance(value, int) and value > 0:
            return value
    return None
