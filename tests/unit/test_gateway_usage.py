"""The gateway reads token usage from every API it forwards, in the shapes our scripted
model server sends (which the official SDKs parse): Gemini here, the others in the
gateway server tests."""

from __future__ import annotations

import json

from modelserver.wire import Reply, Usage, gemini_body, gemini_events

from docdelta.gateway.usage import cost_usd, extract

REPLY = Reply(
    id="r1",
    model="gemini-2.5-flash",
    created=0,
    usage=Usage(input=2400, output=60, cache_read=300),
    text="done",
)


def test_gemini_usage_metadata_is_read_from_a_plain_body() -> None:
    model, usage = extract(json.dumps(gemini_body(REPLY)).encode(), streamed=False)
    assert model == "gemini-2.5-flash"
    # Gemini's prompt count includes the cached tokens, as OpenAI's does.
    assert usage == {"tokens_in": 2700, "tokens_out": 60, "cache_read_tokens": 300}


def test_gemini_usage_metadata_is_read_from_an_sse_stream() -> None:
    stream = b"".join(b"data: " + json.dumps(body).encode() + b"\r\n\r\n" for _, body in gemini_events(REPLY))
    model, usage = extract(stream, streamed=True)
    assert model == "gemini-2.5-flash"
    assert usage == {"tokens_in": 2700, "tokens_out": 60, "cache_read_tokens": 300}


def test_thinking_tokens_count_as_output_and_cached_input_is_priced_once() -> None:
    body = {"usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 10, "thoughtsTokenCount": 90,
                              "cachedContentTokenCount": 400}, "modelVersion": "gemini-x"}  # fmt: skip
    model, usage = extract(json.dumps(body).encode(), streamed=False)
    assert (model, usage["tokens_out"]) == ("gemini-x", 100)
    prices = {"gemini-x": {"input": 1.0, "output": 10.0, "cache_read": 0.25, "cached_in_input": True}}
    assert cost_usd(prices, model, usage) == (600 * 1.0 + 100 * 10.0 + 400 * 0.25) / 1_000_000
