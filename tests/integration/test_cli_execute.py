"""gold.execute through `docdelta run`: the fake agent answers from each arm's AGENTS.md, its
proposed command runs in a fresh offline bubblewrap sandbox of the arm's checkout, and a
command the stale docs name (a test module that was renamed) is a miss whose evidence is in
the result and the scorecard. A rerun reuses the saved results instead of running again.
The command agent shows the run's API key is redacted from everything saved."""

from __future__ import annotations

import secrets
import shlex
import sys
from pathlib import Path

import pytest
from clirun import run_args
from proposals import SNOOP_AGENT, check_fake_run, check_redacted, execute_project
from toolchain import sandbox_config

from docdelta.cli import main


def test_a_stale_command_in_the_docs_is_a_miss_with_evidence_and_a_rerun_reuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = execute_project(tmp_path / "proj")
    workdir = tmp_path / "work"
    args = [*run_args(repo, workdir, "unused", "--repeats", "1")]
    args[args.index("command")] = "fake"
    del args[args.index("--agent-cmd") : args.index("--agent-cmd") + 2]
    assert main(args) == 0
    out = capsys.readouterr().out
    check_fake_run(workdir, out)
    saved = {p: p.read_bytes() for p in workdir.glob("runs/*/*/*/r1/result.json")}
    assert len(saved) == 3
    assert main(args) == 0
    assert {p: p.read_bytes() for p in saved} == saved  # reused as saved: nothing ran again


def test_the_runs_api_key_is_redacted_from_what_a_proposal_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-planted-" + secrets.token_hex(12)
    monkeypatch.setenv("OPENAI_API_KEY", secret)  # the key docdelta holds for its gateway
    # ... and the project leaked it into a file its checkout holds
    repo = execute_project(tmp_path / "proj", sandbox_config(), {".env": f"OPENAI_API_KEY={secret}\n"})
    workdir = tmp_path / "work"
    assert (
        main(run_args(repo, workdir, shlex.join([sys.executable, "-c", SNOOP_AGENT]), "--repeats", "1")) == 0
    )
    check_redacted(workdir, secret, "bwrap")


def test_external_trials_refuse_tasks_whose_commands_would_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = execute_project(tmp_path / "proj")
    args = [
        "prepare", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(tmp_path / "work"),
    ]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "tasks with gold.execute (run-tests) need docdelta's own sandbox" in err
    assert "Traceback" not in err
