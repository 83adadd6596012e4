"""The same prompt reaches the model in every condition: the built-in `openai`
agent runs, through the real gateway, on the sealed checkouts of two conditions of one
source commit whose AGENTS.md differ in one line. What the scripted model server received
must be byte-identical but for the instruction text, and that must differ exactly where
the docs do: neither the condition, nor the checkout's host path, nor anything else about
the run may reach the model."""

from __future__ import annotations

import difflib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import SCRIPTED_CHAT, modelserver_image, own_network, run_scripted_agent
from gitrepo import GitRepo
from modelserver.script import Script, TextTurn

from docdelta.agents import AgentContext
from docdelta.agents.models import RunStatus
from docdelta.agents.openai_loop import OpenAIAgent
from docdelta.checkout.seal import build_overlays, seal
from docdelta.git import Repo
from docdelta.instructions.detect import InstructionMatcher

pytestmark = pytest.mark.docker

BASE_DOCS = "# Notes\n\n- Run the tests with `make test`.\n- Keep functions small.\n"
HEAD_DOCS = "# Notes\n\n- Run the tests with `make check`.\n- Keep functions small.\n"
PROMPT = "Which command runs the tests? Answer with a JSON object."
ANSWER = {"answer": "make check", "commands": ["make check"]}


def changed_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    """(lines only in `old`, lines only in `new`), in order."""
    diff = list(difflib.ndiff(old.splitlines(), new.splitlines()))
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def test_prompt_is_byte_identical_across_conditions_and_only_the_docs_differ(
    client: Any, base_image: str, gateway_image: str, tmp_path: Path
) -> None:
    project = GitRepo.init(tmp_path / "project")
    base = project.commit({"README.md": "# app\n", "app.py": "print('hi')\n", "AGENTS.md": BASE_DOCS})
    head = project.commit({"AGENTS.md": HEAD_DOCS})
    repo, matcher = Repo(project.path), InstructionMatcher()
    overlays = build_overlays(repo, base, head, ["base", "head"], matcher, None)
    # Each checkout's host directory names its condition: the sandbox must not let it show.
    sealed = {c: seal(repo, head, o, tmp_path / c, matcher, strip=[]) for c, o in overlays.items()}
    assert sealed["base"].source_sha256 == sealed["head"].source_sha256

    script = Script(name="same-prompt", turns=[TextTurn(text=json.dumps(ANSWER))])
    server_image = modelserver_image(client, base_image)
    bodies: dict[str, dict[str, Any]] = {}
    with own_network(client) as name:
        for condition, checkout in sealed.items():
            run = run_scripted_agent(
                client,
                agent=OpenAIAgent(model="gpt-4o-mini"),
                image=base_image,
                server_image=server_image,
                gateway_image=gateway_image,
                network=name,
                upstream=SCRIPTED_CHAT,
                script=script,
                checkout=checkout.path,
                prompt=PROMPT,
                key=f"sk-test-{uuid.uuid4().hex}",
                ctx=AgentContext(seed=3, timeout_s=120),
            )
            assert run.outcome.status is RunStatus.ok, (condition, run.outcome.error)
            assert run.outcome.answer is not None and run.outcome.answer.commands == ["make check"]
            (post,) = [r for r in run.requests if r["method"] == "POST"]
            bodies[condition] = post["body"]

    base_body, head_body = bodies["base"], bodies["head"]
    # The task prompt (the user message) reached the model byte for byte, in both conditions.
    user = [m for m in base_body["messages"] if m["role"] == "user"]
    assert user == [m for m in head_body["messages"] if m["role"] == "user"]
    assert [m["content"] for m in user] == [PROMPT]

    # Everything else in the request but the system message is identical too: the tools,
    # the model, the sampling settings, every other message.
    (base_system,) = [m["content"] for m in base_body["messages"] if m["role"] == "system"]
    (head_system,) = [m["content"] for m in head_body["messages"] if m["role"] == "system"]

    def without_system(body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "messages": [m for m in body["messages"] if m["role"] != "system"]}

    assert json.dumps(without_system(base_body)) == json.dumps(without_system(head_body))

    # The system message holds each condition's AGENTS.md whole, and the two differ exactly
    # where the docs do: the one changed line, and nothing else (no path, no condition name).
    assert BASE_DOCS in base_system and HEAD_DOCS in head_system
    assert base_system.replace(BASE_DOCS, HEAD_DOCS) == head_system
    assert (
        changed_lines(base_system, head_system)
        == changed_lines(BASE_DOCS, HEAD_DOCS)
        == (
            ["- Run the tests with `make test`."],
            ["- Run the tests with `make check`."],
        )
    )
    assert not any(str(tmp_path) in json.dumps(body) for body in bodies.values())
