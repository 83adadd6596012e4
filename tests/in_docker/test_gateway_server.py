"""The gateway process in-process on 127.0.0.1 against the scripted upstream: routing,
auth replacement, byte-exact streaming, usage and cost, budget and refusals.
No Docker: these pin the proxy's behaviour fast; test_docker_gateway.py runs it in
containers."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import scripted_upstream
from docker_helpers import gateway_on_loopback

from docdelta.gateway.config import Budget, GatewayConfig, ModelCall, Upstream
from docdelta.gateway.runtime import PLACEHOLDER_KEY

KEY = "sk-test-real-key-0123456789"


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    server = scripted_upstream.serve("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def config_for(base_url: str, **kw: Any) -> GatewayConfig:
    route = Upstream(
        name="openai",
        base_url=f"{base_url}/v1",
        paths=["/chat/completions", "/models"],
        base_url_env=["OPENAI_BASE_URL"],
        key_env=["OPENAI_API_KEY"],
        key_from="OPENAI_API_KEY",
    )
    return GatewayConfig(upstreams=[route], **kw)


def calls(log: io.StringIO) -> list[ModelCall]:
    return [ModelCall.model_validate_json(line) for line in log.getvalue().splitlines()]


PLACEHOLDER_AUTH = {"authorization": f"Bearer {PLACEHOLDER_KEY}", "x-api-key": PLACEHOLDER_KEY}


def test_stream_passes_through_byte_for_byte_with_the_real_key_and_usage_logged(upstream: str) -> None:
    with (
        gateway_on_loopback(config_for(upstream), {"openai": KEY}) as (url, _, log),
        httpx.stream(
            "POST",
            f"{url}/openai/chat/completions",
            json={"model": "gpt-4o-mini", "stream": True, "messages": []},
            headers=PLACEHOLDER_AUTH,
        ) as response,
    ):
        body = response.read()
    assert response.status_code == 200
    assert body == scripted_upstream.sse_body()
    assert response.headers["x-auth-sha256"] == hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()
    assert (response.headers["x-auth-headers"], response.headers["x-api-key-seen"]) == ("1", "no")
    [call] = calls(log)
    assert (call.upstream, call.status, call.streamed, call.model) == (
        "openai",
        200,
        True,
        scripted_upstream.MODEL,
    )
    assert (call.tokens_in, call.tokens_out, call.cache_read_tokens) == (11, 2, 4)
    # gpt-4o-mini: 7 fresh input tokens at 0.15, 4 cached at 0.075, 2 output at 0.60 per million
    assert call.cost_usd == pytest.approx((7 * 0.15 + 4 * 0.075 + 2 * 0.60) / 1e6)
    assert KEY not in log.getvalue() and PLACEHOLDER_KEY not in log.getvalue()


def test_json_usage_is_logged_and_an_unpriced_model_costs_none(upstream: str) -> None:
    with gateway_on_loopback(config_for(upstream, prices={}), {"openai": KEY}) as (url, _, log):
        response = httpx.post(f"{url}/openai/chat/completions", json={"model": "x"}, headers=PLACEHOLDER_AUTH)
    assert response.json() == scripted_upstream.JSON_ANSWER
    [call] = calls(log)
    assert (call.tokens_in, call.tokens_out, call.cost_usd, call.streamed) == (100, 20, None, False)


@pytest.mark.parametrize(
    "target",
    ["/anthropic/v1/messages", "/openai/files", "/openai/../admin", "http://127.0.0.1:1/", "/"],
)
def test_targets_off_the_allowlist_are_refused_and_never_forwarded(upstream: str, target: str) -> None:
    with gateway_on_loopback(config_for(upstream), {"openai": KEY}) as (url, _, log):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(f"GET {target} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
            reply = b"".join(iter(lambda: sock.recv(65536), b""))
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403")
    assert json.loads(body)["error"]["type"] == "docdelta_gateway_refused"
    [call] = calls(log)
    assert (call.status, call.error, call.tokens_in) == (403, "refused", None)


@pytest.mark.parametrize("budget", [Budget(max_requests=1), Budget(max_tokens=50)])
def test_calls_past_the_budget_get_a_clear_budget_error(upstream: str, budget: Budget) -> None:
    with gateway_on_loopback(config_for(upstream, budget=budget), {"openai": KEY}) as (url, _, log):
        first = httpx.post(f"{url}/openai/chat/completions", json={}, headers=PLACEHOLDER_AUTH)
        second = httpx.post(f"{url}/openai/chat/completions", json={}, headers=PLACEHOLDER_AUTH)
    assert first.status_code == 200
    assert second.status_code == 402
    assert second.json()["error"]["type"] == "budget_exceeded"
    assert [c.error for c in calls(log)] == [None, "budget"]


def test_an_unreachable_upstream_is_a_502_without_the_key() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with gateway_on_loopback(config_for(dead), {"openai": KEY}) as (url, _, log):
        response = httpx.post(f"{url}/openai/chat/completions", json={}, headers=PLACEHOLDER_AUTH)
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "docdelta_gateway_upstream"
    assert KEY not in response.text and KEY not in log.getvalue()
    assert [c.error for c in calls(log)] == ["upstream"]
