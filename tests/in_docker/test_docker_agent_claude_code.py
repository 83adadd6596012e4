"""Claude Code for real: the pinned CLI in its agent image, against the scripted model
server through the real gateway, parsed by the adapter. One run proves the plumbing
(turns, tool calls, commands with exit codes, tokens, answer) and the isolation (no
home-directory CLAUDE.md reaches the model, the key never reaches the agent)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import ScriptedRun, modelserver_image, run_scripted_agent, with_home_files
from modelserver.script import Script, TextTurn, ToolTurn

from docdelta.agents.claude_code import ClaudeCodeAgent
from docdelta.agents.images import agent_image
from docdelta.agents.models import CommandRun, RunStatus
from docdelta.gateway.config import ANTHROPIC
from docdelta.gateway.fingerprint import fingerprint
from docdelta.instructions.audit import arrived
from docdelta.instructions.detect import InstructionMatcher
from docdelta.instructions.loading import DirTree, build
from docdelta.instructions.models import LoadMode

pytestmark = pytest.mark.docker

CA = Path("/etc/ssl/certs/ca-certificates.crt")
MARKER = f"HOME-MARKER-{uuid.uuid4().hex}"
KEY = f"sk-ant-docdelta-test-{uuid.uuid4().hex}"
PROJECT = "# Notes\n\nRun the full test suite with `make check`.\n"
ANSWER = {"answer": "Run make check.", "commands": ["make check"], "files": ["CLAUDE.md"]}
MODEL = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def run(
    client: Any, base_image: str, gateway_image: str, egress: str, tmp_path_factory: pytest.TempPathFactory
) -> ScriptedRun:
    image = agent_image(client, base=base_image, npm=ClaudeCodeAgent.npm, extra_ca=CA).tag
    planted = with_home_files(client, image, {".claude/CLAUDE.md": MARKER, "CLAUDE.md": MARKER})
    checkout = tmp_path_factory.mktemp("claude") / "repo"
    checkout.mkdir()
    (checkout / "CLAUDE.md").write_text(PROJECT)
    (checkout / "README.md").write_text("# demo\n")
    script = Script(
        name="claude-code-e2e",
        model=MODEL,
        turns=[
            ToolTurn.shell("cat CLAUDE.md"),
            ToolTurn.shell("ls missing-dir"),
            TextTurn(text="Found it.\n" + json.dumps(ANSWER)),
        ],
    )
    return run_scripted_agent(
        client,
        agent=ClaudeCodeAgent(model=MODEL),
        image=planted,
        server_image=modelserver_image(client, base_image),
        gateway_image=gateway_image,
        network=egress,
        upstream=ANTHROPIC.model_copy(update={"base_url": "{server}"}),
        script=script,
        checkout=checkout,
        prompt="Which command runs the full test suite? End with the JSON answer.",
        key=KEY,
        # The sandbox's default HOME is /tmp: plant there too, where a careless adapter looks.
        prepare=[f"mkdir -p /tmp/.claude && echo {MARKER} > /tmp/.claude/CLAUDE.md"],
    )


def test_the_parsed_run_matches_the_script(run: ScriptedRun) -> None:
    outcome = run.outcome
    assert outcome.status is RunStatus.ok, (outcome.error, run.result.stderr[-2000:])
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    m = outcome.metrics
    assert m.commands == [
        CommandRun(command="cat CLAUDE.md", exit_code=0),
        CommandRun(command="ls missing-dir", exit_code=2),
    ]
    assert (m.tool_calls, m.turns) == (2, 3)
    # One model call per script turn: with non-essential traffic off, Claude Code makes no
    # side requests (title, quota probe, ...), so scripts need no padding turns.
    assert [r["turn"] for r in run.requests] == [0, 1, 2]
    forwarded = [c for c in run.calls if c.error is None and c.status == 200]
    assert len(forwarded) == 3
    assert m.tokens_in == sum(c.tokens_in or 0 for c in forwarded)
    assert m.tokens_out == sum(c.tokens_out or 0 for c in forwarded)
    assert m.cost_usd == pytest.approx(sum(c.cost_usd or 0 for c in forwarded))


def test_the_project_claude_md_reaches_the_model_and_home_files_do_not(run: ScriptedRun) -> None:
    first = json.dumps(run.requests[0]["body"])
    assert "Run the full test suite with `make check`." in first
    assert all(MARKER not in json.dumps(r["body"]) for r in run.requests)


def test_the_key_never_reaches_the_agent(run: ScriptedRun) -> None:
    captured = run.result.stdout + run.result.stderr
    assert KEY.encode() not in captured
    assert all(KEY not in json.dumps(r) for r in run.requests)  # the server never logs it either


IMPORTING = {
    # The Python SDK's shape: CLAUDE.md serves AGENTS.md through an import.
    "CLAUDE.md": "@AGENTS.md\n\nClaude-specific: keep replies short and cite files.\n",
    "AGENTS.md": "# Agents\n\nRun the suite with `uv run --frozen pytest` first.\n\nStyle: @docs/style.md\n",
    "docs/style.md": "Imported two hops down: wrap lines at 100 characters.\n",
    "docs/span.md": "Named only inside a code span, so never imported at all.\n",
    "docs/guide.md": "See `@docs/span.md` for what a code span does not import.\n",
    "pkg/CLAUDE.md": "Nested memory for pkg only, loaded when the agent works there.\n",
}


@pytest.fixture(scope="module")
def imports_run(
    client: Any, base_image: str, gateway_image: str, egress: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ScriptedRun, Path]:
    """Real Claude Code on a tree whose CLAUDE.md imports AGENTS.md, which imports a doc;
    the gateway audits every request against each file's fingerprint."""
    image = agent_image(client, base=base_image, npm=ClaudeCodeAgent.npm, extra_ca=CA).tag
    checkout = tmp_path_factory.mktemp("claude-imports") / "repo"
    for path, text in IMPORTING.items():
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout / path).write_text(text)
    script = Script(name="claude-code-imports", model=MODEL, turns=[TextTurn(text=json.dumps(ANSWER))])
    run = run_scripted_agent(
        client,
        agent=ClaudeCodeAgent(model=MODEL),
        image=image,
        server_image=modelserver_image(client, base_image),
        gateway_image=gateway_image,
        network=egress,
        upstream=ANTHROPIC.model_copy(update={"base_url": "{server}"}),
        script=script,
        checkout=checkout,
        prompt="Which command runs the tests? End with the JSON answer.",
        key=KEY,
        fingerprints={path: fingerprint(text) for path, text in IMPORTING.items()},
    )
    return run, checkout


def test_what_the_graph_says_claude_code_loads_is_what_the_gateway_audit_finds_injected(
    imports_run: tuple[ScriptedRun, Path],
) -> None:
    """The instruction graph (imports relative and recursive, code spans ignored,
    nested memory on demand) agrees with what the real CLI put in its prompt, as the
    gateway's injected-instruction audit sees it."""
    run, checkout = imports_run
    assert run.outcome.status is RunStatus.ok, (run.outcome.error, run.result.stderr[-2000:])
    graph = build(DirTree(checkout), InstructionMatcher().families)
    loaded = {f.path for f in graph.files("claude_code", LoadMode.always)}
    assert loaded == {"CLAUDE.md", "AGENTS.md", "docs/style.md"}
    injected = {path for path, channel in arrived(run.calls).items() if channel == "injected"}
    assert injected == loaded
