"""Build real git repositories in temporary directories for tests.

    repo = GitRepo.init(tmp_path / "proj")
    base = repo.commit({"README.md": "hi", "AGENTS.md": "use make test"})
    head = repo.commit({"AGENTS.md": "use tox", "CLAUDE.md": Link("AGENTS.md"), "old.txt": None})

Each `commit` applies changes on top of the previous commit: str/bytes content
writes a file, `Link(target)` a symlink, `None` deletes the path; `executable=`
names files to mark +x. Git runs with no user/global config and a fixed identity
and date, so commit ids are reproducible.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from docdelta.demo import DemoRepo, examples_dir

ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "HOME": os.devnull,
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}


@dataclass(frozen=True)
class Link:
    """A symlink to `target` (stored as-is, relative or absolute)."""

    target: str


Content = str | bytes | Link | None


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` with the test environment; return stdout (raises on failure)."""
    proc = subprocess.run(["git", *args], cwd=cwd, env=ENV, capture_output=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode(errors="replace")


@dataclass(frozen=True)
class GitRepo:
    path: Path

    @classmethod
    def init(cls, path: Path) -> GitRepo:
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "--initial-branch=main")
        return cls(path)

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def write(self, files: Mapping[str, Content], executable: Iterable[str] = ()) -> None:
        """Change the work tree only (no commit)."""
        for rel, content in files.items():
            target = self.path / rel
            if target.is_symlink() or target.is_file():
                target.unlink()
            if content is None:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Link):
                target.symlink_to(content.target)
            else:
                target.write_bytes(content.encode() if isinstance(content, str) else content)
        for rel in executable:
            (self.path / rel).chmod(0o755)

    def commit(
        self, files: Mapping[str, Content], message: str = "change", executable: Iterable[str] = ()
    ) -> str:
        """Apply `files` on top of the current tree, commit everything, return the sha."""
        self.write(files, executable)
        self.git("add", "--all", "--force")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").strip()


def demo_repo(dest: Path, extra: Mapping[str, Content]) -> DemoRepo:
    """The bundled demo's two commits with `extra` files in both (e.g. a `.docdelta.yml`
    naming this machine's sandbox image), so the PR still changes only AGENTS.md."""
    source = examples_dir()

    def tree(folder: str) -> dict[str, Content]:
        root = source / folder
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    repo = GitRepo.init(dest)
    base = repo.commit({**tree("repo"), **extra}, message="demo base")
    head = repo.commit(tree("head"), message="demo head")
    return DemoRepo(path=dest, base_sha=base, head_sha=head)
