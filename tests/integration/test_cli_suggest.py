"""`docdelta suggest` through the CLI: a PR that deleted a rule, the drafted patch, and the
patched run that proves it (fake agent); a rule quoted from the README (command agent)."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.demo import examples_dir
from docdelta.errors import ExitCode


def _deleted_rule_pr(tmp_path: Path) -> tuple[GitRepo, Path]:
    """The demo with its good AGENTS.md at base, and a PR that deletes the Git section."""
    demo = examples_dir()
    repo = GitRepo.init(tmp_path / "proj")
    shutil.copytree(demo / "repo", repo.path, dirs_exist_ok=True)
    good = (demo / "head" / "AGENTS.md").read_text()
    repo.commit({"AGENTS.md": good}, message="base")
    repo.commit({"AGENTS.md": good[: good.index("## Git")].rstrip() + "\n"}, message="drop the git rule")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("force-push", "install-dev"):
        shutil.copy(demo / "repo" / ".docdelta" / "tasks" / f"{name}.yaml", tasks)
    return repo, tasks


def _run(repo: GitRepo, tasks: Path, workdir: Path, *extra: str) -> list[str]:
    return [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--tasks", str(tasks),
        "--workdir", str(workdir), *extra,
    ]  # fmt: skip


def test_the_patched_run_recovers_the_task_a_deleted_rule_broke(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, tasks = _deleted_rule_pr(tmp_path)
    first = tmp_path / "w1"
    assert main(_run(repo, tasks, first, "--conditions", "base,head", "--repeats", "3")) == 0
    capsys.readouterr()
    suggest = ["suggest", "--workdir", str(first), "--repo", str(repo.path), "--tasks", str(tasks)]
    assert main(suggest) == 0
    out = capsys.readouterr().out
    rule = (
        "Never force-push to `main` (no `git push --force`); "
        "fix a bad commit with a revert pull request instead."
    )
    assert f"+- {rule}\n" in out and "unproven until measured" in out
    assert "drafted for force-push (0.33);" in out  # install-dev missed nothing: no line for it
    patch = first / "suggested.patch"
    assert patch.is_file() and (first / "suggested.patch.json").is_file()

    proof = tmp_path / "w2"
    assert (
        main(
            _run(repo, tasks, proof, "--conditions", "head,patched", "--patch", str(patch), "--repeats", "5")
        )
        == 0
    )
    capsys.readouterr()
    assert main([*suggest, "--measured", str(proof)]) == 0
    out = capsys.readouterr().out
    assert "adding this line raised force-push from 0.33 to 0.93 in 5 runs, p = 0.00198" in out

    # A workdir that ran something else is no proof of this patch.
    assert main([*suggest, "--measured", str(first)]) == ExitCode.BAD_INPUT
    assert "did not run this patch" in capsys.readouterr().err


AGENT = """\
import json, os, sys
sys.stdin.read()
docs = open("AGENTS.md").read() if os.path.exists("AGENTS.md") else ""
print(json.dumps({"answer": "ok", "commands": ["tox -e lint"] if "tox -e lint" in docs else ["flake8"]}))
"""

TASK = """\
id: lint
prompt: How do I lint the code?
gold:
  commands: ["tox -e lint"]
gold_citations:
  - path: CONTRIBUTING.md
    quote: tox -e lint
