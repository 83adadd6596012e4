"""Choosing a sandbox through the CLI: no silent downgrade, `none` only when asked for and
flagged, and toolchain paths that would expose the gold refused up front."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from gitrepo import GitRepo
from toolchain import MAKE_CHECK_TASK

from docdelta.cli.main import main
from docdelta.results.layout import CHECKOUTS
from docdelta.results.models import RunResult


def _project(tmp_path: Path, config: Mapping[str, object] | None = None) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    files = {
        "README.md": "# proj\n",
        "AGENTS.md": "# Agents\n",
        ".docdelta/tasks/test-cmd.yaml": MAKE_CHECK_TASK,
    }
    if config is not None:
        files[".docdelta.yml"] = yaml.safe_dump(config)
    repo.commit(files)
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    return repo


def _args(repo: GitRepo, workdir: Path, tasks: Path, *extra: str) -> list[str]:
    return [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(tasks), "--workdir", str(workdir), "--repeats", "1", *extra,
    ]  # fmt: skip


def _run(repo: GitRepo, workdir: Path, *extra: str, tasks: Path | None = None) -> int:
    args = _args(repo, workdir, tasks or repo.path / ".docdelta/tasks", "--agent", "fake", *extra)
    return main([*args, "--conditions", "base,head"])


@pytest.mark.parametrize("jobs", ["1", "4"])
def test_without_bubblewrap_the_run_refuses_with_the_install_hint_before_sealing(
    jobs: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """At any --jobs: --jobs N's providers used to be made by the first cells, after every
    checkout was sealed (seconds on a real tree, for a run that could not start)."""
    repo = _project(tmp_path)
    bin_dir = tmp_path / "bin-without-bwrap"
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bin_dir / "git").symlink_to(git)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert _run(repo, tmp_path / "work", "--jobs", jobs) == 2
    err = capsys.readouterr().err
    assert "needs bubblewrap" in err and "apt-get install bubblewrap" in err and "--sandbox none" in err
    assert not list((tmp_path / "work").glob("runs/**/result.json")), "no run, no result"
    assert not list((tmp_path / "work").glob(f"{CHECKOUTS}/*")), "nothing sealed"


def test_sandbox_none_runs_unisolated_and_the_scorecard_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    workdir = tmp_path / "work"
    assert _run(repo, workdir, "--sandbox", "none") == 0
    results = [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/**/result.json")]
    assert len(results) == 2 and {r.isolation for r in results} == {"none"}
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir)]) == 0
    assert "⚠ not fully isolated: none" in capsys.readouterr().out


def test_the_local_sandbox_hides_a_workdir_inside_the_repository(tmp_path: Path) -> None:
    """The README's own example (`--workdir .docdelta-work` in the repository) works: the
    agent sees only its checkout, so nothing has to be hidden by hand."""
    repo = _project(tmp_path)
    workdir = repo.path / ".docdelta-work"
    assert _run(repo, workdir) == 0
    results = [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/**/result.json")]
    assert len(results) == 2 and {(r.status.value, r.isolation) for r in results} == {("ok", "bwrap")}


@pytest.mark.parametrize("shown", ["repository", "tasks", "workdir", "parent"])
def test_toolchain_paths_that_expose_the_gold_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shown: str
) -> None:
    tasks, workdir = tmp_path / "tasks", tmp_path / "work"
    path = {
        "repository": tmp_path / "proj",
        "tasks": tasks / "sub",
        "workdir": workdir,
        "parent": tmp_path,
    }[shown]
    repo = _project(tmp_path, {"sandbox": {"paths": ["/usr/share", str(path)]}})
    shutil.copytree(repo.path / ".docdelta/tasks", tasks)
    (tasks / "sub").mkdir()
    assert _run(repo, workdir, tasks=tasks) == 2
    err = capsys.readouterr().err
    assert "field 'sandbox.paths[1]'" in err and "Traceback" not in err
    assert not workdir.exists() or not list(workdir.glob("runs/**/result.json"))


def test_toolchain_paths_and_env_reach_the_agent(tmp_path: Path) -> None:
    tool = tmp_path / "toolchain"
    (tool / "bin").mkdir(parents=True)
    (tool / "bin" / "project-tool").write_text("#!/bin/sh\necho from the toolchain\n")
    (tool / "bin" / "project-tool").chmod(0o755)
    agent = tool / "agent.py"
    agent.write_text(
        "import json, os, subprocess\n"
        "out = subprocess.run(['project-tool'], capture_output=True, text=True).stdout.strip()\n"
        "print(json.dumps({'answer': out + ' ' + os.environ['PROJECT_FLAG'], 'commands': ['make check']}))\n"
    )
    config = {
        "sandbox": {"paths": [str(tool)], "env": {"PATH": f"{tool}/bin:/usr/bin:/bin", "PROJECT_FLAG": "on"}}
    }
    repo = _project(tmp_path, config)
    workdir = tmp_path / "work"
    extra = ("--agent", "command", "--agent-cmd", f"python3 {agent}", "--conditions", "head")
    assert main(_args(repo, workdir, repo.path / ".docdelta/tasks", *extra)) == 0
    (result,) = [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/**/result.json")]
    assert result.outcome.answer is not None
    assert result.outcome.answer.answer == "from the toolchain on"
    assert os.environ.get("PROJECT_FLAG") is None, "the variable is the sandbox's, not docdelta's"
