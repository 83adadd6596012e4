"""External-controller mode through the CLI: `docdelta prepare` writes blind trials, a
controller docdelta does not drive runs the agent in each (here the fake agent's own script
and a command agent, run as plain subprocesses), and `docdelta check` grades them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from docdelta.agents.fake import SCRIPT
from docdelta.cli.main import main
from docdelta.demo import build_demo_repo
from docdelta.errors import ExitCode
from docdelta.scorecard.models import Summary


def _controller(trial: Path, command: list[str]) -> None:
    """What an IDE or hosted agent's harness does: run the agent in the checkout, write two files."""
    spec = json.loads((trial / "trial.json").read_text())
    prompt = (trial / spec["prompt"]).read_text()
    done = subprocess.run(
        command, cwd=trial / spec["checkout"], input=prompt, capture_output=True, text=True, check=False
    )
    (trial / spec["answer"]).write_text(done.stdout)
    status = {"status": "ok" if done.returncode == 0 else "agent_error", "exit_code": done.returncode}
    (trial / spec["status"]).write_text(json.dumps({**status, "seconds": 1.5}))


def test_trials_run_outside_docdelta_are_graded_like_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = build_demo_repo(tmp_path / "pricebook")
    workdir = tmp_path / "w"
    prepare = [
        "prepare", "--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha,
        "--tasks", str(demo.tasks_dir), "--workdir", str(workdir), "--repeats", "2", "--agent-name", "ide",
    ]  # fmt: skip
    assert main(prepare) == 0
    trials = sorted((workdir / "trials").iterdir())
    assert len(trials) == 4 * 3 * 2
    for trial in trials:
        # Blind and without gold: no condition or task name, no task file, no docdelta config.
        names = {p.name for p in trial.rglob("*")}
        assert not names & {"base", "head", "none", ".docdelta", "run-tests.yaml"}
        assert "make check" not in (trial / "trial.json").read_text()
    script = tmp_path / "fake_agent.py"
    script.write_bytes(SCRIPT)
    for trial in trials:
        _controller(trial, [sys.executable, str(script), "--seed", "1"])
    capsys.readouterr()
    assert main(["check", *map(str, trials), "--tasks", str(demo.tasks_dir)]) == 0
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    by_task = {t.task: t for t in summary.tasks}
    assert by_task["install-dev"].head_vs_base.value == 0
    assert (by_task["run-tests"].head_vs_base.value or 0) > 0.3
    assert summary.confounds.weak_isolation == ["external"]
    assert summary.agent.name == "external" and summary.agent.version == "ide"

    # Preparing again keeps the trials (and what the controller wrote in them).
    assert main(prepare) == 0
    assert all((t / "answer.txt").is_file() for t in trials)


def test_a_command_agent_trial_with_a_bad_status_or_changed_tasks_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = build_demo_repo(tmp_path / "pricebook")
    workdir = tmp_path / "w"
    args = ["prepare", "--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha]
    assert main([*args, "--tasks", str(demo.tasks_dir), "--workdir", str(workdir), "--repeats", "1"]) == 0
    trial = sorted((workdir / "trials").iterdir())[0]
    agent = "import json; print(json.dumps({'answer': 'see README', 'commands': ['make check']}))"
    _controller(trial, [sys.executable, "-c", agent])
    capsys.readouterr()
    assert main(["check", str(trial), "--tasks", str(demo.tasks_dir)]) == 0
    assert ": ok, score" in capsys.readouterr().out
    assert main(["check", str(trial), "--tasks", str(demo.tasks_dir)]) == 0
    assert "(checked before)" in capsys.readouterr().out

    trial = sorted((workdir / "trials").iterdir())[1]
    (trial / "status.json").write_text('{"status": "infra_error"}')
    assert main(["check", str(trial), "--tasks", str(demo.tasks_dir)]) == ExitCode.BAD_INPUT
    assert "infra_error is docdelta's own" in capsys.readouterr().err
    (trial / "status.json").write_text('{"status": "ok", "seconds": 1}')
    edited = tmp_path / "tasks"
    edited.mkdir()
    for task in demo.tasks_dir.iterdir():
        edited.joinpath(task.name).write_text(
            task.read_text().replace("reviewed: true", "reviewed: true\n# edited")
        )
    assert main(["check", str(trial), "--tasks", str(edited)]) == ExitCode.BAD_INPUT
    assert "does not hold the task file this trial was prepared with" in capsys.readouterr().err
