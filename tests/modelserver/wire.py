"""One scripted reply in the wire shapes of the four model APIs, whole or as SSE events.

Stdlib only (this module runs in a container with nothing but python3). The shapes follow
what the official SDKs and the agent CLIs parse: a field a client reads must be here, in
the order real servers send it, because a client that accumulates a stream (the SDKs'
stream helpers, Codex, Claude Code) rejects events out of order or for unknown indexes.

Usage semantics: a `Reply`'s usage is Anthropic-style (`input` excludes cache reads and
writes). The OpenAI and Gemini APIs count cached tokens inside their input count, so they report
`input + cache_read + cache_write` as input and `cache_read` as cached: the same script
therefore costs the same through any API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CHUNK = 12
"""Characters per streamed delta: small enough that every answer arrives in several pieces."""

Event = tuple[str | None, Any]
"""(SSE event name or None, data object; the string "[DONE]" is sent verbatim)."""


@dataclass(frozen=True)
class Call:
    """One tool call: ids are fixed by the replay so a test can predict them."""

    id: str
    name: str
    arguments: str  # JSON text, exactly as the client will receive it


@dataclass(frozen=True)
class Usage:
    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True)
class Reply:
    id: str
    model: str
    created: int
    usage: Usage
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    truncated: bool = False
    """The reply was cut off at the request's output cap (each API says so its own way)."""


def _pieces(text: str) -> Iterator[str]:
    for start in range(0, len(text), CHUNK):
        yield text[start : start + CHUNK]


# --------------------------------------------------------------------- Anthropic Messages
def _anthropic_usage(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
    }


def _anthropic_message(reply: Reply, content: list[dict[str, Any]], done: bool) -> dict[str, Any]:
    usage = _anthropic_usage(reply.usage)
    if not done:  # message_start carries the input side; output arrives in message_delta
        usage["output_tokens"] = 1
    return {
        "id": f"msg_{reply.id}",
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": _anthropic_stop(reply) if done else None,
        "stop_sequence": None,
        "usage": usage,
    }


def _anthropic_stop(reply: Reply) -> str:
    if reply.truncated:
        return "max_tokens"
    return "tool_use" if reply.calls else "end_turn"


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}
        for c in reply.calls
    ]
    return blocks


def anthropic_body(reply: Reply) -> dict[str, Any]:
    return _anthropic_message(reply, _anthropic_blocks(reply), done=True)


