"""The script side of the scripted model server: one generic step becomes the right call
for each agent's declared tools, scripts are checked, turns are used once each."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from modelserver import wire
from modelserver.replay import Failure, Replay, ScriptError, check
from modelserver.script import Script, TextTurn, site_files
from modelserver.wire import Call, Reply, Usage, gemini_body, gemini_events, sse

from docdelta.errors import ConfigError


def tool(name: str, **props: Any) -> dict[str, Any]:
    """A tool as declared in an Anthropic request; `required` lists the string props."""
    schema = {"type": "object", "properties": props, "required": [k for k, v in props.items() if v]}
    return {"name": name, "input_schema": schema}


STRING: dict[str, Any] = {"type": "string"}
ARGV: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
OPTIONAL: dict[str, Any] = {}  # falsy: left out of `required`
CLAUDE_CODE = [tool("Task", prompt=STRING), tool("Bash", command=STRING), tool("Read", file_path=STRING)]
CODEX_SHELL = [{"type": "function", "name": "shell", "parameters": tool("x", command=ARGV)["input_schema"]}]
CODEX_EXEC = [
    {"type": "local_shell"},  # no name: skipped
    {"type": "function", "name": "exec_command", "parameters": tool("x", cmd=STRING)["input_schema"]},
]
OPENCODE = [
    {
        "type": "function",
        "function": {"name": "read", "parameters": tool("x", filePath=STRING)["input_schema"]},
    },
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": tool("x", command=STRING, description=STRING)["input_schema"],
        },
    },
]
GEMINI = [  # as Gemini CLI declares it: grouped, with a JSON schema
    {
        "functionDeclarations": [
            {"name": "read_file", "parametersJsonSchema": tool("x", absolute_path=STRING)["input_schema"]},
            {
                "name": "run_shell_command",
                "parametersJsonSchema": tool("x", command=STRING, dir_path=OPTIONAL)["input_schema"],
            },
        ]
    }
]


def answer(turn: dict[str, Any], tools: list[Any]) -> Reply | Failure:
    replay = Replay(check({"name": "unit", "turns": [turn]}))
    index, outcome = replay.answer("/v1/messages", {"model": "m", "tools": tools, "messages": []})
    assert index == 0 and replay.remaining == 0
    return outcome


def only_call(outcome: Reply | Failure) -> tuple[str, Any]:
    assert isinstance(outcome, Reply), outcome
    (call,) = outcome.calls
    return call.name, json.loads(call.arguments)


SHELL = {"tool": "shell", "args": {"command": "cat AGENTS.md"}}


@pytest.mark.parametrize(
    ("tools", "name", "args"),
    [
        (CLAUDE_CODE, "Bash", {"command": "cat AGENTS.md"}),
        (CODEX_SHELL, "shell", {"command": ["bash", "-lc", "cat AGENTS.md"]}),
        (CODEX_EXEC, "exec_command", {"cmd": "cat AGENTS.md"}),
        (OPENCODE, "bash", {"command": "cat AGENTS.md", "description": "scripted bash call"}),
        (GEMINI, "run_shell_command", {"command": "cat AGENTS.md"}),
        ([], "shell", {"command": "cat AGENTS.md"}),  # nothing declared: as written
    ],
    ids=["claude-code", "codex-shell", "codex-exec", "opencode", "gemini", "undeclared"],
)
def test_generic_shell_step_becomes_each_agents_own_call(tools: list[Any], name: str, args: Any) -> None:
    assert only_call(answer(SHELL, tools)) == (name, args)


def test_generic_path_maps_to_the_declared_parameter() -> None:
    step = {"tool": "read", "args": {"path": "AGENTS.md"}}
    assert only_call(answer(step, CLAUDE_CODE)) == ("Read", {"file_path": "AGENTS.md"})
    assert only_call(answer(step, OPENCODE)) == ("read", {"filePath": "AGENTS.md"})
    assert only_call(answer(step, GEMINI)) == ("read_file", {"absolute_path": "AGENTS.md"})


def test_gemini_openapi_schemas_with_capitalised_types_are_understood() -> None:
    """Gemini's other schema form (`parameters`, OpenAPI subset) spells types as ARRAY/STRING."""
    schema = {
        "type": "OBJECT",
        "properties": {"command": {"type": "ARRAY"}, "why": {"type": "STRING"}},
        "required": ["command", "why"],
    }
    tools = [{"functionDeclarations": [{"name": "shell", "parameters": schema}]}]
    assert only_call(answer(SHELL, tools)) == (
        "shell",
        {"command": ["bash", "-lc", "cat AGENTS.md"], "why": "scripted shell call"},
    )


