"""A sealed checkout is mounted as the lower layer of every run's view directly, by every
worker, as root too: no per-worker tree is made or removed, the path the agent can read in
/proc/mounts names no condition, and no run's writes reach the sealed checkout, another
condition or a later run."""

from __future__ import annotations

import threading
from pathlib import Path

from gitrepo import GitRepo

from docdelta.checkout.seal import seal_once
from docdelta.git import Repo
from docdelta.instructions.detect import InstructionMatcher, Overlay
from docdelta.results.store import checkout_dir
from docdelta.sandbox import SandboxSpec
from docdelta.sandbox.local import LocalProvider
from docdelta.sandbox.pool import PerThreadProvider


def _sealed(tmp_path: Path) -> tuple[Path, Path, Overlay]:
    g = GitRepo.init(tmp_path / "proj")
    sha = g.commit({"README.md": "hello\n", "AGENTS.md": "base docs\n"})
    repo, work = Repo(g.path), tmp_path / "work"
    none, head = Overlay(), Overlay(files={"AGENTS.md": b"HEAD-ONLY docs\n"})
    paths = []
    for overlay in (none, head):
        dest = checkout_dir(work, overlay.sha256)
        paths.append(seal_once(repo, sha, overlay, dest, InstructionMatcher(), []).path)
    return paths[0], paths[1], none


def test_runs_share_the_sealed_checkout_and_none_of_their_writes_reach_it(
    tmp_path: Path, view_provider: LocalProvider
) -> None:
    none_path, head_path, none = _sealed(tmp_path)
    with view_provider.create(none_path, SandboxSpec()) as sandbox:
        wrote = sandbox.exec(["sh", "-c", "echo agent >> README.md && echo x > new.txt && rm -f .git/index"])
        assert wrote.exit_code == 0, wrote.stderr
        mounts = sandbox.exec(["cat", "/proc/self/mounts"]).stdout.decode()
        assert "overlay /workspace/repo" in mounts
        assert none.sha256[:16] not in mounts, "the path names no condition (`none`'s hash is a constant)"
        assert sandbox.exec(["cat", "AGENTS.md"]).exit_code != 0
    assert not list(view_provider.root.glob("lower-*")), "no per-run or per-worker tree"
    assert (none_path / "README.md").read_text() == "hello\n"
    assert not (none_path / "new.txt").exists() and (none_path / ".git" / "index").is_file()
    assert (head_path / "README.md").read_text() == "hello\n"
    with view_provider.create(none_path, SandboxSpec()) as again:
        assert again.exec(["cat", "README.md"]).stdout == b"hello\n", "a later run starts clean"
        assert again.exec(["test", "-e", "new.txt"]).exit_code != 0


def test_every_worker_mounts_the_same_checkout_and_leaves_nothing_to_remove(tmp_path: Path) -> None:
    none_path, _head, _none = _sealed(tmp_path)
    pool = PerThreadProvider(lambda slot: LocalProvider(root=tmp_path / f"sb{slot}", slot=slot))
    try:
        seen: list[bytes] = []

        def run() -> None:
            with pool.create(none_path, SandboxSpec()) as sandbox:
                seen.append(sandbox.exec(["sh", "-c", "echo $$ >> README.md; wc -l < README.md"]).stdout)

        workers = [threading.Thread(target=run) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        pool.close()
    assert seen == [b"2\n"] * 3, "each run sees the sealed file plus its own line only"
    assert not [p for slot in range(3) for p in (tmp_path / f"sb{slot}").glob("lower-*")]
    assert (none_path / "README.md").read_text() == "hello\n"
