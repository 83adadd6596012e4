"""The injected-instruction audit: fingerprints of real checkouts matched against request
bodies captured from the scripted model server, shaped the way the agent CLIs send them
(Claude Code's system-reminder around CLAUDE.md, Codex's <INSTRUCTIONS> around AGENTS.md,
line-numbered tool output), and through the gateway process on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from docker_helpers import RUN_TOKEN, gateway_on_loopback
from factories import result, summary_of
from modelserver import ScriptedModelServer
from modelserver.script import Script, TextTurn, TurnUsage

from docdelta.gateway.config import Budget, GatewayConfig, Upstream
from docdelta.gateway.fingerprint import fingerprint, match, request_lines
from docdelta.gateway.models import ModelCall
from docdelta.instructions.audit import AuditIndex, audit_run, build_index
from docdelta.instructions.models import ChangedFile, Detection, FileStatus, InstructionAudit, NearMiss
from docdelta.report import render_markdown
from docdelta.scorecard.instruction_usage import audit_flags
from docdelta.vocabulary import ConditionSpec, sha256_hex

CLAUDE_MD = """# Project notes
Prefer small pure functions and keep modules below 300 lines.
Every public function carries type hints and a docstring.
"""
AGENTS_BASE = """# Agents
Run the unit tests with `make check` before every push.
Format code with `ruff format`, never by hand.
Database migrations live in db/migrations and are append-only.
Ask before adding a dependency to pyproject.toml.
"""
AGENTS_HEAD = AGENTS_BASE.replace("`make check`", "`tox -e py311`")
NEAR_MISS_TEXT = """Agents guide for humans
The staging cluster is rebuilt every night at 02:00 UTC.
Feature flags are listed in config/flags.yaml with their owners.
"""
CONDITIONS = {
    "base": {"AGENTS.md": AGENTS_BASE, "CLAUDE.md": CLAUDE_MD},
    "head": {"AGENTS.md": AGENTS_HEAD, "CLAUDE.md": CLAUDE_MD},
    "none": {},
}


@pytest.fixture
def index(tmp_path: Path) -> AuditIndex:
    specs, checkouts = [], {}
    for name, files in CONDITIONS.items():
        root = tmp_path / name
        for rel, text in {**files, "README.md": "# proj\n", "docs/agents.md": NEAR_MISS_TEXT}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        digests = {rel: sha256_hex(text.encode()) for rel, text in files.items()}
        specs.append(ConditionSpec(name=name, files=digests, overlay_sha256=sha256_hex(name.encode())))
        checkouts[name] = root
    detection = Detection(
        base="b",
        head="h",
        changed=[ChangedFile(path="AGENTS.md", status=FileStatus.modified, families=["codex"])],
        near_misses=[NearMiss(path="docs/agents.md", reason="case-insensitive AGENTS.md lookup")],
    )
    return build_index(specs, checkouts, detection)


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    turns = [TextTurn(text='{"answer": "ok"}', usage=TurnUsage(input_tokens=1000, output_tokens=10))] * 8
    with ScriptedModelServer(Script(name="audit", model="claude-sonnet-4-5", turns=turns)) as s:
        yield s


def captured(server: ScriptedModelServer, path: str, body: dict[str, Any]) -> bytes:
    """Send `body` to the scripted server and return the body it recorded, as sent on the wire."""
    before = len(server.requests)
    response = httpx.post(f"{server.url}{path}", json=body, headers={"x-api-key": "placeholder"})
    assert response.status_code == 200, response.text
    return json.dumps(server.requests[before]["body"]).encode()


def claude_code_request(claude_md: str, tool_output: str | None = None) -> dict[str, Any]:
    """The shape Claude Code sends: CLAUDE.md in a system-reminder of the first user turn."""
    reminder = (
        "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
        "Contents of /workspace/CLAUDE.md (project instructions, checked into the codebase):\n\n"
        f"{claude_md}\n</system-reminder>"
    )
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": reminder}, {"type": "text", "text": "Task?"}]}
    ]
    if tool_output is not None:
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat x"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": tool_output}],
            },
        ]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {}}}}],
        "messages": messages,
    }


def codex_request(agents_md: str) -> dict[str, Any]:
    """The shape Codex sends over Responses: AGENTS.md in a user message's <INSTRUCTIONS>."""
    return {
        "model": "gpt-5-codex",
        "instructions": "You are Codex, based on GPT-5.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "# AGENTS.md instructions for /workspace\n\n"
                        f"<INSTRUCTIONS>\n{agents_md}</INSTRUCTIONS>",
                    }
                ],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Task?"}]},
        ],
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
    }


