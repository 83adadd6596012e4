"""The scripted model server driven by the official `anthropic`, `openai` and `google-genai`
SDKs over real HTTP on 127.0.0.1: if their parsers (the stream accumulators above all)
accept our answers and read back the scripted tool calls, texts and usage, the wire shapes
are right."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from modelserver import ScriptedModelServer
from modelserver.script import Script, TextTurn, ToolTurn, TurnUsage

from docdelta.gateway.usage import extract

ANSWER = '{"answer": "tabs, not spaces", "cited": ["AGENTS.md"]}'
MARKER = "Indent with tabs. (marker 7f3c)"
SCRIPT = Script(
    name="reads-agents-md",
    turns=[
        ToolTurn.shell(
            "cat AGENTS.md",
            usage=TurnUsage(input_tokens=100, output_tokens=20, cache_read_tokens=30, cache_write_tokens=5),
        ),
        TextTurn(text=ANSWER),
    ],
)
SHELL: dict[str, Any] = {"tool": "shell", "args": {"command": "cat AGENTS.md"}}
PROMPT = "How should I indent code in this repository? Answer in JSON."
SHELL_SCHEMA: Any = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(SCRIPT) as running:
        yield running


def claude(server: ScriptedModelServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="placeholder-key", max_retries=0)


def gpt(server: ScriptedModelServer, max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="placeholder-key", max_retries=max_retries)


# ------------------------------------------------------------------ Anthropic Messages
def messages_call(client: anthropic.Anthropic, stream: bool, messages: list[Any]) -> Any:
    kwargs: dict[str, Any] = {
        "model": "claude-scripted",
        "max_tokens": 1024,
        "system": f"Contents of /work/AGENTS.md:\n{MARKER}",
        "tools": [{"name": "Bash", "description": "Run a shell command", "input_schema": SHELL_SCHEMA}],
        "messages": messages,
    }
    if not stream:
        return client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as events:
        return events.get_final_message()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_tool_round_trip(server: ScriptedModelServer, stream: bool) -> None:
    client = claude(server)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    first = messages_call(client, stream, messages)

    assert first.stop_reason == "tool_use"
    (call,) = first.content
    assert (call.type, call.name, call.input) == ("tool_use", "Bash", {"command": "cat AGENTS.md"})
    usage = first.usage
    assert (usage.input_tokens, usage.output_tokens) == (100, 20)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (30, 5)

    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": MARKER}]},
    ]
    second = messages_call(client, stream, messages)
    assert second.stop_reason == "end_turn"
    assert [block.text for block in second.content] == [ANSWER]
    assert json.loads(second.content[0].text)["cited"] == ["AGENTS.md"]
    assert second.usage.output_tokens == len(ANSWER) // 4  # estimated: the script gave no usage
    assert server.remaining == 0


def test_anthropic_stream_sends_text_and_tool_json_in_pieces() -> None:
    script = {"name": "talks-then-calls", "turns": [{"text": "Let me look at the file first.", **SHELL}]}
    with (
        ScriptedModelServer(script) as server,
        claude(server).messages.stream(
            model="claude-scripted",
            max_tokens=64,
            tools=[{"name": "Bash", "input_schema": SHELL_SCHEMA}],
            messages=[{"role": "user", "content": PROMPT}],
        ) as stream,
    ):
        events = list(stream)
        final: Any = stream.get_final_message()
    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert deltas.count("text_delta") > 1 and deltas.count("input_json_delta") > 1
    assert [block.type for block in final.content] == ["text", "tool_use"]
    assert final.content[0].text == "Let me look at the file first."
    assert final.content[1].input == {"command": "cat AGENTS.md"}


# ------------------------------------------------------------------ OpenAI Chat Completions
def chat_call(client: openai.OpenAI, stream: bool, messages: list[Any]) -> Any:
    kwargs: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "shell", "parameters": SHELL_SCHEMA}}],
    }
    if not stream:
        return client.chat.completions.create(**kwargs)
    with client.chat.completions.stream(**kwargs, stream_options={"include_usage": True}) as events:
        return events.get_final_completion()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_completions_tool_round_trip(server: ScriptedModelServer, stream: bool) -> None:
    client = gpt(server)
    messages: list[Any] = [{"role": "system", "content": MARKER}, {"role": "user", "content": PROMPT}]
    first = chat_call(client, stream, messages)

    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "shell"
    assert json.loads(call.function.arguments) == {"command": "cat AGENTS.md"}
    # OpenAI counts cached tokens inside the prompt: 100 fresh + 30 read + 5 written
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (135, 20)
    assert first.usage.prompt_tokens_details.cached_tokens == 30

    messages += [
        choice.message.model_dump(include={"role", "content", "tool_calls"}),
        {"role": "tool", "tool_call_id": call.id, "content": MARKER},
    ]
    second = chat_call(client, stream, messages)
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == ANSWER
    assert second.model == "gpt-4o-mini"  # the script names no model: the request's is echoed


def test_chat_stream_reports_usage_only_when_asked() -> None:
    script = {"name": "no-usage-option", "turns": [{"text": "hello"}]}
    with ScriptedModelServer(script) as server:
        chunks = list(
            gpt(server).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello"
    assert all(chunk.usage is None for chunk in chunks)


# ------------------------------------------------------------------ OpenAI Responses
def responses_call(client: openai.OpenAI, stream: bool, items: list[Any]) -> Any:
    kwargs: dict[str, Any] = {
        "model": "gpt-5-codex",
        "instructions": MARKER,
        "input": items,
        "tools": [
            {"type": "function", "name": "apply_patch", "parameters": {"type": "object", "properties": {}}},
            {
                "type": "function",
                "name": "exec_command",
                "parameters": {
                    "type": "object",
                    "properties": {"cmd": {"type": "string"}},
                    "required": ["cmd"],
                },
            },
        ],
    }
    if not stream:
        return client.responses.create(**kwargs)
    with client.responses.stream(**kwargs) as events:
        return events.get_final_response()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_responses_tool_round_trip(server: ScriptedModelServer, stream: bool) -> None:
    client = gpt(server)
    items: list[Any] = [{"role": "user", "content": PROMPT}]
    first = responses_call(client, stream, items)

    (call,) = first.output
    assert (call.type, call.name) == ("function_call", "exec_command")  # Codex's name for the shell
    assert json.loads(call.arguments) == {"cmd": "cat AGENTS.md"}
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.total_tokens) == (135, 20, 155)
    assert first.usage.input_tokens_details.cached_tokens == 30

    items += [
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": MARKER},
    ]
    second = responses_call(client, stream, items)
    assert second.status == "completed"
    assert second.output_text == ANSWER


def test_responses_stream_event_order() -> None:
    with ScriptedModelServer({"name": "order", "turns": [{"text": "done", **SHELL}]}) as server:
        client = gpt(server)
        with client.responses.stream(model="m", input="hi", tools=[_fn("shell")]) as stream:
            kinds = [event.type for event in stream]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for expected in ("response.output_text.delta", "response.function_call_arguments.delta"):
        assert expected in kinds
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 2


def _fn(name: str) -> Any:
    return {"type": "function", "name": name, "parameters": SHELL_SCHEMA}


# ------------------------------------------------------------------ Gemini
GEMINI_MODEL = "gemini-2.5-flash"
GEMINI_TOOLS = genai_types.GenerateContentConfig(
    system_instruction=MARKER,
    tools=[
        genai_types.Tool(
            function_declarations=[
                genai_types.FunctionDeclaration(
                    name="run_shell_command",
                    description="Run a shell command",
                    parameters_json_schema=SHELL_SCHEMA,
                )
            ]
        )
    ],
)


def gemini(server: ScriptedModelServer) -> genai.Client:
    options = genai_types.HttpOptions(base_url=server.url, api_version="v1beta")
    return genai.Client(api_key="placeholder-key", http_options=options)


def gemini_call(
    client: genai.Client, stream: bool, contents: list[Any]
) -> tuple[genai_types.GenerateContentResponse, list[genai_types.Part]]:
    """(the response, or a stream's last chunk; every part the model sent)."""
    if not stream:
        whole = client.models.generate_content(model=GEMINI_MODEL, contents=contents, config=GEMINI_TOOLS)
        chunks = [whole]
    else:
        chunks = list(
            client.models.generate_content_stream(model=GEMINI_MODEL, contents=contents, config=GEMINI_TOOLS)
        )
    sent = [chunk.candidates[0].content for chunk in chunks if chunk.candidates]
    parts = [part for content in sent if content and content.parts for part in content.parts]
    return chunks[-1], parts


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_gemini_tool_round_trip(server: ScriptedModelServer, stream: bool) -> None:
    client = gemini(server)
    contents: list[Any] = [genai_types.Content(role="user", parts=[genai_types.Part(text=PROMPT)])]
    first, parts = gemini_call(client, stream, contents)

    (part,) = parts
    assert part.function_call is not None
    assert (part.function_call.name, part.function_call.args) == (
        "run_shell_command",
        {"command": "cat AGENTS.md"},
    )
    assert first.candidates and first.candidates[0].finish_reason == genai_types.FinishReason.STOP
    usage = first.usage_metadata
    assert usage is not None
    # Gemini counts cached tokens inside the prompt, like OpenAI: 100 fresh + 30 read + 5 written
    assert (usage.prompt_token_count, usage.candidates_token_count, usage.total_token_count) == (135, 20, 155)
    assert usage.cached_content_token_count == 30

    reply = genai_types.Part.from_function_response(name="run_shell_command", response={"output": MARKER})
    contents += [
        genai_types.Content(role="model", parts=parts),
        genai_types.Content(role="user", parts=[reply]),
    ]
    second, parts = gemini_call(client, stream, contents)
    assert "".join(p.text or "" for p in parts) == ANSWER
    assert second.model_version == GEMINI_MODEL  # the script names no model: the URL's is echoed
    assert server.remaining == 0

    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    assert {r["path"] for r in server.requests} == {f"/v1beta/models/{GEMINI_MODEL}:{method}"}
    sent = server.requests[1]["body"]
    assert MARKER in json.dumps(sent["systemInstruction"])
    assert sent["contents"][-1]["parts"][0]["functionResponse"]["response"] == {"output": MARKER}


def test_gemini_stream_sends_text_in_pieces_and_finishes_once() -> None:
    script = {
        "name": "gemini-talks-then-calls",
        "turns": [{"text": "Let me look at the file first.", **SHELL}],
    }
    with ScriptedModelServer(script) as server:
        client = gemini(server)  # held: a collected client closes its connection mid-stream
        chunks = list(client.models.generate_content_stream(model="m", contents="hi", config=GEMINI_TOOLS))
    assert len(chunks) > 2
    assert "".join(chunk.text or "" for chunk in chunks[:-1]) == "Let me look at the file first."
    assert chunks[-1].function_calls and chunks[-1].function_calls[0].name == "run_shell_command"
    finished = [chunk for chunk in chunks if chunk.candidates and chunk.candidates[0].finish_reason]
    assert finished == chunks[-1:] and chunks[-1].usage_metadata is not None


def test_gemini_errors_reach_the_sdk_as_googles_errors() -> None:
    script = {
        "name": "gemini-flaky",
        "turns": [{"error": 429, "retry_after": 7, "message": "slow down"}, {"error": 500}],
    }
    with ScriptedModelServer(script) as server:
        client = gemini(server)
        with pytest.raises(genai_errors.ClientError) as limited:
            client.models.generate_content(model=GEMINI_MODEL, contents="hi")
        assert (limited.value.code, limited.value.status, limited.value.message) == (
            429,
            "RESOURCE_EXHAUSTED",
            "slow down",
        )
        retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}
        assert limited.value.details["error"]["details"] == [retry]
        with pytest.raises(genai_errors.ServerError, match="scripted error 500"):
            list(client.models.generate_content_stream(model=GEMINI_MODEL, contents="hi"))
        with pytest.raises(genai_errors.ServerError, match="'gemini-flaky' is exhausted after 2 turns"):
            client.models.generate_content(model=GEMINI_MODEL, contents="hi")
        # Counting tokens uses no turn; a stream is served only as SSE, as the SDKs ask for it.
        assert (client.models.count_tokens(model=GEMINI_MODEL, contents=PROMPT).total_tokens or 0) > 0
        raw = httpx.post(f"{server.url}/v1beta/models/{GEMINI_MODEL}:streamGenerateContent", json={})
        assert raw.status_code == 400 and raw.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert [r["turn"] for r in server.requests] == [0, 1, None, None, None]