def anthropic_events(reply: Reply) -> Iterator[Event]:
    yield "message_start", {"type": "message_start", "message": _anthropic_message(reply, [], done=False)}
    yield "ping", {"type": "ping"}
    streams: list[tuple[dict[str, Any], str, str, str]] = []
    if reply.text:
        streams.append(({"type": "text", "text": ""}, "text_delta", "text", reply.text))
    for c in reply.calls:
        start = {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}
        streams.append((start, "input_json_delta", "partial_json", c.arguments))
    for index, (start, kind, key, whole) in enumerate(streams):
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        for piece in _pieces(whole):
            piece_delta = {"type": kind, key: piece}
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": piece_delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    final = _anthropic_message(reply, [], done=True)
    stop = {"stop_reason": final["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": final["usage"]}
    yield "message_stop", {"type": "message_stop"}


# --------------------------------------------------------------------- OpenAI, shared
def _openai_input(usage: Usage) -> int:
    return usage.input + usage.cache_read + usage.cache_write


# --------------------------------------------------------------------- Chat Completions
def _chat_usage(usage: Usage) -> dict[str, Any]:
    prompt = _openai_input(usage)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _chat_envelope(reply: Reply, kind: str) -> dict[str, Any]:
    return {"id": f"chatcmpl-{reply.id}", "object": kind, "created": reply.created, "model": reply.model}


def _finish(reply: Reply) -> str:
    if reply.truncated:
        return "length"
    return "tool_calls" if reply.calls else "stop"


def chat_body(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.calls
        ]
    choice = {"index": 0, "message": message, "finish_reason": _finish(reply), "logprobs": None}
    return {
        **_chat_envelope(reply, "chat.completion"),
        "choices": [choice],
        "usage": _chat_usage(reply.usage),
    }


def chat_events(reply: Reply, include_usage: bool) -> Iterator[Event]:
    envelope = _chat_envelope(reply, "chat.completion.chunk")
    if include_usage:  # the API then sends `usage: null` on every chunk but the last
        envelope["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        return None, {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.text):
        yield chunk({"content": piece})
    for index, call in enumerate(reply.calls):
        head = {"index": index, "id": call.id, "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        for piece in _pieces(call.arguments):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish(reply))
    if include_usage:
        yield None, {**envelope, "choices": [], "usage": _chat_usage(reply.usage)}
    yield None, "[DONE]"


# --------------------------------------------------------------------- Responses
def _responses_usage(usage: Usage) -> dict[str, Any]:
    prompt = _openai_input(usage)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + usage.output,
    }


def _responses_items(reply: Reply, done: bool) -> list[dict[str, Any]]:
    status = "completed" if done else "in_progress"
    items: list[dict[str, Any]] = []
    if reply.text:
        part = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        message = {"type": "message", "id": f"msg_{reply.id}", "status": status, "role": "assistant"}
        items.append({**message, "content": [part] if done else []})
    items += [
        {
            "type": "function_call",
            "id": f"fc_{c.id}",
            "call_id": c.id,
            "name": c.name,
            "arguments": c.arguments if done else "",
            "status": status,
        }
        for c in reply.calls
    ]
    return items


def _response(reply: Reply, done: bool) -> dict[str, Any]:
    return {
        "id": f"resp_{reply.id}",
        "object": "response",
        "created_at": reply.created,
        "status": ("incomplete" if reply.truncated else "completed") if done else "in_progress",
        "model": reply.model,
        "output": _responses_items(reply, done=True) if done else [],
        "usage": _responses_usage(reply.usage) if done else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if done and reply.truncated else None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def responses_body(reply: Reply) -> dict[str, Any]:
    return _response(reply, done=True)


def responses_events(reply: Reply) -> Iterator[Event]:
    """Every event carries `sequence_number`, counted from 0 as the API does."""
    for number, (name, data) in enumerate(_responses_stream(reply)):
        yield name, {"type": name, "sequence_number": number, **data}


def _responses_stream(reply: Reply) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "response.created", {"response": _response(reply, done=False)}
    yield "response.in_progress", {"response": _response(reply, done=False)}
    started, finished = _responses_items(reply, done=False), _responses_items(reply, done=True)
    for index, (item, final) in enumerate(zip(started, finished, strict=True)):
        at = {"item_id": item["id"], "output_index": index}
        yield "response.output_item.added", {"output_index": index, "item": item}
        if item["type"] == "message":
            part = final["content"][0]
            yield "response.content_part.added", {**at, "content_index": 0, "part": {**part, "text": ""}}
            for piece in _pieces(part["text"]):
                yield "response.output_text.delta", {**at, "content_index": 0, "delta": piece, "logprobs": []}
            text = {**at, "content_index": 0, "text": part["text"], "logprobs": []}
            yield "response.output_text.done", text
            yield "response.content_part.done", {**at, "content_index": 0, "part": part}
        else:
            for piece in _pieces(final["arguments"]):
                yield "response.function_call_arguments.delta", {**at, "delta": piece}
            done = {**at, "name": final["name"], "arguments": final["arguments"]}
            yield "response.function_call_arguments.done", done
        yield "response.output_item.done", {"output_index": index, "item": final}
    ending = "response.incomplete" if reply.truncated else "response.completed"
    yield ending, {"response": _response(reply, done=True)}


def sse(events: Iterator[Event]) -> Iterator[bytes]:
    """Frame events as SSE: `event:` lines where the API names its events, then `data:`."""
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        yield f"{head}data: {payload}\n\n".encode()


# --------------------------------------------------------------------- Gemini
# `generateContent` answers one GenerateContentResponse; `streamGenerateContent?alt=sse`
# sends several, each a `data:` line with no `event:` line (the @google/genai stream reader
# matches `^data: ` and would stall on anything else). A stream's chunks carry the parts
# one by one; the last adds `finishReason` and `usageMetadata` (the CLI keeps the last
# usage it sees, and a stream without a finish reason is an error to it). Gemini reports
# a function call whole, with finish reason STOP like text: it has no "tool use" reason.
# Fields equal to zero are left out, as the API's proto3 JSON does.
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def gemini_usage(usage: Usage) -> dict[str, int]:
    """`usageMetadata`: like OpenAI, the prompt count includes the cached tokens."""
    prompt = _openai_input(usage)
    metadata = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": usage.output,
        "cachedContentTokenCount": usage.cache_read,
        "totalTokenCount": prompt + usage.output,
    }
    return {key: value for key, value in metadata.items() if value}


def _gemini_parts(reply: Reply, pieces: bool) -> list[dict[str, Any]]:
    texts = list(_pieces(reply.text)) if pieces else [reply.text] if reply.text else []
    calls = [
        {"functionCall": {"id": c.id, "name": c.name, "args": json.loads(c.arguments)}} for c in reply.calls
    ]
    return [{"text": text} for text in texts] + calls


def _gemini_response(reply: Reply, parts: list[dict[str, Any]], done: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    response: dict[str, Any] = {"candidates": [candidate]}
    if done:
        candidate["finishReason"] = "MAX_TOKENS" if reply.truncated else "STOP"
        response["usageMetadata"] = gemini_usage(reply.usage)
    return {**response, "modelVersion": reply.model, "responseId": reply.id}


def gemini_body(reply: Reply) -> dict[str, Any]:
    return _gemini_response(reply, _gemini_parts(reply, pieces=False), done=True)


def gemini_events(reply: Reply) -> Iterator[Event]:
    parts = _gemini_parts(reply, pieces=True)
    for part in parts[:-1]:
        yield None, _gemini_response(reply, [part], done=False)
    yield None, _gemini_response(reply, parts[-1:], done=True)


def gemini_error(status: int, message: str, retry_after: float | None) -> dict[str, Any]:
    """Google's error body; a retry delay travels as a `RetryInfo` detail, where the
    Gemini clients look for it."""
    error: dict[str, Any] = {
        "code": status,
        "message": message,
        "status": GOOGLE_STATUS.get(status, "UNKNOWN"),
    }
    if retry_after is not None:
        retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after:g}s"}
        error["details"] = [retry]
    return {"error": error}
