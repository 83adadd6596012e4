"""`tasks from-commit` on real fix commits: the draft names its own source (the parent), its
prompt states the problem without the fix, and its test command is the project's own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from docdelta.git import Repo
from docdelta.improve.from_commits import task_from_commit

RealRepo = Callable[[str], Path]


@pytest.mark.parametrize(
    ("name", "fix", "title", "command", "origin", "withheld"),
    [
        (
            "genai-prices",
            "9682d06bc296",
            "Validate Python pricing inputs",
            "uv run coverage run -m pytest tests/test_price_calc.py tests/test_usage.py",
            "AGENTS.md (`make test`, whose Makefile recipe runs it)",
            "(#519)",
        ),
        (
            "logfire-js",
            "7c294b89a694",
            "Treat an invalid Date as an unsupported dataset value",
            "pnpm run test",
            "AGENTS.md",
            "normalizeHostedJsonValue",  # the body explains the fix
        ),
        (
            "minijinja",
            "84741ce9a2d3",
            "Honor custom formatter in escape",
            "make test",
            "CLAUDE.md",  # AGENTS.md was a link to it then: read once, as CLAUDE.md
            "fix(filters)",
        ),
    ],
)
def test_a_real_fix_drafts_a_task_that_states_the_problem_and_the_projects_command(
    real_repo: RealRepo, name: str, fix: str, title: str, command: str, origin: str, withheld: str
) -> None:
    repo = Repo(real_repo(name))
    draft = task_from_commit(repo, fix)
    validation = draft.task.gold.validation
    assert validation is not None
    assert validation.source == repo.resolve(f"{fix}~1")
    assert validation.command == command
    assert draft.notes == [f"test command from {origin}"]  # and no title word that only the fix adds
    assert draft.task.prompt.startswith(f"{title}\n\nThe maintainers' tests for this expect that:\n- ")
    assert withheld not in draft.task.prompt
    reference = (draft.assets.reference or b"").decode()
    fixed = [line[1:] for line in reference.splitlines() if line.startswith("+") and len(line) > 20]
    assert not any(line.strip() in draft.task.prompt for line in fixed if "test" not in line)