# ------------------------------------------------------------------ models, log, errors
def test_side_endpoints_parse_and_use_no_turn(server: ScriptedModelServer) -> None:
    assert [m.id for m in gpt(server).models.list()] == ["docdelta-scripted"]
    assert [m.id for m in claude(server).models.list()] == ["docdelta-scripted"]
    counted = claude(server).messages.count_tokens(model="m", messages=[{"role": "user", "content": PROMPT}])
    assert counted.input_tokens > 0
    assert server.remaining == len(SCRIPT.turns)


def test_request_log_shows_what_reached_the_model(server: ScriptedModelServer) -> None:
    messages_call(claude(server), True, [{"role": "user", "content": PROMPT}])
    gpt(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])

    log = httpx.get(server.url + "/_docdelta/requests").json()
    assert log["script"] == "reads-agents-md" and log["remaining"] == 0
    first, second = log["requests"]
    assert (first["method"], first["path"], first["turn"]) == ("POST", "/v1/messages", 0)
    assert MARKER in first["body"]["system"] and first["body"]["stream"] is True
    assert first["headers"]["anthropic-version"]
    assert (second["path"], second["turn"]) == ("/v1/chat/completions", 1)
    for entry in log["requests"]:
        assert not {"x-api-key", "authorization"} & set(entry["headers"])
    assert "placeholder-key" not in json.dumps(log)
    assert server.requests == log["requests"]


