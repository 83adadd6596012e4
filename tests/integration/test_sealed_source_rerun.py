"""The sealed source every condition shares is shown to gradings as it is on disk, and a
rerun's check of it (`git update-index --refresh`, which rewrites its index) must never
meet a grading that has it mounted. The workdir lock is what keeps them apart: a rerun while
a grading runs is refused before it looks at the sealed source (every byte, the index's
included, as it was), and a rerun after the gradings (a resume) leaves every file as it was
but the index, whose entries stay the same (only its stat cache may be refreshed), and
grades the same.

The grading is held at an event, not a delay: the hidden test reports on a fifo that it is
running and waits on another until the test releases it (both in a directory the sandbox
shows read-only; a fifo opens for writing there)."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import saved_results
from gitrepo import GitRepo
from samples import CALC_REFERENCE as REFERENCE
from toolchain import sandbox_config

from docdelta.checkout.seal import SOURCE_PREFIX
from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.git import run_git
from docdelta.results.layout import CHECKOUTS

HIDDEN_TEST = """\
import os
from calc.ops import add


def test_add():
    try:
        go = os.open({go!r}, os.O_RDONLY)  # the test holds a writer: no wait here
    except FileNotFoundError:
        go = None  # released: the gradings after the held one run through
    if go is not None:
        started = os.open({started!r}, os.O_WRONLY)
        os.write(started, b"1")
        os.close(started)
        os.read(go, 1)
    assert add(2, 3) == 5
"""

TASK = f"""\
id: fix-add
kind: change
prompt: add() returns wrong results. Fix it.
gold:
  validation:
    hidden: [tests/test_ops.py]
    command: {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider tests/test_ops.py
reviewed: true
"""


AGENT = "import pathlib; pathlib.Path('calc/ops.py').write_text('def add(a, b):\\n    return a + b\\n')"


def _project(tmp_path: Path, sync: Path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    hidden = HIDDEN_TEST.format(go=str(sync / "go"), started=str(sync / "started"))
    repo.commit(
        {
            ".docdelta.yml": sandbox_config(sync),
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "AGENTS.md": "# Agents\nBe careful.\n",
            ".docdelta/tasks/fix-add.yaml": TASK,
            ".docdelta/tasks/fix-add/hidden/tests/test_ops.py": hidden,
            ".docdelta/tasks/fix-add/reference.patch": REFERENCE,
        }
    )
    repo.commit({"AGENTS.md": "# Agents\nArithmetic lives in calc/ops.py.\n"})
    return repo


def _bytes_of(tree: Path) -> dict[str, str]:
    """Every file under `tree` (its .git included) -> the digest of its bytes."""
    return {
        str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


INDEX = ".git/index"


def _index_entries(tree: Path) -> str:
    """What the index says is in `tree` (mode, object, path of each entry), not its stat cache."""
    listed = run_git(tree, "ls-files", "--stage")
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.decode()


def _scores(workdir: Path) -> dict[str, float | None]:
    return {str(r.cell): None if r.score is None else r.score.value for r in saved_results(workdir)}


def test_a_rerun_waits_out_a_grading_and_then_finds_the_sealed_source_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sync = tmp_path / "sync"
    sync.mkdir(mode=0o755)
    for fifo in ("started", "go"):
        os.mkfifo(sync / fifo)
        (sync / fifo).chmod(0o666)  # the grading may run as another user
    started = os.open(sync / "started", os.O_RDWR)  # never EOF, never blocks a writer
    go = os.open(sync / "go", os.O_RDWR)
    repo = _project(tmp_path, sync)
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "command", "--agent-cmd", f"{sys.executable} -c {shlex.quote(AGENT)}", "--repeats", "1",
    ]  # fmt: skip
    first = subprocess.Popen(
        [sys.executable, "-m", "docdelta", *args],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CI": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert os.read(started, 1) == b"1"  # a grading is running on the sealed source
        (source,) = (p for p in (workdir / CHECKOUTS).glob(f"{SOURCE_PREFIX}*") if p.is_dir())
        during = _bytes_of(source)
        assert main(args) == ExitCode.BAD_INPUT
        assert "is in use by another docdelta run" in capsys.readouterr().err
        assert _bytes_of(source) == during  # refused before it refreshed anything
    finally:
        (sync / "go").unlink()  # the gradings after this one run through
        os.write(go, b"1")
        _, err = first.communicate()
        os.close(go)
        os.close(started)
    assert first.returncode == 0, err.decode()[-3000:]
    graded = _scores(workdir)
    assert set(graded.values()) == {1.0}, graded  # the agent fixes it in every arm
    after, entries = _bytes_of(source), _index_entries(source)

    assert main(args) == 0  # the resume: every cell reused, the sealed source checked again
    again = _bytes_of(source)
    # The check refreshes the index's stat cache (the files' ctimes moved as checkouts linked
    # them): the one file it may rewrite, with the same entries; every other byte is as it was.
    assert {p: d for p, d in again.items() if p != INDEX} == {p: d for p, d in after.items() if p != INDEX}
    assert _index_entries(source) == entries
    assert _scores(workdir) == graded
