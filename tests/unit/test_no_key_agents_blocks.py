"""The no-key agents (the fake agent and the example grep agent) answer a question about a
shell block whose commands each stand under their own comment line, the layout many
CLAUDE.md files use: the answer is the commands under the matching comment, not the comment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from samples import ONE_SHELL_BLOCK

from docdelta.agents.fake_agent import solve
from docdelta.agents.models import AgentAnswer
from docdelta.agents.prompt import build_prompt
from docdelta.grading.answer import score_answer
from docdelta.improve.task_draft import draft_from_text
from docdelta.tasks.models import Task

GREP_AGENT = Path(__file__).resolve().parents[2] / "examples" / "agents" / "grep_agent.py"
CLAUDE_MD = ONE_SHELL_BLOCK
README = (
    "# proj\n\nA library. Run `pip install proj` to install it.\n\n"
    "The examples run a bash command from the workflow: `./foo.sh --help`.\n"
)
"""Its last line shares more words with the drafted prompts' frame ("Which command should I
run ... (Workflow)") than `# Typecheck` does: the quoted situation must decide."""
RUFF = ["python -m ruff check src/ tests/ --fix", "python -m ruff format src/ tests/"]
CASES = [
    ("Typecheck", ["python -m mypy src/"]),
    ("Run all tests", ["python -m pytest tests/"]),
    ("Check for issues and fix automatically", RUFF),
]


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "CLAUDE.md").write_text(CLAUDE_MD)
    (tmp_path / "README.md").write_text(README)
    return tmp_path


def _grep_agent(root: Path, prompt: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(GREP_AGENT)], input=prompt, capture_output=True, text=True, cwd=root, check=True
    )
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def _fake_agent(root: Path, prompt: str) -> dict[str, Any]:
    """The fake agent's usual answer: the seeded slips aside."""
    answers = [solve(prompt, root, seed)[0] for seed in range(10)]
    return max(answers, key=answers.count)


def _lines_of(commands: list[str]) -> set[int]:
    """The 1-based lines of CLAUDE.md that hold `commands`."""
    return {n for n, line in enumerate(CLAUDE_MD.splitlines(), 1) if line in commands}


def _cited(answer: dict[str, Any]) -> set[int]:
    """The lines of the answer's first citation that are command lines (its comment aside)."""
    first, _, last = answer["citations"][0]["lines"].partition("-")
    cited = set(range(int(first), int(last or first) + 1))
    return cited & _lines_of([line for line in CLAUDE_MD.splitlines() if line.startswith("python")])


def _prompt(situation: str) -> str:
    question = f'Which command should I run in this repository for this (Workflow): "{situation}"?'
    return build_prompt(Task(id="t", prompt=question, reviewed=True))


@pytest.mark.parametrize(("situation", "commands"), CASES)
def test_fake_agent_answers_a_comment_with_the_commands_under_it(
    tmp_path: Path, situation: str, commands: list[str]
) -> None:
    usual = _fake_agent(_repo(tmp_path), _prompt(situation))
    assert usual["commands"] == commands
    assert usual["citations"][0]["path"] == "CLAUDE.md"
    assert _cited(usual) == _lines_of(commands)


@pytest.mark.parametrize(("situation", "commands"), CASES)
def test_grep_agent_answers_a_comment_with_the_commands_under_it(
    tmp_path: Path, situation: str, commands: list[str]
) -> None:
    answer = _grep_agent(_repo(tmp_path), _prompt(situation))
    assert answer["commands"] == commands
    assert answer["files"] == ["CLAUDE.md"]
    assert _cited(answer) == _lines_of(commands)


def test_both_agents_answer_every_task_drafted_from_such_a_block(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    drafts = draft_from_text(CLAUDE_MD, "CLAUDE.md")
    assert len(drafts) == len(CASES)
    for draft in drafts:
        prompt = build_prompt(draft.task)
        assert _grep_agent(root, prompt)["commands"] == draft.task.gold.commands, draft.task.id
        assert _fake_agent(root, prompt)["commands"] == draft.task.gold.commands, draft.task.id


def test_grep_agent_passes_the_yes_no_task_init_drafts_from_a_rule_that_forbids(tmp_path: Path) -> None:
    """`docdelta init` drafts a verdict task from a "Do not ..." rule and prints a run with the
    example grep agent: the agent must give the verdict and not recommend what the rule forbids."""
    rules = "# Agents\n\n- Do not `git commit` anything unless instructed to do so.\n- Run `make test`.\n"
    (tmp_path / "AGENTS.md").write_text(rules)
    (draft,) = [d for d in draft_from_text(rules, "AGENTS.md") if d.task.gold.verdict]
    answer = _grep_agent(tmp_path, build_prompt(draft.task))
    assert answer["verdict"] == "no" and answer["commands"] == []
    score = score_answer(draft.task, AgentAnswer.model_validate(answer), tmp_path)
    assert score.value == 1.0, score.items
    may = Task(id="t", prompt="Which make target runs the test suite?", reviewed=True)
    assert _grep_agent(tmp_path, build_prompt(may)).get("verdict") is None  # no verdict where none is asked