def calls_for(index: AuditIndex, *bodies: bytes) -> list[ModelCall]:
    return [
        ModelCall(
            upstream="x",
            method="POST",
            path="/v1/messages",
            status=200,
            latency_s=0.1,
            instructions=match(index.fingerprints, *request_lines(body)),
        )
        for body in bodies
    ]


def test_claude_code_sees_claude_md_but_not_the_changed_agents_md(
    index: AuditIndex, server: ScriptedModelServer
) -> None:
    body = captured(server, "/v1/messages", claude_code_request(CLAUDE_MD))
    audit = audit_run(index, "head", calls_for(index, body))
    assert audit == InstructionAudit(seen=["CLAUDE.md"], missing=["AGENTS.md"], foreign=[])
    assert audit.flagged


def test_the_version_sent_is_found_and_the_other_condition_s_version_is_not(
    index: AuditIndex, server: ScriptedModelServer
) -> None:
    head_body = captured(server, "/v1/responses", codex_request(AGENTS_HEAD))
    # head's AGENTS.md holds four of base's five lines: only the version sent may count.
    assert audit_run(index, "head", calls_for(index, head_body)) == InstructionAudit(seen=["AGENTS.md"])
    # The same request in a base run means head's file leaked into base.
    assert audit_run(index, "base", calls_for(index, head_body)) == InstructionAudit(
        missing=["AGENTS.md"], foreign=["head:AGENTS.md"]
    )
    base_body = captured(server, "/v1/responses", codex_request(AGENTS_BASE))
    assert audit_run(index, "base", calls_for(index, base_body)) == InstructionAudit(seen=["AGENTS.md"])


def test_in_the_none_condition_any_instruction_file_is_foreign(
    index: AuditIndex, server: ScriptedModelServer
) -> None:
    body = captured(server, "/v1/messages", claude_code_request(CLAUDE_MD))
    audit = audit_run(index, "none", calls_for(index, body))
    assert audit == InstructionAudit(foreign=["base,head:CLAUDE.md"])


def test_a_near_miss_is_flagged_when_injected_not_when_read_with_a_tool(
    index: AuditIndex, server: ScriptedModelServer
) -> None:
    read = captured(server, "/v1/messages", claude_code_request(CLAUDE_MD, tool_output=NEAR_MISS_TEXT))
    assert audit_run(index, "base", calls_for(index, read)).foreign == []
    injected = captured(server, "/v1/messages", claude_code_request(NEAR_MISS_TEXT))
    assert audit_run(index, "base", calls_for(index, injected)).foreign == ["near-miss:docs/agents.md"]


def test_line_numbered_tool_output_of_the_changed_file_counts_as_reaching_the_model(
    index: AuditIndex, server: ScriptedModelServer
) -> None:
    numbered = "".join(f"{n:>6}\t{line}\n" for n, line in enumerate(AGENTS_HEAD.splitlines(), 1))
    body = captured(server, "/v1/messages", claude_code_request(CLAUDE_MD, tool_output=numbered))
    [call] = calls_for(index, body)
    assert sorted(call.instructions.values()) == ["injected", "tool"]
    assert audit_run(index, "head", [call]) == InstructionAudit(seen=["AGENTS.md", "CLAUDE.md"])