reviewed: true
"""


def test_a_rule_only_the_human_docs_state_is_quoted_with_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    bin_dir = tmp_path / "agent-bin"
    bin_dir.mkdir()
    (bin_dir / "agent.py").write_text(textwrap.dedent(AGENT))
    repo.commit(
        {
            ".docdelta.yml": sandbox_config(bin_dir),
            "CONTRIBUTING.md": "# Contributing\n\n* Lint with `tox -e lint`\n  before you push.\n",
            "AGENTS.md": "# Notes\n",
        }
    )
    repo.commit({"AGENTS.md": "# Notes\n\nBe brief.\n"})
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "lint.yaml").write_text(TASK)
    agent = ["--agent", "command", "--agent-cmd", f"{sys.executable} {bin_dir / 'agent.py'}"]
    first = tmp_path / "w1"
    assert main(_run(repo, tasks, first, "--conditions", "base,head", "--repeats", "2", *agent)) == 0
    suggest = ["suggest", "--workdir", str(first), "--repo", str(repo.path), "--tasks", str(tasks)]
    capsys.readouterr()
    assert main(suggest) == 0
    out = capsys.readouterr().out
    assert "+- Lint with `tox -e lint` before you push. (see CONTRIBUTING.md)\n" in out
    proof = tmp_path / "w2"
    patch = str(first / "suggested.patch")
    assert (
        main(
            _run(
                repo, tasks, proof, "--conditions", "head,patched", "--patch", patch, "--repeats", "4", *agent
            )
        )
        == 0
    )
    capsys.readouterr()
    assert main([*suggest, "--measured", str(proof)]) == 0
    # 0.50: the command is right now; the agent never cites CONTRIBUTING.md, so that item stays missed.
    assert "adding this line raised lint from 0.00 to 0.50 in 4 runs, p = 0.00714" in capsys.readouterr().out


STALE_TASK = """\
id: run-tests
prompt: How do I run the tests before I commit?
gold:
  commands: ["make test"]
  execute: {timeout_s: 30}
gold_citations:
  - path: AGENTS.md
    quote: Run the tests with
reviewed: true
"""


def _stale_command_pr(tmp_path: Path) -> GitRepo:
    """A Makefile with a `test` target; the PR's AGENTS.md says `make tests`. The agent that
    follows it cites the right line, and its command names no target the project has (no
    `tests/` directory either, which make would take for an up-to-date target)."""
    repo = GitRepo.init(tmp_path / "proj")
    notes = "# Agents\n\n## Checks\n\n- Run the tests with `{}` before you commit.\n- Keep functions small.\n"
    repo.commit(
        {
            "Makefile": ".PHONY: test\n\ntest:\n\tpython3 -m unittest\n",
            "test_calc.py": "import unittest\n\n\nclass Calc(unittest.TestCase):\n"
            "    def test_add(self):\n        pass\n",
            ".docdelta/tasks/run-tests.yaml": STALE_TASK,
            "AGENTS.md": notes.format("make test"),
        }
    )
    repo.commit({"AGENTS.md": notes.format("make tests")}, message="docs: the test target")
    return repo


def test_a_documented_command_that_fails_when_run_is_replaced_by_the_gold_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make tests` contains the gold `make test` as text, so matching words drafted nothing;
    the proposals' execution (gold.execute) shows it names no target, in every head run."""
    repo = _stale_command_pr(tmp_path)
    tasks = repo.path / ".docdelta/tasks"
    first = tmp_path / "w1"
    assert main(_run(repo, tasks, first, "--conditions", "base,head", "--repeats", "4")) == 0
    capsys.readouterr()
    suggest = ["suggest", "--workdir", str(first), "--repo", str(repo.path), "--tasks", str(tasks)]
    assert main(suggest) == 0
    out = capsys.readouterr().out
    assert "-- Run the tests with `make tests` before you commit.\n" in out
    assert "+- Run the tests with `make test` before you commit.\n" in out
    assert "+## Rules agents missed" not in out  # the fix is the correction, not one more line
    evidence = "`make tests` failed in 4 of 4 runs: make: *** No rule to make target 'tests'.  Stop."
    assert f"replaces `make tests` with `make test` in AGENTS.md:5: {evidence}" in out
    side = (first / "suggested.patch.json").read_text()
    assert '"stale": "make tests"' in side and "No rule to make target 'tests'" in side

    proof = tmp_path / "w2"
    patch = str(first / "suggested.patch")
    proving = _run(repo, tasks, proof, "--conditions", "head,patched", "--patch", patch, "--repeats", "4")
    assert main(proving) == 0
    capsys.readouterr()
    assert main([*suggest, "--measured", str(proof)]) == 0
    out = capsys.readouterr().out
    assert "replacing `make tests` with `make test` raised run-tests from 0.50 to 1.00 in 4 runs, p = " in out
