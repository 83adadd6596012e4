"""Replaying a script: which turn answers a request, and how a generic step becomes a call
to the tool the client actually declared.

Stdlib only. A script is plain JSON (its documented schema is `script.Script`, host side):
`{"name": str, "model": str | null, "stream_interval_s"?: float, "per_conversation"?: bool,
"turns": [turn, ...]}` where `stream_interval_s` paces streamed answers (seconds between SSE
events, default 0: all at once), `per_conversation` answers each request with the turn at
the index of the model turns its conversation already holds (Anthropic and Chat `messages`,
Gemini `contents`) instead of a shared cursor, so agents running at once each replay the
script from its start, and a turn is one of

- `{"text": "...", "if_seen"?: {"needle": "other text"}}` — answer with this text (or the
  text of the first needle found anywhere in the request) and end the turn;
- `{"tool": "shell", "args": {"command": "cat AGENTS.md"}, "text"?: "...", "aliases"?: [...]}`
  — call a tool (after the optional text);
- `{"error": 429, "message"?: "...", "retry_after"?: 2}` — fail this request;

a text or tool turn may add `"truncated": true` (cut off at the output cap) and a tool turn
`"raw_arguments": "{"` (arguments sent verbatim, for malformed calls);

each optionally with `"usage": {"input_tokens", "output_tokens", "cache_read_tokens",
"cache_write_tokens"}` (missing counts are estimated from text length, cache counts are 0).

Agents name the same tool differently (Claude Code `Bash`, Codex `shell`/`exec_command`,
OpenCode `bash`, Gemini `run_shell_command`) and name its parameters differently (`command`
as a string or an argv list, `cmd`, `file_path`/`filePath`/`path`), so a step is written once
and mapped per request onto the tools declared in that request.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelserver.wire import Call, Reply, Usage

TOOL_ALIASES: dict[str, tuple[str, ...]] = {
    "shell": ("Bash", "bash", "shell", "exec_command", "shell_command", "run_shell_command"),
    "read": ("Read", "read", "read_file"),
    "write": ("Write", "write", "write_file"),
    "edit": ("Edit", "edit", "replace"),
}
"""Generic tool name -> the names agents declare for it, in order of preference."""

ARG_ALIASES: dict[str, tuple[str, ...]] = {
    "command": ("command", "cmd"),
    "path": ("file_path", "filePath", "path", "absolute_path"),
}
"""Generic argument name -> parameter names tools declare for it."""

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
CHARS_PER_TOKEN = 4
_TEXT_ARGUMENT_APIS = ("/chat/completions", "/responses")
"""The APIs that carry tool-call arguments as JSON text (the others carry an object)."""


class ScriptError(ValueError):
    """The script is malformed, exhausted, or does not fit the request it must answer."""


@dataclass(frozen=True)
class Failure:
    """An HTTP error answer; `kind` is the error type clients branch on."""

    status: int
    kind: str
    message: str
    retry_after: float | None = None


def check(script: Mapping[str, Any]) -> dict[str, Any]:
    """The script as a plain dict, or ScriptError naming the turn at fault."""
    name = script.get("name")
    turns = script.get("turns")
    if not isinstance(name, str) or not name:
        raise ScriptError("script: `name` must be a non-empty string (it names the script in errors)")
    if not isinstance(turns, list):
        raise ScriptError(f"script {name!r}: `turns` must be a list")
    interval = script.get("stream_interval_s", 0)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 <= interval <= 60:
        raise ScriptError(f"script {name!r}: `stream_interval_s` must be a number of seconds from 0 to 60")
    for index, turn in enumerate(turns):
        kinds = [key for key in ("error", "tool", "text") if isinstance(turn, dict) and key in turn]
        if not kinds or (kinds[0] == "error" and len(kinds) > 1):
            raise ScriptError(
                f"script {name!r} turn {index}: expected `text`, `tool` (+ optional `text`) or `error`"
            )
    return {
        "name": name,
        "model": script.get("model"),
        "stream_interval_s": interval,
        "per_conversation": bool(script.get("per_conversation", False)),
        "turns": list(turns),
    }


def model_turns(body: Mapping[str, Any]) -> int:
    """How many model turns the request's conversation already holds: its `assistant`
    messages (Anthropic, Chat Completions) or `model` contents (Gemini). Responses requests
    may name their history by id only, so they have no count (ScriptError)."""
    for key, role in (("messages", "assistant"), ("contents", "model")):
        history = body.get(key)
        if isinstance(history, list):
            return sum(1 for item in history if isinstance(item, dict) and item.get("role") == role)
    raise ScriptError("a `per_conversation` script needs the conversation in `messages` or `contents`")


def declared_tools(body: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, parameter schema) of each named tool in a request of any of the four APIs.
    Gemini groups its tools as `{"functionDeclarations": [...]}` entries and gives the
    schema as `parametersJsonSchema` (or, in its OpenAPI subset, `parameters`)."""
    specs: list[Any] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("functionDeclarations"), list):
            specs += tool["functionDeclarations"]
        elif isinstance(tool, dict):
            specs.append(tool["function"] if isinstance(tool.get("function"), dict) else tool)
    tools: list[tuple[str, Mapping[str, Any]]] = []
    for spec in specs:
        if not isinstance(spec, dict):
            continue
        name = spec.get("name")
        schema = spec.get("input_schema") or spec.get("parameters") or spec.get("parametersJsonSchema") or {}
        if isinstance(name, str):
            tools.append((name, schema if isinstance(schema, dict) else {}))
    return tools


