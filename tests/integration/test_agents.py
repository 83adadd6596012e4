"""Agents end to end through a real local sandbox: prompt, adapters, classification."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from toolchain import CheckoutFactory

from docdelta.agents import AgentContext, extract_last_json, get_agent
from docdelta.agents.command import CommandAgent, preflight
from docdelta.agents.fake_agent import solve
from docdelta.agents.models import AgentAnswer, RunStatus
from docdelta.agents.prompt import ANSWER_SHAPE, build_prompt
from docdelta.errors import AgentError
from docdelta.sandbox import Sandbox, SandboxSpec
from docdelta.sandbox.local import LocalProvider
from docdelta.tasks.models import Task

TASK = Task(id="t", prompt="What command runs the full test suite?", reviewed=True)
DOCS = {
    "README.md": "# proj\n\nA project.\n",
    "CONTRIBUTING.md": "# Contributing\n\n- Run the linter with `ruff check .` before pushing.\n",
}
AGENTS_MD = "# Notes\n\n- Run the full test suite with `make check`.\n- Never run `git push --force`.\n"


@pytest.fixture
def sandbox(tmp_path: Path, tmp_checkout: CheckoutFactory) -> Iterator[Sandbox]:
    # Agent scripts live outside the checkout; the sandbox sees them read-only, like a toolchain.
    (tmp_path / "agent-bin").mkdir()
    with LocalProvider(root=tmp_path / "sb", ro_paths=[tmp_path / "agent-bin"]).create(
        tmp_checkout({**DOCS, "AGENTS.md": AGENTS_MD}), SandboxSpec()
    ) as sb:
        yield sb


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "agent-bin" / "agent.py"
    path.write_text(body)
    return f"python3 {path}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'thinking {"a": 1} then ```json\n{"answer": "x", "files": [{"nested": 1}]}\n``` bye',
            {"answer": "x", "files": [{"nested": 1}]},
        ),
        ('{"first": true}\n{"second": {"inner": 2}}', {"second": {"inner": 2}}),
        ("no json here { nor here", None),
        ('[1, 2] {"broken": ', None),
    ],
)
def test_extract_last_json_finds_the_last_top_level_object(text: str, expected: object) -> None:
    assert extract_last_json(text) == expected


def test_prompt_is_the_task_plus_the_documented_shape_and_nothing_else() -> None:
    prompt = build_prompt(TASK)
    assert TASK.prompt in prompt
    assert all(f"`{key}`" in prompt for key in ANSWER_SHAPE)
    assert set(ANSWER_SHAPE) == set(AgentAnswer.model_fields)
    for leak in ("docdelta", "condition", "base", "head", "baseline"):
        assert leak not in prompt.lower()
    example = extract_last_json(prompt)
    assert example is not None and AgentAnswer.model_validate(example)


def test_unknown_agent_lists_the_known_ones() -> None:
    with pytest.raises(AgentError, match="unknown agent 'gpt'") as err:
        get_agent("gpt")
    assert "fake" in err.value.hint and "command" in err.value.hint
    with pytest.raises(AgentError, match="needs a command"):
        get_agent("command", cmd="  ")


def test_command_agent_reads_stdin_cwd_answer_and_metrics(sandbox: Sandbox, tmp_path: Path) -> None:
    body = (
        "import json, os, sys\n"
        "prompt = sys.stdin.read()\n"
        "json.dump({'tokens_in': len(prompt), 'turns': 2, 'commands': [{'command': 'ls', 'exit_code': 0}],"
        " 'vendor_extra': 1}, open(os.environ['DOCDELTA_METRICS'], 'w'))\n"
        "print('Done. ```json')\n"
        "print(json.dumps({'answer': open('AGENTS.md').read().splitlines()[2], 'commands': ['make check'],"
        " 'citations': [{'path': 'AGENTS.md', 'lines': '3'}], 'extra': 'ignored'}))\n"
        "print('```')\n"
    )
    outcome = get_agent("command", cmd=_script(tmp_path, body)).run(
        build_prompt(TASK), sandbox, AgentContext(seed=1, timeout_s=30)
    )
    assert outcome.status is RunStatus.ok, outcome.error
    assert outcome.answer is not None and outcome.answer.commands == ["make check"]
    assert outcome.answer.answer == "- Run the full test suite with `make check`."
    assert outcome.answer.citations[0].lines is not None and outcome.answer.citations[0].lines.start == 3
    assert outcome.metrics.tokens_in == len(build_prompt(TASK))
    assert outcome.metrics.turns == 2 and outcome.metrics.tokens_out is None
    assert outcome.metrics.duration_s > 0
    assert outcome.agent == "command" and outcome.agent_version.startswith("cmd-")


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("print('I think the answer is make check.')", RunStatus.no_answer),
        ("import sys; print('{\"answer\": '); sys.exit(2)", RunStatus.agent_error),
        ("import time; print('working', flush=True); time.sleep(30)", RunStatus.timeout),
        ('print(\'{"answer": "x", "citations": "AGENTS.md"}\')', RunStatus.no_answer),
    ],
    ids=["prose-only", "crash", "hang", "wrong-shape"],
)
def test_command_agent_failures_are_classified_not_raised(
    sandbox: Sandbox, tmp_path: Path, body: str, status: RunStatus
) -> None:
    outcome = get_agent("command", cmd=_script(tmp_path, body)).run(
        "q", sandbox, AgentContext(seed=1, timeout_s=1)
    )
    assert outcome.status is status
    assert outcome.answer is None
    if status is not RunStatus.timeout:
        assert outcome.error


def test_fake_agent_answers_from_the_instruction_files_it_finds(sandbox: Sandbox, tmp_path: Path) -> None:
    fake = get_agent("fake")
    outcome = fake.run(build_prompt(TASK), sandbox, AgentContext(seed=3))
    assert outcome.status is RunStatus.ok and outcome.answer is not None
    assert outcome.answer.commands == ["make check"]
    assert outcome.answer.citations[0].path == "AGENTS.md"
    assert outcome.metrics.files_read == ["AGENTS.md", "README.md", "CONTRIBUTING.md"]
    assert outcome.metrics.tokens_in and outcome.metrics.tokens_in > len(AGENTS_MD) // 4
    assert fake.run(build_prompt(TASK), sandbox, AgentContext(seed=3)).answer == outcome.answer


def test_fake_agent_without_instruction_files_falls_back_to_human_docs(
    tmp_path: Path, tmp_checkout: CheckoutFactory
) -> None:
    with LocalProvider(root=tmp_path / "sb").create(tmp_checkout(DOCS), SandboxSpec()) as sb:
        outcome = get_agent("fake").run(build_prompt(TASK), sb, AgentContext(seed=3))
    assert outcome.answer is not None
    assert outcome.answer.citations[0].path == "CONTRIBUTING.md"
    assert "make check" not in outcome.answer.commands
    assert outcome.metrics.files_read == ["README.md", "CONTRIBUTING.md"]


def test_fake_agent_says_no_to_what_the_docs_forbid_and_does_not_recommend_it(sandbox: Sandbox) -> None:
    task = Task(id="p", prompt="Can I run git push --force on a shared branch?", reviewed=True)
    outcome = get_agent("fake").run(build_prompt(task), sandbox, AgentContext(seed=3))
    assert outcome.answer is not None
    assert outcome.answer.verdict == "no"
    assert outcome.answer.commands == []


def test_fake_agent_repeats_vary_with_the_seed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for name, text in {**DOCS, "AGENTS.md": AGENTS_MD}.items():
        (root / name).write_text(text)
    answers = {json.dumps(solve(build_prompt(TASK), root, seed)[0], sort_keys=True) for seed in range(60)}
    assert 2 <= len(answers) <= 5, "a seeded error rate gives a few distinct answers, not one or chaos"


@pytest.mark.parametrize(
    ("cmd", "starts"),
    [("sh -c true", True), ("/nonexistent/agent", False), ("no-such-program-xyz --flag", False)],
)
def test_preflight_tells_a_command_that_cannot_start_from_one_that_can(
    sandbox: Sandbox, cmd: str, starts: bool
) -> None:
    agent = CommandAgent(cmd)
    if starts:
        preflight(agent, sandbox)
        return
    with pytest.raises(AgentError, match=f"program {agent.argv[0]!r} is not an executable"):
        preflight(agent, sandbox)


def test_preflight_resolves_relative_paths_in_the_checkout(sandbox: Sandbox) -> None:
    sandbox.write_file("tools/agent.sh", b"#!/bin/sh\necho hi\n", mode=0o755)
    sandbox.write_file("tools/notes.txt", b"not a program\n")
    preflight(CommandAgent("./tools/agent.sh --json"), sandbox)
    with pytest.raises(AgentError, match="not an executable"):
        preflight(CommandAgent("./tools/notes.txt"), sandbox)


def test_an_unbalanced_quote_is_an_agent_error_naming_the_command() -> None:
    with pytest.raises(AgentError, match=r"the agent command \"./agent 'my agent\" cannot be split"):
        CommandAgent("./agent 'my agent")


def test_only_the_command_agent_has_a_program_to_check() -> None:
    assert CommandAgent("./a").user_executable == "./a"
    assert get_agent("fake").user_executable is None
