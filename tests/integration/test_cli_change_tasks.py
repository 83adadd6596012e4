"""Change tasks through the whole pipeline: the agent edits its checkout, hidden tests run
afterwards in a fresh offline sandbox, and the docs make the difference between arms."""

from __future__ import annotations

import shlex
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from gitrepo import GitRepo
from samples import CALC_HIDDEN_TEST as HIDDEN_TEST
from samples import CALC_REFERENCE as REFERENCE
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.results.models import RunResult

TASK = f"""\
id: fix-add
kind: change
prompt: add() returns wrong results. Fix it.
gold:
  validation:
    hidden: [tests/test_ops.py]
    command: {shlex.quote(sys.executable)} -m pytest -q tests/test_ops.py
  checks:
    require_changed: [calc/ops.py]
reviewed: true
"""

# A command agent that only finds the bug when the docs point at it, and that cheats by
# planting a conftest.py that would make every test pass (the grader must drop it).
AGENT = """\
import pathlib, json
root = pathlib.Path.cwd()
docs = (root / "AGENTS.md").read_text() if (root / "AGENTS.md").exists() else ""
if "calc/ops.py" in docs:
    (root / "calc/ops.py").write_text("def add(a, b):\\n    return a + b\\n")
(root / "conftest.py").write_text("import pytest\\n@pytest.hookimpl(tryfirst=True)\\n"
    "def pytest_runtest_call(item):\\n    return True\\n")
print(json.dumps({"answer": "done", "files": ["calc/ops.py"],
                  "hidden_visible": (root / "tests/test_ops.py").exists()}))
"""


def _project(tmp_path: Path, reference: str) -> GitRepo:
    """A buggy calc project with one change task; only head's AGENTS.md points at the bug."""
    repo = GitRepo.init(tmp_path / "proj")
    (tmp_path / "agent-bin").mkdir()
    repo.commit(
        {
            ".docdelta.yml": sandbox_config(tmp_path / "agent-bin"),
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "AGENTS.md": "# Agents\nBe careful.\n",
            ".docdelta/tasks/fix-add.yaml": TASK,
            ".docdelta/tasks/fix-add/hidden/tests/test_ops.py": HIDDEN_TEST,
            ".docdelta/tasks/fix-add/reference.patch": reference,
        }
    )
    repo.commit({"AGENTS.md": "# Agents\nArithmetic lives in calc/ops.py.\n"})
    return repo


def test_hidden_tests_grade_change_runs_and_the_docs_make_the_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path, REFERENCE)
    agent = tmp_path / "agent-bin" / "agent.py"
    agent.write_text(textwrap.dedent(AGENT))
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "command", "--agent-cmd", f"{sys.executable} {agent}", "--repeats", "1",
    ]  # fmt: skip
    assert main(args) == 0
    assert (workdir / "selftest" / "fix-add.json").is_file()  # the task proved its tests first
    results = {
        r.cell.condition: r
        for r in (
            RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r1/result.json")
        )
    }
    assert results["head"].score is not None and results["head"].score.value == 1.0
    for arm in ("base", "none"):
        result = results[arm]
        assert result.score is not None and result.score.value == 0.0, arm
        assert result.hidden_tests is not None and result.hidden_tests.status == "fail"
    head = results["head"]
    assert head.hidden_tests is not None and head.hidden_tests.status == "pass"
    assert "conftest.py" in {d.path for d in head.hidden_tests.dropped}  # the planted cheat was dropped
    assert head.checks is not None and head.checks.passed
    # the hidden test never reached the agent's checkout, in any arm
    assert all(r.outcome.answer is not None for r in results.values())
    for r in results.values():
        assert '"hidden_visible": false' in r.outcome.final_text
    diff = (workdir / "runs" / "proj" / "fix-add" / "head" / "r1" / "diff.patch").read_text()
    assert "+    return a + b" in diff
    out = capsys.readouterr().out
    assert "| fix-add | 0.00 | 1.00 | 0.00 | +1.00 (not significant) |" in out  # 1 repeat: no flip
    assert "tests `hidden tests pass` missed in 1/1 runs" in out


def test_a_change_task_whose_selftest_fails_is_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a reference that does not fix the bug: the hidden tests cannot tell right from wrong
    repo = _project(tmp_path, REFERENCE.replace("a + b", "a * b"))
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "command", "--agent-cmd", "true", "--repeats", "1",
    ]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "task 'fix-add' failed its selftest: reference passes" in err
    assert not list(workdir.glob("runs/*/*/*/r1/result.json"))  # no agent ran


def test_a_saved_selftest_is_not_reused_once_the_toolchain_it_ran_with_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The saved selftest's key covers the environment. A run crashes after its selftest
    passed; before the rerun, the `pytest` that `sandbox.paths`/`sandbox.env` show the hidden
    tests is gone (an uninstalled tool, a removed virtualenv). The rerun must run the selftest
    again and stop up front, naming the cause, instead of reusing the stale pass and ending
    the resumed runs as `no_test_ran` faults."""
    tools = tmp_path / "tools"
    tools.mkdir()
    runner = tools / "pytest"  # the project's test runner, found on the sandbox's PATH
    runner.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m pytest "$@"\n')
    runner.chmod(0o755)
    repo = _project(tmp_path, REFERENCE)
    config = yaml.safe_load(sandbox_config(tmp_path / "agent-bin", tools))
    config["sandbox"]["env"] = {"PATH": f"{tools}:/usr/bin:/bin"}
    task = TASK.replace(f"command: {shlex.quote(sys.executable)} -m pytest", "command: pytest")
    base = repo.commit({".docdelta.yml": yaml.safe_dump(config), ".docdelta/tasks/fix-add.yaml": task})
    head = repo.commit({"AGENTS.md": "# Agents\nArithmetic lives in calc/ops.py. Run `pytest`.\n"})
    agent = tmp_path / "agent-bin" / "agent.py"
    agent.write_text(textwrap.dedent(AGENT))
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", base, "--head", head,
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "command", "--agent-cmd", f"{sys.executable} {agent}", "--repeats", "1",
    ]  # fmt: skip
    assert main(args) == 0
    record = workdir / "selftest" / "fix-add.json"
    saved, written = record.read_text(), record.stat().st_mtime_ns
    assert '"passed":true' in saved.replace(" ", "")
    capsys.readouterr()
    assert main(args) == 0  # unchanged: everything reused, the selftest too (same key)
    assert "(0 ran, 3 reused)" in capsys.readouterr().err
    assert record.stat().st_mtime_ns == written
    for result in workdir.glob("runs/*/*/*/r1/result.json"):
        result.unlink()  # the crash: the rerun resumes every cell
    runner.unlink()  # ... and the environment broke meanwhile
    capsys.readouterr()
    assert main(args) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "task 'fix-add' failed its selftest" in err
    assert "pytest: not found" in err or "No such file" in err, err
    assert "`pytest` is not in the sandbox: name the folder that holds it in `sandbox.paths`" in err, err
    assert not list(workdir.glob("runs/*/*/*/r1/result.json"))  # no agent ran on the broken toolchain
    assert record.read_text() != saved  # the failed report is kept, for the scorecard