def resolve_tool(
    step: Mapping[str, Any], declared: list[tuple[str, Mapping[str, Any]]]
) -> tuple[str, Mapping[str, Any]]:
    """The declared tool a step means: its exact name, else the first declared tool whose
    name is one of its aliases. With no tools declared, the step's name as written."""
    wanted = step["tool"]
    if not declared:
        return wanted, {}
    by_name = dict(declared)
    if wanted in by_name:
        return wanted, by_name[wanted]
    aliases = {*step.get("aliases", ()), *TOOL_ALIASES.get(wanted.lower(), ())}
    for name, schema in declared:
        if name in aliases:
            return name, schema
    raise ScriptError(
        f"tool {wanted!r} matches none of the declared tools {sorted(by_name)}; "
        "name one of them or list it in the step's `aliases`"
    )


def map_args(args: Mapping[str, Any], schema: Mapping[str, Any], call_name: str) -> dict[str, Any]:
    """Generic arguments renamed to the tool's own parameters. A command for an argv-typed
    parameter becomes `["bash", "-lc", command]`; a required string parameter the step did
    not set (e.g. OpenCode's `description`) is filled so the client's validation passes."""
    props = schema.get("properties") or {}

    def kind(name: str) -> str:  # Gemini's OpenAPI-style schemas spell types in capitals
        return str((props.get(name) or {}).get("type", "")).lower()

    mapped: dict[str, Any] = {}
    for key, value in args.items():
        target = key
        if props and key not in props:
            target = next((alias for alias in ARG_ALIASES.get(key, ()) if alias in props), key)
        argv = key == "command" and isinstance(value, str) and kind(target) == "array"
        mapped[target] = ["bash", "-lc", value] if argv else value
    for required in schema.get("required") or []:
        if required not in mapped and kind(required) == "string":
            mapped[required] = f"scripted {call_name} call"
    return mapped


def _estimate(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


@dataclass
class Replay:
    """The script's cursor; one per server, safe to share between request threads."""

    script: dict[str, Any]
    position: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name(self) -> str:
        return str(self.script["name"])

    @property
    def remaining(self) -> int:
        return len(self.script["turns"]) - self.position

    @property
    def stream_interval_s(self) -> float:
        """Seconds between the SSE events of a streamed answer (0: no pauses)."""
        return float(self.script["stream_interval_s"])

    def answer(
        self, path: str, body: Mapping[str, Any], model: str | None = None
    ) -> tuple[int | None, Reply | Failure]:
        """(turn index used or None, the reply or failure) for one model request. `model`
        is the model the request names outside its body (Gemini names it in the URL)."""
        if self.script["per_conversation"]:
            try:
                return self._at(model_turns(body), path, body, model)
            except ScriptError as exc:
                message = f"docdelta scripted model server: script {self.name!r}: {exc}"
                return None, Failure(500, "script_mismatch", message)
        with self._lock:
            index = self.position
            if index >= len(self.script["turns"]):
                message = (
                    f"docdelta scripted model server: script {self.name!r} is exhausted after "
                    f"{index} turns; the request to {path} has no turn left to answer it"
                )
                return None, Failure(500, "script_exhausted", message)
            self.position += 1
        return self._at(index, path, body, model)

    def _at(
        self, index: int, path: str, body: Mapping[str, Any], model: str | None
    ) -> tuple[int | None, Reply | Failure]:
        if index >= len(self.script["turns"]):
            message = (
                f"docdelta scripted model server: script {self.name!r} has {len(self.script['turns'])} "
                f"turns; the request to {path} is the conversation's turn {index}"
            )
            return None, Failure(500, "script_exhausted", message)
        turn = self.script["turns"][index]
        try:
            return index, self._turn(index, path, turn, body, model or body.get("model"))
        except ScriptError as exc:
            message = f"docdelta scripted model server: script {self.name!r} turn {index}: {exc}"
            return index, Failure(500, "script_mismatch", message)

    def _turn(
        self, index: int, path: str, turn: Mapping[str, Any], body: Mapping[str, Any], asked: Any
    ) -> Reply | Failure:
        if "error" in turn:
            status = int(turn["error"])
            message = turn.get("message") or f"scripted error {status} (script {self.name!r} turn {index})"
            return Failure(status, ERROR_TYPES.get(status, "api_error"), message, turn.get("retry_after"))
        calls = []
        if "tool" in turn:
            name, schema = resolve_tool(turn, declared_tools(body))
            arguments = json.dumps(map_args(turn.get("args") or {}, schema, name))
            if turn.get("raw_arguments") is not None:
                if not path.split("?", maxsplit=1)[0].endswith(_TEXT_ARGUMENT_APIS):
                    raise ScriptError(
                        f"`raw_arguments` needs an API whose tool arguments are text, not {path}"
                    )
                arguments = str(turn["raw_arguments"])
            calls.append(Call(id=f"call_{self.name_slug}_{index}", name=name, arguments=arguments))
        text = str(turn.get("text") or "")
        request = json.dumps(body, ensure_ascii=False)
        text = next((alt for needle, alt in (turn.get("if_seen") or {}).items() if needle in request), text)
        given = turn.get("usage") or {}
        usage = Usage(
            input=int(given.get("input_tokens", _estimate(json.dumps(body)))),
            output=int(given.get("output_tokens", _estimate(text + "".join(c.arguments for c in calls)))),
            cache_read=int(given.get("cache_read_tokens", 0)),
            cache_write=int(given.get("cache_write_tokens", 0)),
        )
        model = self.script.get("model") or asked or "docdelta-scripted"
        reply_id = f"{self.name_slug}_{index}"
        truncated = bool(turn.get("truncated"))
        return Reply(reply_id, str(model), int(time.time()), usage, text, calls, truncated)

    @property
    def name_slug(self) -> str:
        """The script name reduced to id-safe characters (ids must match `[A-Za-z0-9_-]`)."""
        return "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in self.name)[:32]
