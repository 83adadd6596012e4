"""Token usage and cost of one model call, read from the upstream's own response.

Stdlib only: this module runs inside the gateway container, whose image carries nothing
but Python, httpx and the gateway package. It understands the usage blocks of the
OpenAI Chat Completions and Responses APIs, the Anthropic Messages API and Google's
Gemini API (`usageMetadata`), in plain JSON bodies and in SSE streams (where usage
arrives in one or more events).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

Usage = dict[str, int]
"""Keys: tokens_in, tokens_out, cache_read_tokens, cache_write_tokens (absent = not reported)."""

_FIELDS = {
    # OpenAI chat completions
    "prompt_tokens": "tokens_in",
    "completion_tokens": "tokens_out",
    # OpenAI responses, Anthropic messages
    "input_tokens": "tokens_in",
    "output_tokens": "tokens_out",
    # Anthropic prompt caching
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
    # Gemini usageMetadata (the prompt count includes cached tokens, like OpenAI's)
    "promptTokenCount": "tokens_in",
    "cachedContentTokenCount": "cache_read_tokens",
}
_GEMINI_OUTPUT = ("candidatesTokenCount", "thoughtsTokenCount")
"""Gemini bills thinking tokens as output but reports them apart from the answer's."""


def _from_block(block: Mapping[str, Any]) -> Usage:
    usage: Usage = {
        ours: int(block[theirs]) for theirs, ours in _FIELDS.items() if isinstance(block.get(theirs), int)
    }
    for details in ("prompt_tokens_details", "input_tokens_details"):  # OpenAI cached input
        cached = (block.get(details) or {}).get("cached_tokens")
        if isinstance(cached, int):
            usage["cache_read_tokens"] = cached
    gemini_out = [block[k] for k in _GEMINI_OUTPUT if isinstance(block.get(k), int)]
    if gemini_out:
        usage["tokens_out"] = sum(gemini_out)
    return usage


def _usage_blocks(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Usage blocks at the places the APIs put them (top level, message, response; Gemini's
    `usageMetadata`)."""
    if not isinstance(obj, dict):
        return
    for holder in (obj, obj.get("message"), obj.get("response")):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            yield holder["usage"]
    if isinstance(obj.get("usageMetadata"), dict):
        yield obj["usageMetadata"]


def _json_objects(body: bytes, streamed: bool) -> Iterator[Any]:
    if not streamed:
        try:
            yield json.loads(body)
        except ValueError:
            return
        return
    for line in body.splitlines():
        if line.startswith(b"data:"):
            try:
                yield json.loads(line[5:].strip())
            except ValueError:
                continue  # e.g. "[DONE]"


def extract(body: bytes, *, streamed: bool) -> tuple[str | None, Usage]:
    """(model, usage) from a response body. In a stream later events win field by field,
    which is how Anthropic reports input tokens first and output tokens last."""
    model: str | None = None
    usage: Usage = {}
    for obj in _json_objects(body, streamed):
        for holder in (obj, obj.get("message") if isinstance(obj, dict) else None):
            if isinstance(holder, dict):
                named = holder.get("model") or holder.get("modelVersion")  # Gemini: modelVersion
                if isinstance(named, str):
                    model = model or named
        for block in _usage_blocks(obj):
            usage.update(_from_block(block))
    return model, usage


def price_for(prices: Mapping[str, Mapping[str, Any]], model: str) -> Mapping[str, Any] | None:
    """A model's price from a table of USD per million tokens keyed by model-name prefix
    (longest prefix wins, so dated snapshots match their family); None when unpriced."""
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


def cost_usd(prices: Mapping[str, Mapping[str, Any]], model: str | None, usage: Usage) -> float | None:
    """Cost of one call's usage; None when the model is unpriced or the upstream reported
    no usage: we never guess (the gateway's ledger books such calls at their worst case)."""
    if model is None or not usage:
        return None
    price = price_for(prices, model)
    if price is None:
        return None
    cached = usage.get("cache_read_tokens", 0)
    # OpenAI counts cached tokens inside prompt tokens; Anthropic reports them apart.
    fresh_in = usage.get("tokens_in", 0) - (cached if price.get("cached_in_input", False) else 0)
    total = (
        fresh_in * price.get("input", 0.0)
        + usage.get("tokens_out", 0) * price.get("output", 0.0)
        + cached * price.get("cache_read", 0.0)
        + usage.get("cache_write_tokens", 0) * price.get("cache_write", 0.0)
    )
    return round(float(total) / 1_000_000, 8)
