"""`docdelta run` as the CLI tests drive it: the argument list and the results it saved."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from gitrepo import GitRepo

from docdelta.results.models import RunResult


def pr_args(repo: GitRepo, tasks: Path, workdir: Path, *extra: str) -> list[str]:
    """`docdelta run` on `repo`'s last commit (head) against its parent (base), with the
    task suite at `tasks`."""
    return [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(tasks), "--workdir", str(workdir), *extra,
    ]  # fmt: skip


def run_args(repo: GitRepo, workdir: Path, agent_cmd: str, *extra: str) -> list[str]:
    """`docdelta run` of a command agent on `repo`'s last commit against its parent."""
    tasks = repo.path / ".docdelta/tasks"
    return pr_args(repo, tasks, workdir, "--agent", "command", "--agent-cmd", agent_cmd, *extra)


def saved_results(workdir: Path) -> list[RunResult]:
    """Every complete result under `workdir`, in path order."""
    return [
        RunResult.model_validate_json(p.read_text())
        for p in sorted(workdir.glob("runs/*/*/*/r*/result.json"))
    ]


BLOCKING_AGENT = """\
import json, os, sys
prompt = sys.stdin.read()
if "Hang" in prompt:
    never = os.open(sys.argv[2], os.O_RDWR)  # opened first: held, it outlives its mount
    started = os.open(sys.argv[1], os.O_WRONLY)
    os.write(started, b"1")
    os.close(started)
    os.read(never, 1)  # blocks: nothing is ever written to it
print(json.dumps({"answer": "run make check", "commands": ["make check"]}))
"""


class BlockingAgent:
    """A command agent that answers at once, except for prompts with "Hang": then it tells
    the test it is running (a byte on the `started` fifo) and blocks reading a fifo nobody
    ever writes, until its sandbox kills it (it holds that fifo open from before it
    reports, so removing the sandbox's files around it cannot end the block). The fifos
    live in `sync`, a directory the sandbox shows read-only (a fifo opens for writing on a
    read-only mount: nothing is written to the filesystem). The test holds `started` open,
    so an agent never waits to report."""

    def __init__(self, sync: Path) -> None:
        sync.mkdir(mode=0o755)
        self.started, self.never = sync / "started", sync / "never"
        for fifo in (self.started, self.never):
            os.mkfifo(fifo)
            fifo.chmod(0o666)  # the agent may run as another user (nobody, as root)
        self._reader = os.open(self.started, os.O_RDWR)  # never EOF, never blocks a writer

    def cmd(self, python: str = sys.executable) -> str:
        return shlex.join([python, "-c", BLOCKING_AGENT, str(self.started), str(self.never)])

    def wait_running(self, n: int) -> None:
        """Block until `n` more agents have reported that they are running."""
        seen = 0
        while seen < n:
            seen += len(os.read(self._reader, n - seen))

    def close(self) -> None:
        os.close(self._reader)


def agent_processes(marker: Path) -> list[str]:
    """Command lines of live processes that name `marker` (a blocking agent's fifo)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if str(marker).encode() in args:
            found.append(b" ".join(args).decode(errors="replace"))
    return found
