"""Ctrl-C at the exact points where it used to leave a temporary root behind.

Each test delivers a real SIGINT (`signal.raise_signal`, handled by Python's own handler)
at one point inside docdelta, chosen by wrapping the call that opens the window, so the
window is hit every time rather than once in a thousand CI runs:

- between the private root's mkdtemp and its owner stamp (an unstamped root is one no
  sweep may remove: it cannot tell whose it is);
- inside the removal of the root (a half-removed tree);
- inside the thread pool's start of a worker thread: `ThreadPoolExecutor` records the
  thread only after `Thread.start` returns, so a KeyboardInterrupt there left a worker that
  `shutdown(wait=True)` never joined; it went on making its sandbox after the provider had
  removed the root, and `mkdir(parents=True)` brought the root back, unstamped. That is the
  rare CI failure of test_sigint_mid_matrix_keeps_finished_results_and_a_rerun_resumes:
  on the resumed run the pool's first worker starts right after the last "reused" line,
  exactly when that test sends SIGINT.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from clirun import BlockingAgent, agent_processes, run_args, saved_results
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.sandbox.local import ROOT_PREFIX


def _interrupting_script(window: str) -> str:
    """A Python program that makes a local provider (and closes it) with a SIGINT
    delivered inside `window`."""
    return textwrap.dedent(
        f"""\
        import shutil, signal, tempfile
        from docdelta.sandbox.local import LocalProvider, ROOT_PREFIX
        window = {window!r}
        if window == "stamp":
            real_mkdtemp = tempfile.mkdtemp
            def mkdtemp(*args, **kwargs):
                made = real_mkdtemp(*args, **kwargs)
                if ROOT_PREFIX in made:
                    signal.raise_signal(signal.SIGINT)
                return made
            tempfile.mkdtemp = mkdtemp
            LocalProvider()
        else:
            provider = LocalProvider()
            (provider.root / "some" / "files").mkdir(parents=True)
            real_rmtree = shutil.rmtree
            def rmtree(*args, **kwargs):
                signal.raise_signal(signal.SIGINT)
                return real_rmtree(*args, **kwargs)
            shutil.rmtree = rmtree
            provider.close()
        """
    )


@pytest.mark.parametrize("window", ["stamp", "removal"])
def test_sigint_while_the_private_root_is_made_or_removed_leaves_nothing(tmp_path: Path, window: str) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _interrupting_script(window)],
        env={**os.environ, "TMPDIR": str(tmp)},
        capture_output=True,
        check=False,
    )
    assert b"KeyboardInterrupt" in proc.stderr, proc.stderr  # the signal was delivered, not lost
    assert list(tmp.iterdir()) == [], "the private root is gone when the process is"


def _hanging_project(tmp_path: Path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    task = 'id: hang\nprompt: "Hang."\ngold:\n  commands: ["make check"]\nreviewed: true\n'
    repo.commit(
        {
            "AGENTS.md": "# Agents\n",
            ".docdelta.yml": sandbox_config(tmp_path / "sync"),
            ".docdelta/tasks/hang.yaml": task,
        }
    )
    repo.commit({"AGENTS.md": "# Agents\nRun `make check`.\n"})
    return repo


def test_sigint_while_the_pool_starts_a_worker_leaves_no_worker_and_no_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    agent = BlockingAgent(tmp_path / "sync")
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        real_start(thread)
        if thread.name.startswith("cell"):  # the pool's worker: it runs, not yet recorded
            agent.wait_running(1)  # and is in its agent when the signal comes
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(threading.Thread, "start", start)
    repo = _hanging_project(tmp_path)
    args = run_args(repo, tmp_path / "work", agent.cmd(), "--repeats", "1", "--timeout", "120")
    try:
        assert main(args) == ExitCode.INTERRUPTED
        workers = [t.name for t in threading.enumerate() if t.name.startswith("cell")]
        assert workers == [], "every worker is joined before docdelta returns"
        assert agent_processes(agent.started) == [], "the agent was killed, not left to its timeout"
        assert list(tmp.iterdir()) == [], f"no {ROOT_PREFIX}* root is left behind"
        assert saved_results(tmp_path / "work") == []
    finally:
        agent.close()
