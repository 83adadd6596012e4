"""gold.execute through `docdelta run`: the fake agent answers from each arm's AGENTS.md, its
proposed command runs in a fresh offline bubblewrap sandbox of the arm's checkout, and a
command the stale docs name (a test module that was renamed) is a miss whose evidence is in
the result and the scorecard. A rerun reuses the saved results instead of running again.
The command agent shows the run's API key is redacted from everything saved."""

from __future__ import annotations

import secrets
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import BlockingAgent, agent_processes, run_args, saved_results
from proposals import SNOOP_AGENT, TASK, check_fake_run, check_redacted, execute_project
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.errors import ExitCode


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


def test_ctrl_c_during_a_proposal_kills_it_and_saves_no_half_graded_run(tmp_path: Path) -> None:
    """The proposal tells the test it runs (a byte on a fifo) and blocks on another; the
    task's 600 s limit would hold Ctrl-C for ten minutes were the sandbox not closed under it."""
    sync = BlockingAgent(tmp_path / "sync")
    try:
        proposal = f"python3 -m unittest; printf 1 > {sync.started}; cat {sync.never}"
        agent = f"import json; print(json.dumps({{'commands': [{proposal!r}]}}))"
        task = TASK.replace("{timeout_s: 30}", "{timeout_s: 600}")
        repo = execute_project(tmp_path / "proj", sandbox_config(tmp_path / "sync"))
        repo.commit({".docdelta/tasks/run-tests.yaml": task, "AGENTS.md": "# Agents\n\nRun `make`.\n"})
        args = run_args(repo, tmp_path / "work", shlex.join([sys.executable, "-c", agent]), "--repeats", "1")
        proc = subprocess.Popen([sys.executable, "-m", "docdelta", *args], stderr=subprocess.PIPE, text=True)
        try:
            sync.wait_running(1)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=300)  # a guard against a hang, not a synchronisation
        finally:
            if proc.poll() is None:  # the test failed: leave no docdelta (its bwraps die with it)
                proc.kill()
                proc.wait()
        assert proc.returncode == ExitCode.INTERRUPTED, err
        assert agent_processes(sync.started) == [], "the proposal was killed"
        assert saved_results(tmp_path / "work") == [], "the interrupted run has no result: a rerun runs it"
    finally:
        sync.close()
