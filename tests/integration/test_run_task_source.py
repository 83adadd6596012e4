"""A change task drafted from a past commit runs on that commit's parent, whatever `--source`
the matrix runs: the project has moved on since (head holds the fix), so on head's code its
hidden tests would pass before the agent starts and its reference would not apply."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import yaml
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.results.models import Manifest, RunResult

TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIX_AGENT = (
    "import json, pathlib; p = pathlib.Path('calc/ops.py'); "
    "p.write_text(p.read_text().replace('return a - b', 'return a + b')); "
    "print(json.dumps({'answer': 'fixed'}))"
)


def _project(tmp_path: Path) -> tuple[GitRepo, str]:
    """A bug, its fix with tests, later code work, then an AGENTS.md edit (the PR)."""
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(
        {
            ".docdelta.yml": sandbox_config(),
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "AGENTS.md": "# Agents\nRun the tests.\n",
        }
    )
    fix = repo.commit(
        {"calc/ops.py": "def add(a, b):\n    return a + b\n", "tests/test_ops.py": TEST},
        message="fix: add subtracted (#7)",
    )
    repo.commit({"calc/ops.py": "def add(a, b):\n    return b + a\n\n\ndef neg(a):\n    return -a\n"})
    repo.commit({"AGENTS.md": "# Agents\nArithmetic lives in calc/ops.py.\n"})
    return repo, fix


def _draft(repo: GitRepo, fix: str, tasks: Path) -> str:
    assert main(["tasks", "from-commit", fix, "--repo", str(repo.path), "--tasks", str(tasks)]) == 0
    (task_file,) = tasks.glob("*.yaml")
    data = yaml.safe_load(task_file.read_text())
    # Reviewed; the sandbox's python3 has no pytest, so name this interpreter (.docdelta.yml shows it).
    data["reviewed"] = True
    validation = data["gold"]["validation"]
    validation["command"] = validation["command"].replace("python3", shlex.quote(sys.executable), 1)
    task_file.write_text(yaml.safe_dump(data))
    return str(data["id"])


@pytest.mark.parametrize(("agent", "score"), [("fake", 0.0), ("command", 1.0)])
def test_a_drafted_task_runs_on_its_own_source_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str, score: float
) -> None:
    repo, fix = _project(tmp_path)
    task_id = _draft(repo, fix, tmp_path / "tasks")
    workdir = tmp_path / "work"
    cmd = (
        ["--agent-cmd", f"{shlex.quote(sys.executable)} -c {shlex.quote(FIX_AGENT)}"]
        if agent == "command"
        else []
    )
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(tmp_path / "tasks"), "--workdir", str(workdir),
        "--agent", agent, *cmd, "--repeats", "1", "--sandbox", "local",
    ]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    results = [
        RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r1/result.json")
    ]
    assert sorted(r.cell.condition for r in results) == ["base", "head", "none"]
    for r in results:
        assert r.score is not None and r.score.value == score, (r.cell, r.hidden_tests)
        assert r.hidden_tests is not None and r.hidden_tests.status == ("pass" if score else "fail")
    parent = repo.git("rev-parse", f"{fix}~1").strip()
    manifest = Manifest.model_validate_json((workdir / "manifest.json").read_text())
    assert manifest.task_sources == {task_id: parent}
    assert manifest.source_sha == repo.git("rev-parse", "HEAD").strip()
    out = capsys.readouterr().out
    assert f"change task `{task_id}` ran on its own source commit `{parent[:12]}`" in out


def test_a_task_source_that_is_no_commit_is_refused_naming_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, fix = _project(tmp_path)
    tasks = tmp_path / "tasks"
    task_id = _draft(repo, fix, tasks)
    (task_file,) = tasks.glob("*.yaml")
    data = yaml.safe_load(task_file.read_text())
    data["gold"]["validation"]["source"] = "no-such-ref"
    task_file.write_text(yaml.safe_dump(data))
    args = ["run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--tasks", str(tasks)]
    assert main([*args, "--workdir", str(tmp_path / "w"), "--agent", "fake", "--repeats", "1"]) == 2
    err = capsys.readouterr().err
    assert f"task {task_id!r}" in err and "gold.validation.source 'no-such-ref' is not a commit" in err
