"""`docdelta tasks from-commit`, `docdelta selftest` and `docdelta detect --diff` through the CLI."""

from __future__ import annotations

import io
import shlex
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main

TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _history(tmp_path: Path) -> tuple[GitRepo, str]:
    repo = GitRepo.init(tmp_path / "proj")
    files = {"calc/__init__.py": "", "calc/ops.py": "def add(a, b):\n    return a - b\n"}
    repo.commit({".docdelta.yml": sandbox_config(), **files})
    fix = repo.commit(
        {"calc/ops.py": "def add(a, b):\n    return a + b\n", "tests/test_ops.py": TEST},
        message="Fix add: it subtracted",
    )
    return repo, fix


def test_a_drafted_task_passes_selftest_and_a_broken_one_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, fix = _history(tmp_path)
    tasks = tmp_path / "tasks"
    assert main(["tasks", "from-commit", fix, "--repo", str(repo.path), "--tasks", str(tasks)]) == 0
    assert "reviewed: false" in capsys.readouterr().out
    (task_file,) = tasks.glob("*.yaml")
    # The sandbox's python3 has no pytest: name this interpreter (shown by .docdelta.yml).
    task_file.write_text(task_file.read_text().replace("python3", shlex.quote(sys.executable), 1))
    args = ["selftest", "--repo", str(repo.path), "--tasks", str(tasks), "--flake-runs", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ok   fix-add-it-subtracted" in out and "FAIL" not in out

    (reference,) = tasks.glob("*/reference.patch")
    reference.write_text(reference.read_text().replace("return a + b", "return a * b"))
    assert main(args) == 2
    assert "FAIL reference passes" in capsys.readouterr().out


def test_detect_reads_a_unified_diff_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    base = repo.commit({"README.md": "hi\n"})
    head = repo.commit({".cursor/rules/style.mdc": "use tabs\n", "docs/agents.md": "notes\n"})
    diff = repo.git("diff", base, head).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(diff)))  # read as bytes (Latin-1 safe)
    assert main(["detect", "--diff", "-"]) == 0
    out = capsys.readouterr().out
    assert "added     .cursor/rules/style.mdc  read by: cursor" in out
    assert "note      docs/agents.md" in out
    assert main(["detect", "--diff", "-", "--base", base]) == 2