def test_fingerprints_hold_no_line_of_any_file(index: AuditIndex) -> None:
    dumped = json.dumps(index.fingerprints)
    lines = {
        line.strip()
        for text in (CLAUDE_MD, AGENTS_BASE, AGENTS_HEAD, NEAR_MISS_TEXT)
        for line in text.splitlines()
    }
    assert [line for line in lines if line and line in dumped] == []
    assert len(index.fingerprints) == 4  # base AGENTS.md, head AGENTS.md, CLAUDE.md (shared), near miss


def test_short_files_fall_back_to_all_lines_and_empty_files_cannot_be_audited() -> None:
    assert len(fingerprint("# A\nuse tox\n")) == 2
    assert fingerprint("\n  \n") == []


def test_refused_calls_never_count_and_flags_are_counted_per_condition(
    index: AuditIndex, server: ScriptedModelServer
) -> None:
    body = captured(server, "/v1/responses", codex_request(AGENTS_HEAD))
    [call] = calls_for(index, body)
    refused = call.model_copy(update={"status": 402, "error": "budget"})
    assert audit_run(index, "head", [refused]) == InstructionAudit(missing=["AGENTS.md"])

    runs = [
        result("t", "head", 1.0, 1).model_copy(
            update={"instructions_seen": audit_run(index, "head", [refused])}
        ),
        result("t", "head", 1.0, 2).model_copy(
            update={"instructions_seen": audit_run(index, "head", [call])}
        ),
        result("t", "base", 1.0, 1),  # no gateway: not audited
    ]
    [flag] = audit_flags(runs)
    assert (flag.condition, flag.kind, flag.file, flag.runs, flag.audited) == (
        "head",
        "missing",
        "AGENTS.md",
        1,
        2,
    )


def test_the_gateway_logs_which_files_each_forwarded_request_holds_and_enforces_a_dollar_budget(
    index: AuditIndex, server: ScriptedModelServer
) -> None:
    route = Upstream(name="anthropic", base_url=server.url, paths=["/v1/messages"], key_from="K")
    config = GatewayConfig(upstreams=[route]).for_run(0.02, index.fingerprints)
    assert config.budget == Budget(max_cost_usd=0.02)
    with gateway_on_loopback(config, {"anthropic": "sk-real"}) as (url, _, log):
        for _ in range(3):
            body = claude_code_request(CLAUDE_MD)
            httpx.post(
                f"{url}/anthropic/v1/messages", json=body, headers={"x-api-key": RUN_TOKEN}, timeout=10
            )
    calls = [ModelCall.model_validate_json(line) for line in log.getvalue().splitlines()]
    # claude-sonnet-4 at $3/M in, $15/M out: 1000 tokens in + 10 out = $0.00315 per call, but
    # each is pre-authorised for its worst case, 1024 out ($0.01536) plus its estimated input:
    # the third no longer fits in what the first two left.
    assert [(c.status, c.error) for c in calls] == [(200, None), (200, None), (402, "budget")]
    assert audit_run(index, "head", calls) == InstructionAudit(seen=["CLAUDE.md"], missing=["AGENTS.md"])
    assert "Prefer small pure functions" not in log.getvalue()


def test_the_scorecard_flags_missing_and_foreign_files(
    index: AuditIndex, server: ScriptedModelServer
) -> None:
    claude = calls_for(index, captured(server, "/v1/messages", claude_code_request(CLAUDE_MD)))
    runs = [
        result("t", c, 1.0, r).model_copy(update={"instructions_seen": audit_run(index, c, claude)})
        for c in ("base", "head", "none")
        for r in (1, 2)
    ]
    text = render_markdown(summary_of(runs))
    assert "- ⚠ `head`'s `AGENTS.md` did not reach the model in 2 of 2 audited runs" in text
    assert "- ⚠ `base:AGENTS.md`" not in text
    assert (
        "- ⚠ `base,head:CLAUDE.md` reached the model in 2 of 2 audited `none` runs although it is not "
        "that condition's instruction file"
    ) in text