REPLY = Reply(
    "r_1",
    "gemini-x",
    0,
    Usage(input=100, output=20, cache_read=30),
    text="Let me look at it first.",
    calls=[Call(id="call_1", name="run_shell_command", arguments='{"command": "ls"}')],
)


def test_gemini_stream_sends_parts_one_by_one_and_finishes_once_with_the_usage() -> None:
    chunks = [data for _, data in gemini_events(REPLY)]
    parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
    call = {"functionCall": {"id": "call_1", "name": "run_shell_command", "args": {"command": "ls"}}}
    assert parts == [{"text": "Let me look "}, {"text": "at it first."}, call]
    assert gemini_body(REPLY)["candidates"][0]["content"]["parts"] == [{"text": REPLY.text}, call]
    assert [c["candidates"][0].get("finishReason") for c in chunks] == [None, None, "STOP"]
    assert ["usageMetadata" in c for c in chunks] == [False, False, True]
    # Cached tokens are inside the prompt count; a zero count is left out, as the API does.
    usage = {
        "promptTokenCount": 130,
        "candidatesTokenCount": 20,
        "cachedContentTokenCount": 30,
        "totalTokenCount": 150,
    }
    assert chunks[-1]["usageMetadata"] == gemini_body(REPLY)["usageMetadata"] == usage
    # The Gemini SDKs read `data:` lines only: an `event:` line would stall their reader.
    assert all(frame.startswith(b"data: {") for frame in sse(gemini_events(REPLY)))


def test_gemini_reply_without_text_or_calls_is_one_finished_chunk_without_parts() -> None:
    empty = Reply("r_2", "gemini-x", 0, Usage(input=5, output=0))
    (chunk,) = [data for _, data in gemini_events(empty)]
    assert chunk["candidates"][0] == {
        "content": {"role": "model", "parts": []},
        "index": 0,
        "finishReason": "STOP",
    }
    assert chunk["usageMetadata"] == {"promptTokenCount": 5, "totalTokenCount": 5}


def test_exact_name_wins_and_step_aliases_extend_the_table() -> None:
    tools = [tool("bash", command=STRING), tool("shell", command=STRING)]
    assert only_call(answer(SHELL, tools))[0] == "shell"
    custom = {"tool": "grep_repo", "aliases": ["Grep"], "args": {"pattern": "tabs"}}
    assert only_call(answer(custom, [tool("Grep", pattern=STRING)])) == ("Grep", {"pattern": "tabs"})


def test_step_matching_no_declared_tool_fails_naming_script_turn_and_tools() -> None:
    outcome = answer(SHELL, [tool("Read", file_path=STRING), tool("Write", file_path=STRING)])
    assert isinstance(outcome, Failure)
    assert (outcome.status, outcome.kind) == (500, "script_mismatch")
    assert "script 'unit' turn 0" in outcome.message and "['Read', 'Write']" in outcome.message


def test_usage_is_estimated_from_text_when_the_script_gives_none() -> None:
    outcome = answer({"text": "x" * 40, "usage": {"cache_read_tokens": 9}}, [])
    assert isinstance(outcome, Reply)
    assert (outcome.usage.output, outcome.usage.cache_read, outcome.usage.cache_write) == (10, 9, 0)
    assert outcome.usage.input == len(json.dumps({"model": "m", "tools": [], "messages": []})) // 4


@pytest.mark.parametrize(
    ("script", "fault"),
    [
        ({"turns": []}, "`name`"),
        ({"name": "s", "turns": {}}, "`turns` must be a list"),
        ({"name": "s", "turns": [{"text": "ok"}, {"say": "hi"}]}, "script 's' turn 1"),
        ({"name": "s", "turns": [{"error": 429, "text": "both"}]}, "script 's' turn 0"),
        ({"name": "s", "stream_interval_s": -0.1, "turns": []}, "script 's': `stream_interval_s`"),
        ({"name": "s", "stream_interval_s": "25ms", "turns": []}, "script 's': `stream_interval_s`"),
        ({"name": "s", "stream_interval_s": True, "turns": []}, "script 's': `stream_interval_s`"),
    ],
)
def test_malformed_scripts_are_rejected_naming_the_fault(script: dict[str, Any], fault: str) -> None:
    with pytest.raises(ScriptError, match=fault.replace("(", r"\(")):
        check(script)


def test_script_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "s", "turns": [{"tool": "shell", "command": "ls"}]}))
    with pytest.raises(ConfigError, match=r"bad\.json") as caught:
        Script.load(bad)
    assert "turns" in caught.value.hint
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"name": "s", "turns": [{"error": 529}, {"tool": "shell"}, {"text": "ok"}]}))
    assert [type(t).__name__ for t in Script.load(good).turns] == ["ErrorTurn", "ToolTurn", "TextTurn"]


