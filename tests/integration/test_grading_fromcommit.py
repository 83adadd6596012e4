"""`task_from_commit`: a past fix-with-tests becomes a reviewed-false change task whose selftest holds."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo
from toolchain import PYTHON_TOOLCHAIN

from docdelta.checkout.seal import seal
from docdelta.errors import ConfigError, TaskError
from docdelta.git import Repo
from docdelta.grading.hidden import load_assets
from docdelta.grading.selftest import selftest
from docdelta.improve.from_commits import task_from_commit, write_task
from docdelta.instructions.detect import InstructionMatcher, Overlay
from docdelta.sandbox.local import LocalProvider
from docdelta.tasks.load import load_tasks
from docdelta.tasks.models import Gold, Task

TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture
def history(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo.init(tmp_path / "proj")
    parent = repo.commit({"calc/__init__.py": "", "calc/ops.py": "def add(a, b):\n    return a - b\n"})
    fix = repo.commit(
        {"calc/ops.py": "def add(a, b):\n    return a + b\n", "tests/test_ops.py": TEST},
        message="Fix add: it subtracted\n\nadd(2, 3) returned -1.",
    )
    return repo, parent, fix


def test_a_fix_commit_becomes_a_draft_change_task(tmp_path: Path, history: tuple[GitRepo, str, str]) -> None:
    repo, parent, fix = history
    draft = task_from_commit(Repo(repo.path), fix)
    task, assets = draft.task, draft.assets
    assert task.kind == "change" and task.reviewed is False
    assert task.id == f"fix-add-it-subtracted-{fix[:8]}"
    # The problem (title and the tests' names), never the message body that explains the fix.
    assert task.prompt.startswith("Fix add: it subtracted\n\nThe maintainers' tests for this expect that:\n")
    assert "- add (tests/test_ops.py)" in task.prompt and "returned -1" not in task.prompt
    validation = task.gold.validation
    assert validation is not None
    assert (validation.source, validation.hidden) == (parent, ["tests/test_ops.py"])
    assert validation.command == "python3 -m pytest -q tests/test_ops.py"
    assert assets.hidden == {"tests/test_ops.py": TEST.encode()}
    assert assets.reference is not None and b"+    return a + b" in assets.reference

    task_file = write_task(draft, tmp_path / "tasks")
    assert "reviewed: false" in task_file.read_text()
    (loaded,) = load_tasks(tmp_path / "tasks")
    assert loaded.task == task
    reread = load_assets(loaded.task, loaded.path, Repo(repo.path), parent)
    assert reread == assets
    with pytest.raises(TaskError, match="already exists"):
        write_task(draft, tmp_path / "tasks")


def test_the_drafted_task_passes_its_selftest(tmp_path: Path, history: tuple[GitRepo, str, str]) -> None:
    repo, parent, fix = history
    draft = task_from_commit(Repo(repo.path), fix)
    task, assets = draft.task, draft.assets
    assert task.gold.validation is not None
    # python3 on the sandbox's PATH has no pytest; name this interpreter (see test_grading_hidden).
    command = task.gold.validation.command.replace("python3", shlex.quote(sys.executable), 1)
    runnable = task.model_copy(
        update={"gold": Gold(validation=task.gold.validation.model_copy(update={"command": command}))}
    )
    sealed = seal(
        Repo(repo.path), parent, Overlay(), tmp_path / "sealed", InstructionMatcher(), ["/tests/test_ops.py"]
    )
    provider = LocalProvider(root=tmp_path / "boxes", ro_paths=PYTHON_TOOLCHAIN)
    report = selftest(runnable, sealed, assets.hidden, assets.reference, provider, flake_runs=1)
    assert report.passed, report


def test_commits_that_cannot_become_tasks_are_refused(history: tuple[GitRepo, str, str]) -> None:
    repo, parent, _fix = history
    with pytest.raises(ConfigError, match="is a root commit"):
        task_from_commit(Repo(repo.path), parent)
    no_tests = repo.commit({"README.md": "hi"}, message="docs")
    with pytest.raises(ConfigError, match="adds or changes no test file"):
        task_from_commit(Repo(repo.path), no_tests)


def test_a_task_file_for_a_change_needs_validation() -> None:
    with pytest.raises(ValueError, match=r"a change task needs gold\.validation"):
        Task(id="x", prompt="p", kind="change")


def test_a_plain_diff_u_reference_is_refused_as_applying_nothing(
    tmp_path: Path, history: tuple[GitRepo, str, str]
) -> None:
    """The grader applies a reference file by file from its `diff --git` headers: a plain
    `diff -u` has none, so it would apply nothing and the selftest would blame the tests."""
    repo, parent, fix = history
    draft = task_from_commit(Repo(repo.path), fix)
    task_file = write_task(draft, tmp_path / "tasks")
    reference = task_file.parent / draft.task.id / "reference.patch"
    reference.write_text(
        "--- calc/ops.py.orig\n+++ calc/ops.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
        "-    return a - b\n+    return a + b\n"
    )
    (loaded,) = load_tasks(tmp_path / "tasks")
    with pytest.raises(TaskError, match=r"holds no `diff --git` file section, so it would apply nothing"):
        load_assets(loaded.task, loaded.path, Repo(repo.path), parent)


def test_the_draft_uses_the_projects_command_and_flags_a_title_naming_the_fix(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(
        {
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "pyproject.toml": "[project]\nname = 'calc'\n",
            "uv.lock": "version = 1\n",
            "AGENTS.md": "# Agents\nSet up with `uv sync`. Run `make test` before pushing.\n",
            "Makefile": "test:\n\t@uv run python -m pytest -q\n",
        }
    )
    fix = repo.commit(
        {
            "calc/ops.py": (
                "def add(a, b):\n    return _checked_sum(a, b)\n\n\n"
                "def _checked_sum(a, b):\n    return a + b\n"
            ),
            "tests/test_ops.py": TEST,
        },
        message="fix: route add through `_checked_sum` (#12)\n\nThe sum now goes through a helper.",
    )
    draft = task_from_commit(Repo(repo.path), fix)
    assert draft.task.gold.validation is not None
    assert draft.task.gold.validation.command == "uv run python -m pytest -q tests/test_ops.py"
    assert draft.task.prompt.startswith("Route add through `_checked_sum`\n")
    assert "helper" not in draft.task.prompt  # the body explains the fix: left out
    assert draft.notes == [
        "test command from AGENTS.md (`make test`, whose Makefile recipe runs it)",
        "the title names `_checked_sum`, which only the fix adds: reword it if it gives the fix away",
    ]
    text = write_task(draft, tmp_path / "tasks").read_text()
    assert "# - the title names `_checked_sum`" in text
