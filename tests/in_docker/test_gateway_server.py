"""The gateway process in-process on 127.0.0.1 against the scripted model server: routing,
auth replacement, byte-exact streaming, usage and cost, budget and refusals.
No Docker: these pin the proxy's behaviour fast; test_docker_gateway.py runs it in
containers."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import struct
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from docker_helpers import RUN_TOKEN, gateway_on_loopback
from modelserver import ScriptedModelServer, wire
from modelserver.script import Script, TextTurn, TurnUsage

from docdelta.gateway.config import Budget, GatewayConfig, ModelCall, Upstream

KEY = "sk-test-real-key-0123456789"
MODEL = "gpt-4o-mini-2024-07-18"
CACHED = TurnUsage(input_tokens=7, cache_read_tokens=4, output_tokens=2)
"""11 tokens in through the OpenAI APIs, 4 of them cached; 2 out."""
PLAIN = TurnUsage(input_tokens=100, output_tokens=20)


@pytest.fixture
def upstream() -> Iterator[str]:
    """A scripted model server answering "Hello" (100 tokens in, 20 out) a few times."""
    turns = [TextTurn(text="Hello", usage=PLAIN)] * 3
    with ScriptedModelServer(Script(name="gateway", model=MODEL, turns=turns)) as server:
        yield server.url


def config_for(base_url: str, **kw: Any) -> GatewayConfig:
    route = Upstream(
        name="openai",
        base_url=f"{base_url}/v1",
        paths=["POST /chat/completions", "GET /models"],
        base_url_env=["OPENAI_BASE_URL"],
        key_env=["OPENAI_API_KEY"],
        key_from="OPENAI_API_KEY",
    )
    return GatewayConfig(upstreams=[route], **kw)


def calls(log: io.StringIO) -> list[ModelCall]:
    return [ModelCall.model_validate_json(line) for line in log.getvalue().splitlines()]


AUTH = {"authorization": f"Bearer {RUN_TOKEN}", "x-api-key": RUN_TOKEN}
"""The run token, in both headers SDKs put keys in: neither reaches the upstream."""
CALL = {"model": "gpt-4o-mini", "max_tokens": 20}


def test_stream_passes_through_byte_for_byte_with_the_real_key_and_usage_logged() -> None:
    script = Script(name="gateway", model=MODEL, turns=[TextTurn(text="Hello, gateway", usage=CACHED)])
    with (
        ScriptedModelServer(script) as scripted,
        gateway_on_loopback(config_for(scripted.url), {"openai": KEY}) as (url, _, log),
        httpx.stream(
            "POST",
            f"{url}/openai/chat/completions",
            json={"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True}},
            headers=AUTH,
        ) as response,
    ):
        body = response.read()
    assert response.status_code == 200
    # The bytes the server's own encoder makes for this turn (its timestamp read from the stream).
    created = json.loads(body.split(b"\n", 1)[0].removeprefix(b"data: "))["created"]
    usage = wire.Usage(input=7, output=2, cache_read=4)
    reply = wire.Reply("gateway_0", MODEL, created, usage, "Hello, gateway")
    assert body == b"".join(wire.sse(wire.chat_events(reply, include_usage=True)))
    # One auth header reached the upstream, holding the real key; the run token did not.
    [seen] = scripted.requests
    assert seen["auth"] == [["authorization", hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()]]
    [call] = calls(log)
    assert (call.upstream, call.status, call.streamed, call.model) == ("openai", 200, True, MODEL)
    assert (call.tokens_in, call.tokens_out, call.cache_read_tokens) == (11, 2, 4)
    # gpt-4o-mini: 7 fresh input tokens at 0.15, 4 cached at 0.075, 2 output at 0.60 per million
    assert call.cost_usd == pytest.approx((7 * 0.15 + 4 * 0.075 + 2 * 0.60) / 1e6)
    assert KEY not in log.getvalue() and RUN_TOKEN not in log.getvalue()


def test_json_usage_is_logged_and_a_model_declared_free_costs_nothing(upstream: str) -> None:
    free = {"x": {"input": 0, "output": 0}}
    with gateway_on_loopback(config_for(upstream, prices=free), {"openai": KEY}) as (url, _, log):
        response = httpx.post(f"{url}/openai/chat/completions", json={"model": "x"}, headers=AUTH)
    assert response.json()["choices"][0]["message"]["content"] == "Hello"
    [call] = calls(log)
    assert (call.tokens_in, call.tokens_out, call.cost_usd, call.streamed) == (100, 20, 0.0, False)


@pytest.mark.parametrize(
    "target",
    ["/anthropic/v1/messages", "/openai/files", "/openai/../admin", "http://127.0.0.1:1/", "/"],
)
def test_targets_off_the_allowlist_are_refused_and_never_forwarded(upstream: str, target: str) -> None:
    with gateway_on_loopback(config_for(upstream), {"openai": KEY}) as (url, _, log):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(f"GET {target} HTTP/1.1\r\nhost: x\r\nx-api-key: {RUN_TOKEN}\r\n\r\n".encode())
            reply = b"".join(iter(lambda: sock.recv(65536), b""))
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403")
    assert json.loads(body)["error"]["type"] == "docdelta_gateway_refused"
    [call] = calls(log)
    assert (call.status, call.error, call.tokens_in) == (403, "refused", None)


@pytest.mark.parametrize(
    "budget",
    # One call: 120 tokens, at gpt-4o-mini prices (0.15 in, 0.60 out per million) $0.000027.
    # Its worst case (20 out, as it asks, and its 42-byte body's 14 estimated tokens in) fits
    # in each budget, so it is forwarded; settled at its real usage, it leaves no room for
    # a second: a budget is overshot by at most one call's settled excess.
    [Budget(max_requests=1), Budget(max_tokens=50), Budget(max_cost_usd=0.00002)],
)
def test_calls_past_the_budget_get_a_clear_budget_error(upstream: str, budget: Budget) -> None:
    with gateway_on_loopback(config_for(upstream, budget=budget), {"openai": KEY}) as (url, _, log):
        first = httpx.post(f"{url}/openai/chat/completions", json=CALL, headers=AUTH)
        second = httpx.post(f"{url}/openai/chat/completions", json=CALL, headers=AUTH)
    assert first.status_code == 200
    assert second.status_code == 402
    assert second.json()["error"]["type"] == "budget_exceeded"
    assert [c.error for c in calls(log)] == [None, "budget"]


def test_an_unreachable_upstream_is_a_502_without_the_key() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with gateway_on_loopback(config_for(dead), {"openai": KEY}) as (url, _, log):
        response = httpx.post(f"{url}/openai/chat/completions", json=CALL, headers=AUTH)
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "docdelta_gateway_upstream"
    assert KEY not in response.text and KEY not in log.getvalue()
    assert [c.error for c in calls(log)] == ["upstream"]


def test_an_agent_that_hangs_up_mid_reply_is_logged_as_gone_and_still_billed() -> None:
    # A reply far larger than the loopback socket buffers, so the gateway is still writing
    # when the client resets the connection after reading the status line.
    big = TextTurn(text="x" * (12 * 1024 * 1024), usage=PLAIN)
    with (
        ScriptedModelServer(Script(name="gateway", model=MODEL, turns=[big])) as scripted,
        gateway_on_loopback(config_for(scripted.url), {"openai": KEY}) as (url, _, log),
    ):
        host, port = httpx.URL(url).host, httpx.URL(url).port
        assert port is not None
        body = json.dumps(CALL).encode()
        with socket.create_connection((host, port)) as client:
            client.sendall(
                b"POST /openai/chat/completions HTTP/1.1\r\nhost: x\r\n"
                + f"authorization: Bearer {RUN_TOKEN}\r\ncontent-type: application/json\r\n".encode()
                + f"content-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            assert client.recv(12) == b"HTTP/1.1 200"
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    [call] = calls(log)
    # The agent's hang-up is not the upstream's failure, and the upstream's work is booked.
    assert (call.status, call.error) == (200, "client_gone")
    assert (call.tokens_in, call.tokens_out) == (100, 20)