def test_each_turn_answers_exactly_one_of_many_concurrent_requests() -> None:
    replay = Replay(check({"name": "race", "turns": [{"text": str(i)} for i in range(40)]}))
    used: list[int | None] = []
    lock = threading.Lock()

    def ask() -> None:
        index, _ = replay.answer("/v1/responses", {})
        with lock:
            used.append(index)

    threads = [threading.Thread(target=ask) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(i for i in used if i is not None) == list(range(40))
    assert used.count(None) == 10  # the ten requests past the end were told the script is exhausted


def test_site_files_hold_the_server_package_only() -> None:
    files = site_files()
    assert "modelserver/__main__.py" in files and not any(name.startswith("docdelta/") for name in files)
    assert "modelserver/script.py" not in files  # the pydantic side stays on the host


def test_a_truncated_turn_says_so_in_each_apis_own_words() -> None:
    reply = Reply("r", "m", 0, Usage(5, 64), text='{"path": "pa', truncated=True)
    assert wire.chat_body(reply)["choices"][0]["finish_reason"] == "length"
    assert wire.anthropic_body(reply)["stop_reason"] == "max_tokens"
    response = wire.responses_body(reply)
    assert (response["status"], response["incomplete_details"]) == (
        "incomplete",
        {"reason": "max_output_tokens"},
    )
    assert [name for name, _ in wire.responses_events(reply)][-1] == "response.incomplete"
    assert gemini_body(reply)["candidates"][0]["finishReason"] == "MAX_TOKENS"
    whole = Reply("r", "m", 0, Usage(5, 6), text="done")
    assert wire.chat_body(whole)["choices"][0]["finish_reason"] == "stop"


def test_raw_arguments_are_sent_verbatim_where_arguments_are_text() -> None:
    turn = {"tool": "shell", "raw_arguments": "{", "truncated": True}
    body = {"model": "m", "tools": [{"type": "function", "function": {"name": "shell"}}], "messages": []}
    _, outcome = Replay(check({"name": "raw", "turns": [turn]})).answer("/v1/chat/completions", body)
    assert isinstance(outcome, Reply) and outcome.truncated
    assert [(c.name, c.arguments) for c in outcome.calls] == [("shell", "{")]
    refused = answer(turn, CLAUDE_CODE)  # Anthropic carries arguments as an object
    assert isinstance(refused, Failure) and "raw_arguments" in refused.message


def _conversation(*texts: str) -> dict[str, Any]:
    """An Anthropic request whose history alternates user and assistant messages."""
    roles = ("user", "assistant")
    return {"model": "m", "messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]}


def test_a_per_conversation_script_answers_by_the_conversations_own_turn_whatever_the_interleaving() -> None:
    script = {
        "name": "each-run",
        "per_conversation": True,
        "turns": [{"tool": "shell", "args": {"command": "cat AGENTS.md"}}, {"text": "done"}],
    }
    replay = Replay(check(script))
    # Two runs at once: the second run's first request arrives between the first run's two.
    first = [replay.answer("/v1/messages", _conversation("q"))]
    first.append(replay.answer("/v1/messages", _conversation("q")))
    first.append(replay.answer("/v1/messages", _conversation("q", "call", "result")))
    assert [index for index, _ in first] == [0, 0, 1]
    assert [bool(isinstance(r, Reply) and r.calls) for _, r in first] == [True, True, False]
    index, over = replay.answer("/v1/messages", _conversation("q", "call", "result", "done", "more?"))
    assert index is None and isinstance(over, Failure) and "has 2 turns" in over.message
    _, responses = replay.answer("/v1/responses", {"model": "m", "input": "q", "previous_response_id": "r1"})
    assert isinstance(responses, Failure) and "`messages` or `contents`" in responses.message


def test_if_seen_answers_by_what_the_agent_read() -> None:
    turn = {"text": "python setup.py test", "if_seen": {"make check": "make check"}}
    replay = Replay(check({"name": "seen", "per_conversation": True, "turns": [turn]}))
    _, read_it = replay.answer("/v1/messages", _conversation("Run `make check` before you commit."))
    _, did_not = replay.answer("/v1/messages", _conversation("Tests: `python setup.py test`."))
    assert isinstance(read_it, Reply) and read_it.text == "make check"
    assert isinstance(did_not, Reply) and did_not.text == "python setup.py test"
    assert Script.model_validate({"name": "s", "turns": [turn]}).turns == [TextTurn(**turn)]  # host side too