def test_exhausted_script_answers_500_naming_the_script(server: ScriptedModelServer) -> None:
    client = claude(server)
    for _ in SCRIPT.turns:
        messages_call(client, False, [{"role": "user", "content": PROMPT}])
    with pytest.raises(anthropic.InternalServerError) as caught:
        messages_call(client, False, [{"role": "user", "content": PROMPT}])
    assert caught.value.status_code == 500
    assert "script 'reads-agents-md' is exhausted after 2 turns" in caught.value.message
    with pytest.raises(openai.InternalServerError, match="reads-agents-md"):
        gpt(server).responses.create(model="m", input="again")


def test_error_turns_reach_clients_as_their_error_classes() -> None:
    script = {
        "name": "flaky",
        "turns": [
            {"error": 429, "retry_after": 7, "message": "slow down"},
            {"error": 529},
            {"error": 500},
            {"text": "recovered"},
        ],
    }
    with ScriptedModelServer(script) as server:
        client = claude(server)
        with pytest.raises(anthropic.RateLimitError) as limited:
            messages_call(client, True, [{"role": "user", "content": "hi"}])
        assert limited.value.response.headers["retry-after"] == "7"
        body: Any = limited.value.body
        assert body["error"] == {
            "type": "rate_limit_error",
            "message": "slow down",
            "code": "rate_limit_error",
        }
        with pytest.raises(anthropic.OverloadedError):
            messages_call(client, False, [{"role": "user", "content": "hi"}])
        with pytest.raises(openai.InternalServerError, match="scripted error 500"):
            gpt(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert (
            messages_call(client, False, [{"role": "user", "content": "hi"}]).content[0].text == "recovered"
        )


def test_sdk_retry_honours_scripted_rate_limit() -> None:
    script = {"name": "retry-once", "turns": [{"error": 429, "retry_after": 0}, {"text": "after retry"}]}
    with ScriptedModelServer(script) as server:
        answer = gpt(server, max_retries=1).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        assert answer.choices[0].message.content == "after retry"
        assert [entry["turn"] for entry in server.requests] == [0, 1]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "/v1/messages",
            {"tokens_in": 100, "tokens_out": 20, "cache_read_tokens": 30, "cache_write_tokens": 5},
        ),
        ("/v1/chat/completions", {"tokens_in": 135, "tokens_out": 20, "cache_read_tokens": 30}),
        ("/v1/responses", {"tokens_in": 135, "tokens_out": 20, "cache_read_tokens": 30}),
    ],
)
def test_gateway_reads_the_scripted_usage(
    server: ScriptedModelServer, path: str, expected: dict[str, int], stream: bool
) -> None:
    """The gateway's usage reader sees the script's numbers in every API and mode."""
    request = {"model": "m", "stream": stream, "messages": [], "stream_options": {"include_usage": True}}
    raw = httpx.post(server.url + path, json=request).content
    assert extract(raw, streamed=stream)[1] == expected
