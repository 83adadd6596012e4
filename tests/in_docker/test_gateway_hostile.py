"""The gateway attacked as a hostile agent would attack it: an instruction file
from a PR can make the agent send anything to the gateway. Every request below is one the
gateway used to forward with the real key; now each is refused (or sanitised) and the
scripted upstream's own request log shows what, if anything, arrived.

The gateway process's handler on 127.0.0.1 against the real scripted model server; the
container side (the run token on the egress network, kill -9) is in test_docker_hostile.py.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from docker_helpers import RUN_TOKEN, gateway_on_loopback
from modelserver import ScriptedModelServer
from modelserver.script import Script, TextTurn, TurnUsage

from docdelta.gateway.config import ANTHROPIC, GEMINI, OPENAI, Budget, GatewayConfig, ModelCall
from docdelta.gateway.server import MAX_CONNECTIONS

KEY = "sk-hostile-real-key-0123456789"
MODEL = "gpt-4o-mini"
GEMINI_MODEL = "gemini-2.5-flash"
AUTH = {"authorization": f"Bearer {RUN_TOKEN}"}
ANTHROPIC_AUTH = {"x-api-key": RUN_TOKEN, "anthropic-version": "2023-06-01"}
GEMINI_AUTH = {"x-goog-api-key": RUN_TOKEN}
CHAT = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
USAGE = TurnUsage(input_tokens=20, output_tokens=100)
"""What a small request really costs: about a token per 4 bytes of its body, and `max_tokens` out."""


@pytest.fixture
def upstream() -> Iterator[ScriptedModelServer]:
    turns = [TextTurn(text="Hello", usage=USAGE)] * 40
    with ScriptedModelServer(Script(name="hostile", turns=turns)) as server:
        yield server


def config_for(base_url: str, **kw: Any) -> GatewayConfig:
    routes = [
        OPENAI.model_copy(update={"base_url": f"{base_url}/v1"}),
        ANTHROPIC.model_copy(update={"base_url": base_url}),
        GEMINI.model_copy(update={"base_url": base_url}),
    ]
    return GatewayConfig(upstreams=routes, **kw)


KEYS = {"openai": KEY, "anthropic": KEY, "gemini": KEY}


def raw(url: str, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (httpx would normalise the target) and read the reply."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        reply = b"".join(iter(lambda: sock.recv(65536), b""))
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def request_bytes(method: str, target: str, body: Any = None, headers: dict[str, str] | None = None) -> bytes:
    data = b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {target} HTTP/1.1", "host: gateway", f"content-length: {len(data)}"]
    lines += [f"{k}: {v}" for k, v in {**AUTH, "content-type": "application/json", **(headers or {})}.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def calls(log: io.StringIO) -> list[ModelCall]:
    return [ModelCall.model_validate_json(line) for line in log.getvalue().splitlines()]


OFF_THE_ALLOWLIST = [
    ("DELETE", "/openai/models/ft:gpt-4o-mini:acme::abc123"),  # delete a fine-tuned model
    ("GET", "/openai/chat/completions"),  # list stored completions
    ("GET", "/openai/chat/completions/chatcmpl-1/messages"),  # read one
    ("DELETE", "/openai/chat/completions/chatcmpl-1"),
    ("GET", "/openai/responses/resp_1"),  # read a stored response
    ("DELETE", "/openai/responses/resp_1"),
    ("POST", "/openai/responses/resp_1/cancel"),
    ("POST", "/openai/files"),
    ("POST", "/openai/batches"),
    ("POST", "/anthropic/v1/messages/batches"),
    ("GET", "/anthropic/v1/messages/batches"),
    ("POST", "/gemini/v1beta/models/gemini-2.5-flash:batchGenerateContent"),
    ("POST", "/gemini/v1beta/batches"),
    ("POST", "/gemini/v1beta/files"),
    ("POST", "/openai/chat/completionsX"),  # a prefix without a path boundary
    ("POST", "/openai/chat/completions/../../files"),
    ("POST", "/openai/chat/completions%2F..%2F..%2Ffiles"),  # percent-encoded / and ..
    ("POST", "/openai/chat/completions/%2e%2e/%2e%2e/files"),
    ("POST", "/openai/chat%2fcompletions"),
    ("POST", "/openai/chat/completions;x=1"),
    ("POST", "/openai/chat/completions?api-version=1"),  # an unknown query parameter
    ("POST", "http://127.0.0.1:1/v1/chat/completions"),  # absolute form: a proxy request elsewhere
    ("CONNECT", "api.openai.com:443"),
    ("GET", "/"),
]


@pytest.mark.parametrize(("method", "target"), OFF_THE_ALLOWLIST)
def test_requests_off_the_exact_allowlist_are_refused_and_never_arrive(
    upstream: ScriptedModelServer, method: str, target: str
) -> None:
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, _, log):
        status, body = raw(url, request_bytes(method, target, CHAT if method == "POST" else None))
    assert status == 403, body
    assert json.loads(body)["error"]["type"] == "docdelta_gateway_refused"
    assert upstream.requests == []
    [call] = calls(log)
    assert (call.status, call.error) == (403, "refused")


def test_a_normalised_path_is_forwarded_only_in_its_canonical_form(upstream: ScriptedModelServer) -> None:
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, _, _log):
        status, _ = raw(url, request_bytes("POST", "/openai//chat/./completions", CHAT))
    assert status == 200
    assert [r["path"] for r in upstream.requests] == ["/v1/chat/completions"]


def test_org_and_project_switches_and_unknown_headers_never_reach_the_upstream(
    upstream: ScriptedModelServer,
) -> None:
    sneaky = {
        "openai-organization": "org-evil",
        "openai-project": "proj-evil",
        "x-goog-user-project": "evil",
        "cookie": "session=1",
        "x-forwarded-for": "1.2.3.4",
        "user-agent": "codex_cli_rs/0.1",
    }
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, _, _log):
        status, _ = raw(url, request_bytes("POST", "/openai/chat/completions", CHAT, sneaky))
    assert status == 200
    [seen] = upstream.requests
    assert set(sneaky) & set(seen["headers"]) == {"user-agent"}


def test_anthropic_betas_off_the_allowlist_are_dropped(upstream: ScriptedModelServer) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    betas = {"anthropic-beta": "web-fetch-2025-09-10, interleaved-thinking-2025-05-14,mcp-client-2025-04-04"}
    config = config_for(upstream.url, model="claude-sonnet-4-5")
    with gateway_on_loopback(config, KEYS) as (url, _, _log):
        status, _ = raw(
            url, request_bytes("POST", "/anthropic/v1/messages", body, {**ANTHROPIC_AUTH, **betas})
        )
    assert status == 200
    [seen] = upstream.requests
    assert seen["headers"]["anthropic-beta"] == "interleaved-thinking-2025-05-14"


RESPONSES, CHAT_PATH, MESSAGES = "/openai/responses", "/openai/chat/completions", "/anthropic/v1/messages"
GENERATE = f"/gemini/v1beta/models/{GEMINI_MODEL}:generateContent"
CLAUDE = "claude-sonnet-4-5"
EVIL = "https://evil.example"
SERVER_SIDE_TOOLS = [
    (RESPONSES, MODEL, {"tools": [{"type": "mcp", "server_url": EVIL, "server_label": "x"}]}),
    (RESPONSES, MODEL, {"tools": [{"type": "web_search_preview"}]}),
    (RESPONSES, MODEL, {"tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}),
    (RESPONSES, MODEL, {"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}),
    (RESPONSES, MODEL, {"tools": [{"type": "computer_use_preview"}]}),
    (RESPONSES, MODEL, {"background": True}),
    (RESPONSES, MODEL, {"tools": [{"type": "namespace", "name": "n", "tools": [{"type": "mcp"}]}]}),
    (CHAT_PATH, MODEL, {"web_search_options": {}}),
    (CHAT_PATH, MODEL, {"tools": [{"type": "web_search"}]}),
    (MESSAGES, CLAUDE, {"mcp_servers": [{"type": "url", "url": EVIL, "name": "x"}]}),
    (MESSAGES, CLAUDE, {"tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]}),
    (MESSAGES, CLAUDE, {"tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
    (MESSAGES, CLAUDE, {"tools": [{"type": "code_execution_20250825", "name": "code_execution"}]}),
    (MESSAGES, CLAUDE, {"container": "container_1"}),
    (GENERATE, None, {"tools": [{"googleSearch": {}}]}),
    (GENERATE, None, {"tools": [{"urlContext": {}}]}),
    (GENERATE, None, {"tools": [{"codeExecution": {}}]}),
]


@pytest.mark.parametrize(("target", "model", "extra"), SERVER_SIDE_TOOLS)
def test_provider_side_tools_are_refused(
    upstream: ScriptedModelServer, target: str, model: str | None, extra: dict[str, Any]
) -> None:
    body = {"max_tokens": 100, "input": "hi", **({"model": model} if model else {}), **extra}
    config = config_for(upstream.url, model=model or GEMINI_MODEL)
    headers = {**ANTHROPIC_AUTH, **GEMINI_AUTH}
    with gateway_on_loopback(config, KEYS) as (url, _, _log):
        status, reply = raw(url, request_bytes("POST", target, body, headers))
    assert status == 403, reply
    assert "tool" in json.loads(reply)["error"]["message"] or "background" in reply.decode()
    assert upstream.requests == []


def test_a_project_can_enable_one_provider_side_tool(upstream: ScriptedModelServer) -> None:
    body = {**CHAT, "input": "hi", "tools": [{"type": "web_search_preview"}]}
    config = config_for(upstream.url, model=MODEL, server_tools=["web_search_preview"])
    with gateway_on_loopback(config, KEYS) as (url, _, _log):
        status, _ = raw(url, request_bytes("POST", "/openai/responses", body))
    assert status == 200
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    ("target", "body"),
    [
        ("/openai/chat/completions", {**CHAT, "model": "o1-pro"}),
        ("/openai/chat/completions", {key: value for key, value in CHAT.items() if key != "model"}),
        ("/gemini/v1beta/models/gemini-2.5-pro:generateContent", {"contents": []}),
    ],
)
def test_another_model_than_the_runs_is_refused(
    upstream: ScriptedModelServer, target: str, body: dict[str, Any]
) -> None:
    config = config_for(upstream.url, model=MODEL)
    with gateway_on_loopback(config, KEYS) as (url, _, _log):
        status, reply = raw(url, request_bytes("POST", target, body, GEMINI_AUTH))
    assert status == 403, reply
    assert "model" in json.loads(reply)["error"]["message"]
    assert upstream.requests == []


def test_an_unpriced_model_is_refused_unless_priced_or_free(upstream: ScriptedModelServer) -> None:
    body = {**CHAT, "model": "my-local-llm"}
    with gateway_on_loopback(config_for(upstream.url, model="my-local-llm"), KEYS) as (url, _, _log):
        status, reply = raw(url, request_bytes("POST", "/openai/chat/completions", body))
    assert status == 403 and "price" in json.loads(reply)["error"]["message"]
    assert upstream.requests == []
    free = config_for(upstream.url, model="my-local-llm", prices={"my-local-llm": {"input": 0, "output": 0}})
    with gateway_on_loopback(free, KEYS) as (url, _, log):
        status, _ = raw(url, request_bytes("POST", "/openai/chat/completions", body))
    assert status == 200
    [call] = calls(log)
    assert call.cost_usd == 0.0


@pytest.mark.parametrize(
    "auth",
    [{}, {"authorization": "Bearer sk-guess"}, {"x-api-key": "docdelta-placeholder-key"}],
)
def test_a_client_without_the_run_token_gets_401(upstream: ScriptedModelServer, auth: dict[str, str]) -> None:
    request = request_bytes("POST", "/openai/chat/completions", CHAT).replace(
        f"authorization: Bearer {RUN_TOKEN}\r\n".encode(),
        "".join(f"{k}: {v}\r\n" for k, v in auth.items()).encode(),
    )
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, _, log):
        status, _ = raw(url, request)
    assert status == 401
    assert upstream.requests == []
    assert [c.status for c in calls(log)] == [401]


def test_a_stream_without_include_usage_gets_it_and_is_billed(upstream: ScriptedModelServer) -> None:
    body = {**CHAT, "stream": True}
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, _, log):
        status, _ = raw(url, request_bytes("POST", "/openai/chat/completions", body))
    assert status == 200
    [seen] = upstream.requests
    assert seen["body"]["stream_options"] == {"include_usage": True}
    [call] = calls(log)
    assert (call.tokens_in, call.tokens_out) == (20, 100)
    assert call.cost_usd == pytest.approx((20 * 0.15 + 100 * 0.60) / 1e6)


def test_thirty_parallel_calls_never_overspend_the_budget(upstream: ScriptedModelServer) -> None:
    # Each call: 20 in + 100 out at gpt-4o-mini prices; its worst case (100 out and the
    # body's estimated input) is a little more. Ten calls' worth of budget for thirty calls.
    per_call = (20 * 0.15 + 100 * 0.60) / 1e6
    budget = Budget(max_cost_usd=10 * per_call)
    with (
        gateway_on_loopback(config_for(upstream.url, model=MODEL, budget=budget), KEYS) as (url, _, log),
        concurrent.futures.ThreadPoolExecutor(30) as pool,
    ):
        request = request_bytes("POST", "/openai/chat/completions", CHAT)
        statuses = list(pool.map(lambda _: raw(url, request)[0], range(30)))
    logged = calls(log)
    spent = sum(c.cost_usd or 0.0 for c in logged)
    forwarded = [c for c in logged if c.status == 200]
    assert statuses.count(200) == len(forwarded) == len(upstream.requests) >= 1
    assert statuses.count(402) == 30 - len(forwarded)
    # Settled usage is below each call's worst case here, so the ledger holds exactly.
    assert spent <= budget.max_cost_usd


def test_an_oversized_body_is_refused_without_reading_it(upstream: ScriptedModelServer) -> None:
    head = (
        "POST /openai/chat/completions HTTP/1.1\r\nhost: gateway\r\n"
        f"authorization: Bearer {RUN_TOKEN}\r\ncontent-length: {100 * 1024 * 1024}\r\n\r\n"
    )
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, _, _log):
        status, _ = raw(url, head.encode())
    assert status == 413
    assert upstream.requests == []


def test_refused_requests_are_logged_by_count_and_first_line(upstream: ScriptedModelServer) -> None:
    long_target = "/openai/" + "x" * 20_000
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, gateway, log):
        for _ in range(300):
            raw(url, request_bytes("POST", long_target, CHAT))
        gateway.finish()
    logged = calls(log)
    assert sum(c.count for c in logged) == 300
    assert len(log.getvalue()) < 20_000, "refusals are not logged in full"


def test_half_open_connections_are_capped(upstream: ScriptedModelServer) -> None:
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, _, _log):
        host, port = url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(MAX_CONNECTIONS)]
        try:
            # Each idle connection holds a slot until its head timeout; the next is turned away.
            for sock in idle:
                sock.sendall(b"GET")  # a request line that never ends
            # Turned away at once: a 503, or a reset when it closes before reading the request.
            try:
                status, _ = raw(url, request_bytes("POST", "/openai/chat/completions", CHAT))
            except ConnectionResetError:
                status = 503
            assert status == 503
            assert upstream.requests == []
        finally:
            for sock in idle:
                sock.close()
        assert raw(url, request_bytes("POST", "/openai/chat/completions", CHAT))[0] == 200


PIXEL = "data:image/png;base64,iVBORw0KGgo="
SIDE_DOORS = [
    # OpenAI Chat Completions: a URL the provider fetches, stored completions, audio.
    (
        CHAT_PATH,
        MODEL,
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": EVIL}}]}]},
    ),
    (
        CHAT_PATH,
        MODEL,
        {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]},
    ),
    (CHAT_PATH, MODEL, {"store": True}),
    (CHAT_PATH, MODEL, {"metadata": {"leak": "x"}}),
    (CHAT_PATH, MODEL, {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}),
    (CHAT_PATH, MODEL, {"audio": {"voice": "alloy", "format": "wav"}}),
    # OpenAI Responses: URL inputs, stored responses, conversations, prompts and items.
    (RESPONSES, MODEL, {"input": [{"role": "user", "content": [{"type": "input_file", "file_url": EVIL}]}]}),
    (
        RESPONSES,
        MODEL,
        {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]},
    ),
    (
        RESPONSES,
        MODEL,
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": EVIL}]}]},
    ),
    (RESPONSES, MODEL, {"input": [{"type": "item_reference", "id": "msg_1"}]}),
    (RESPONSES, MODEL, {"previous_response_id": "resp_1"}),
    (RESPONSES, MODEL, {"conversation": "conv_1"}),
    (RESPONSES, MODEL, {"prompt": {"id": "pmpt_1"}}),
    (RESPONSES, MODEL, {"store": True}),
    (RESPONSES, MODEL, {"store": False, "metadata": {"leak": "x"}}),
    (RESPONSES, MODEL, {"store": False, "include": ["file_search_call.results"]}),
    # Anthropic: URL and Files API sources, also inside a tool result.
    (
        MESSAGES,
        CLAUDE,
        {
            "messages": [
                {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": EVIL}}]}
            ]
        },
    ),
    (
        MESSAGES,
        CLAUDE,
        {
            "messages": [
                {"role": "user", "content": [{"type": "document", "source": {"type": "url", "url": EVIL}}]}
            ]
        },
    ),
    (
        MESSAGES,
        CLAUDE,
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "document", "source": {"type": "file", "file_id": "file_1"}}],
                }
            ]
        },
    ),
    (
        MESSAGES,
        CLAUDE,
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "image", "source": {"type": "url", "url": EVIL}}],
                        }
                    ],
                }
            ]
        },
    ),
    # Gemini: files and URIs the provider fetches, cached contents.
    (
        GENERATE,
        None,
        {"contents": [{"role": "user", "parts": [{"fileData": {"fileUri": EVIL, "mimeType": "text/html"}}]}]},
    ),
    (GENERATE, None, {"contents": [{"role": "user", "parts": [{"file_data": {"file_uri": EVIL}}]}]}),
    (GENERATE, None, {"systemInstruction": {"parts": [{"fileData": {"fileUri": EVIL}}]}}),
    (GENERATE, None, {"cachedContent": "cachedContents/abc"}),
]


@pytest.mark.parametrize(("target", "model", "extra"), SIDE_DOORS)
def test_side_doors_to_urls_and_stored_objects_are_refused_and_logged(
    upstream: ScriptedModelServer, target: str, model: str | None, extra: dict[str, Any]
) -> None:
    base: dict[str, Any] = {"max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "input": "hi"}
    body = {**base, **({"model": model} if model else {}), **extra}
    config = config_for(upstream.url, model=model or GEMINI_MODEL)
    with gateway_on_loopback(config, KEYS) as (url, _, log):
        status, reply = raw(url, request_bytes("POST", target, body, {**ANTHROPIC_AUTH, **GEMINI_AUTH}))
    assert status == 403, reply
    error = json.loads(reply)["error"]
    assert error["type"] == "docdelta_gateway_refused"
    assert "not allowed" in error["message"], error["message"]
    assert upstream.requests == []
    [call] = calls(log)
    assert (call.status, call.error) == (403, "refused")


INLINE_INPUTS = [
    (
        CHAT_PATH,
        MODEL,
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": PIXEL}}]}]},
    ),
    (CHAT_PATH, MODEL, {"store": False, "n": 1}),
    (
        RESPONSES,
        MODEL,
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": PIXEL}]}]},
    ),
    (RESPONSES, MODEL, {"store": False, "include": ["reasoning.encrypted_content"]}),
    (
        MESSAGES,
        CLAUDE,
        {
            "metadata": {"user_id": "u"},
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                        }
                    ],
                }
            ],
        },
    ),
    (
        GENERATE,
        None,
        {
            "contents": [
                {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]}
            ]
        },
    ),
]


@pytest.mark.parametrize(("target", "model", "extra"), INLINE_INPUTS)
def test_inline_data_and_what_agents_send_still_pass(
    upstream: ScriptedModelServer, target: str, model: str | None, extra: dict[str, Any]
) -> None:
    base: dict[str, Any] = {"max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "input": "hi"}
    body = {**base, **({"model": model} if model else {}), **extra}
    config = config_for(upstream.url, model=model or GEMINI_MODEL)
    with gateway_on_loopback(config, KEYS) as (url, _, _log):
        status, reply = raw(url, request_bytes("POST", target, body, {**ANTHROPIC_AUTH, **GEMINI_AUTH}))
    assert status == 200, reply
    assert len(upstream.requests) == 1


def test_a_responses_call_is_never_stored_by_default(upstream: ScriptedModelServer) -> None:
    body = {"model": MODEL, "input": "hi", "max_output_tokens": 100}
    with gateway_on_loopback(config_for(upstream.url, model=MODEL), KEYS) as (url, _, _log):
        status, _ = raw(url, request_bytes("POST", RESPONSES, body))
    assert status == 200
    [seen] = upstream.requests
    assert seen["body"]["store"] is False  # the Responses API stores by default


@pytest.mark.parametrize(
    ("target", "model", "extra"),
    [
        (CHAT_PATH, MODEL, {"n": 128}),
        (GENERATE, None, {"generationConfig": {"candidateCount": 128, "maxOutputTokens": 100}}),
    ],
)
def test_thirty_parallel_calls_asking_for_many_answers_cannot_overspend(
    upstream: ScriptedModelServer, target: str, model: str | None, extra: dict[str, Any]
) -> None:
    # A provider bills every one of n answers: the budget's worst case is counted for one.
    # More than one answer per call is refused, so none of the thirty reaches the upstream.
    per_call = (20 * 0.15 + 100 * 0.60) / 1e6
    budget = Budget(max_cost_usd=10 * per_call)
    body = {**CHAT, **({"model": model} if model else {}), **extra}
    if model is None:
        del body["model"]
    config = config_for(upstream.url, model=model or GEMINI_MODEL, budget=budget)
    with (
        gateway_on_loopback(config, KEYS) as (url, _, log),
        concurrent.futures.ThreadPoolExecutor(30) as pool,
    ):
        request = request_bytes("POST", target, body, GEMINI_AUTH)
        replies = list(pool.map(lambda _: raw(url, request), range(30)))
    assert {status for status, _ in replies} == {403}
    assert "one answer per call" in json.loads(replies[0][1])["error"]["message"]
    assert upstream.requests == []
    assert sum(c.cost_usd or 0.0 for c in calls(log)) == 0.0
