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
  pinned to the run's;
- **side doors**: no input the provider fetches from a URL (an egress channel out of a
  sandbox that has no network), no reference to a stored object (files, responses,
  conversations, prompts, caches: the organisation's state, not this run's), nothing
  stored or tagged for later, no audio out, and one answer per call (the budget holds a
  call's worst case for one answer; a provider bills each of `n`). Inline (base64, `data:`)
  inputs pass.

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

RESPONSES_INCLUDES = frozenset({"reasoning.encrypted_content", "message.output_text.logprobs"})
"""`include` values that return only what this call computes (Codex asks for the first, to
carry reasoning across calls without storing it); the rest return provider-side tool
results or stored inputs."""
ANTHROPIC_SOURCES = frozenset({"base64", "text", "content"})
"""Anthropic image/document sources held in the request itself; `url` makes the provider
fetch and `file` reads the organisation's Files API."""


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
    _check_side_doors(api, parsed)
    rewritten = None
    if api is Api.responses and "store" not in parsed:
        parsed["store"] = False  # the Responses API stores every call unless told not to
        rewritten = json.dumps(parsed).encode()
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


def _side_door(what: str) -> Denied:
    return Denied(
        f"{what} is not allowed: the gateway forwards only inline inputs and calls that leave "
        "nothing stored (see docs/security.md)"
    )


def _check_side_doors(api: Api, body: Mapping[str, Any]) -> None:
    """Refuse fields that make the provider fetch a URL, read or write stored objects, or
    bill more than one answer per call."""
    checks = {
        Api.chat: _check_chat,
        Api.responses: _check_responses,
        Api.anthropic: _check_anthropic,
        Api.gemini: _check_gemini,
    }
    if api in checks:
        checks[api](body)


def _check_chat(body: Mapping[str, Any]) -> None:
    _check_openai_top(body, "chat")
    if body.get("audio") or "audio" in _strings(body.get("modalities")):
        raise _side_door("audio output (`audio`, `modalities: [audio]`)")
    if body.get("n") not in (None, 1):
        raise _many_answers("`n`")
    for message in _dicts(body.get("messages")):
        for part in _dicts(message.get("content")):
            _check_chat_part(part)


def _check_responses(body: Mapping[str, Any]) -> None:
    _check_openai_top(body, "responses")
    for name in ("previous_response_id", "conversation", "prompt"):
        if body.get(name) is not None:
            raise _side_door(f"`{name}` (a stored object)")
    unknown = [v for v in _strings(body.get("include")) if v not in RESPONSES_INCLUDES]
    if unknown or not isinstance(body.get("include", []), list):
        raise _side_door(f"`include` of {str(unknown)[:80]}")
    for item in _dicts(body.get("input")):
        _check_responses_item(item)


def _check_anthropic(body: Mapping[str, Any]) -> None:
    for message in _dicts(body.get("messages")):
        _check_anthropic_blocks(message.get("content"))


def _check_gemini(body: Mapping[str, Any]) -> None:
    for name in ("cachedContent", "cached_content"):
        if body.get(name) is not None:
            raise _side_door(f"`{name}` (a stored cache)")
    config = body.get("generationConfig") or body.get("generation_config")
    counts = (
        [config.get(k) for k in ("candidateCount", "candidate_count")] if isinstance(config, dict) else []
    )
    if any(count not in (None, 1) for count in counts):
        raise _many_answers("`candidateCount`")
    holders = [*_dicts(body.get("contents"))]
    holders += _dicts([body.get("systemInstruction"), body.get("system_instruction")])
    for holder in holders:
        for part in _dicts(holder.get("parts")):
            if "fileData" in part or "file_data" in part:
                raise _side_door("`fileData` (a file or URI the provider fetches)")


def _many_answers(field: str) -> Denied:
    return Denied(
        f"{field} above 1 is not allowed: the gateway allows one answer per call, since the "
        "provider bills every answer and the budget holds a call's worst case for one"
    )


def _check_openai_top(body: Mapping[str, Any], kind: str) -> None:
    if body.get("store") not in (None, False):
        raise _side_door(f"`store` in {kind} calls (a stored completion)")
    if body.get("metadata") is not None:
        raise _side_door(f"`metadata` in {kind} calls (tags on stored objects)")


def _check_chat_part(part: Mapping[str, Any]) -> None:
    image = part.get("image_url")
    if image is not None:
        url = image.get("url") if isinstance(image, dict) else image
        if not _inline(url):
            raise _side_door("an `image_url` that is not a data: URL")
    file = part.get("file")
    if isinstance(file, dict) and file.get("file_id") is not None:
        raise _side_door("a `file_id` (a stored file)")


def _check_responses_item(item: Mapping[str, Any]) -> None:
    if item.get("type") == "item_reference":
        raise _side_door("an `item_reference` (a stored item)")
    for key in ("content", "output"):
        for part in _dicts(item.get(key)):
            if part.get("file_id") is not None:
                raise _side_door("a `file_id` (a stored file)")
            if part.get("file_url") is not None:
                raise _side_door("a `file_url` (a URL the provider fetches)")
            if "image_url" in part and not _inline(part["image_url"]):
                raise _side_door("an `image_url` that is not a data: URL")


def _check_anthropic_blocks(content: Any) -> None:
    for block in _dicts(content):
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") not in ANTHROPIC_SOURCES:
            raise _side_door(f"a {str(source.get('type'))[:20]!r} source (fetched or stored by the provider)")
        if block.get("type") == "tool_result":
            _check_anthropic_blocks(block.get("content"))
        if block.get("type") == "document" and isinstance(source, dict):
            _check_anthropic_blocks(source.get("content"))


def _inline(url: Any) -> bool:
    return isinstance(url, str) and url[:5].lower() == "data:"


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a JSON list (a string or anything else holds none)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


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
