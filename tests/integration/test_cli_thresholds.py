"""`docdelta run --pass-threshold`, a task's own `pass_threshold`, `--task` and `--env-file`
through the real CLI: the fake agent on the demo project, in the local sandbox."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from clirun import pr_args
from gitrepo import GitRepo

from docdelta.cli.main import main
from docdelta.demo import examples_dir
from docdelta.errors import ExitCode
from docdelta.scorecard.models import Summary


def _project(tmp_path: Path) -> tuple[GitRepo, Path]:
    """The demo with its docs change reversed: HEAD~1 has the good AGENTS.md, HEAD the old
    one, so the head arm misses what the base arm gets right."""
    demo = examples_dir()
    repo = GitRepo.init(tmp_path / "proj")
    shutil.copytree(demo / "repo", repo.path, dirs_exist_ok=True)
    repo.commit({"AGENTS.md": (demo / "head" / "AGENTS.md").read_text()}, message="good docs")
    repo.commit({"AGENTS.md": (demo / "repo" / "AGENTS.md").read_text()}, message="old docs again")
    tasks = tmp_path / "tasks"
    shutil.copytree(demo / "repo" / ".docdelta" / "tasks", tasks)
    return repo, tasks


def _args(repo: GitRepo, tasks: Path, workdir: Path, *more: str) -> list[str]:
    return pr_args(repo, tasks, workdir, "--conditions", "base,head", "--repeats", "2", *more)


def _summary(workdir: Path, capsys: pytest.CaptureFixture[str]) -> Summary:
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    return Summary.model_validate(json.loads(capsys.readouterr().out))


def test_a_subset_of_tasks_runs_with_a_default_bar_and_the_report_names_the_miss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, tasks = _project(tmp_path)
    workdir = tmp_path / "work"
    args = _args(repo, tasks, workdir, "--task", "run-tests", "--task", "force-push", "--pass-threshold", "1")
    assert main(args) == ExitCode.OK
    card = capsys.readouterr().out
    assert "**Pass thresholds**" in card
    summary = _summary(workdir, capsys)
    assert [t.task for t in summary.tasks] == ["force-push", "run-tests"]  # only the two asked for
    bars = {t.task: t.threshold for t in summary.tasks}
    assert all(b is not None and b.threshold.fraction == 1.0 for b in bars.values())
    blocked = [t for t, b in bars.items() if b is not None and b.blocks]
    assert blocked == summary.threshold_failures and blocked  # head's old docs miss what base passed
    for task in blocked:
        line = next(x for x in card.splitlines() if x.startswith(f"- {task} (≥ 100 %): head "))
        assert line.endswith("— **fails the check**")


def test_a_task_the_suite_does_not_have_is_refused_with_the_ids_there_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, tasks = _project(tmp_path)
    assert main(_args(repo, tasks, tmp_path / "work", "--task", "run-test")) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "--task run-test: no task file in" in err
    assert "currency-sync, force-push, install-dev, run-tests" in err
    assert "Traceback" not in err


def test_pass_k_without_a_threshold_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, tasks = _project(tmp_path)
    assert main(_args(repo, tasks, tmp_path / "work", "--pass-k", "3")) == ExitCode.BAD_INPUT
    assert "--pass-k needs --pass-threshold" in capsys.readouterr().err


def test_env_file_sets_the_keys_the_environment_lacks_and_never_prints_a_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, tasks = _project(tmp_path)
    env = tmp_path / "keys.env"
    env.write_text("# keys\nDOCDELTA_TEST_KEY=sk-file-secret\nexport DOCDELTA_TEST_SET='kept-secret'\n")
    monkeypatch.delenv("DOCDELTA_TEST_KEY", raising=False)
    monkeypatch.setenv("DOCDELTA_TEST_SET", "from-shell")
    args = _args(repo, tasks, tmp_path / "work", "--task", "run-tests", "--env-file", str(env))
    assert main(args) == ExitCode.OK
    out = capsys.readouterr()
    assert "docdelta: --env-file set DOCDELTA_TEST_KEY\n" in out.err
    assert "secret" not in out.out + out.err
    assert os.environ["DOCDELTA_TEST_KEY"] == "sk-file-secret"
    assert os.environ["DOCDELTA_TEST_SET"] == "from-shell"  # the environment wins
    monkeypatch.delenv("DOCDELTA_TEST_KEY")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("GOOD=1\nthis is not a line\n", "line 2 is not KEY=value"),
        ("9LIVES=x\n", "line 1 names '9LIVES', not a variable name"),
        ("LONELY\n", "line 1: LONELY has no value"),
    ],
)
def test_a_bad_env_file_is_refused_naming_the_flag_and_line_not_the_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    repo, tasks = _project(tmp_path)
    env = tmp_path / "keys.env"
    env.write_text(text)
    assert main(_args(repo, tasks, tmp_path / "work", "--env-file", str(env))) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"--env-file {env}: {message}" in err and "Traceback" not in err


def test_a_missing_env_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, tasks = _project(tmp_path)
    missing = tmp_path / "nope.env"
    assert main(_args(repo, tasks, tmp_path / "work", "--env-file", str(missing))) == ExitCode.BAD_INPUT
    assert f"--env-file {missing} cannot be read" in capsys.readouterr().err
