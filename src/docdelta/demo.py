"""The bundled demo: a tiny project whose AGENTS.md gets better in one commit.

The example is stored as plain files (no nested .git): `examples/demo/repo/` is
the tree at the base commit and `examples/demo/head/` holds the files that change
at the head commit. `build_demo_repo` replays that history into a real git
repository with a fixed author, committer and dates, so its commit ids are the same
on every machine and `docdelta demo` results are comparable across runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from docdelta.errors import ConfigError, InfraError

_AUTHOR = "docdelta demo"
_EMAIL = "demo@docdelta.invalid"
_COMMITS = (
    ("repo", "Add pricebook with thin agent notes", "2024-01-01T12:00:00+00:00"),
    ("head", "Improve AGENTS.md with the project's real rules", "2024-01-02T12:00:00+00:00"),
)


@dataclass(frozen=True)
class DemoRepo:
    path: Path
    base_sha: str
    head_sha: str

    @property
    def tasks_dir(self) -> Path:
        return self.path / ".docdelta" / "tasks"


def examples_dir() -> Path:
    """The demo's files: inside an installed wheel, else at the editable checkout's root."""
    installed = Path(str(files("docdelta").joinpath("_examples", "demo")))
    if installed.is_dir():
        return installed
    checkout = Path(__file__).resolve().parents[2] / "examples" / "demo"
    if checkout.is_dir():
        return checkout
    raise InfraError(
        f"the demo files are missing (looked in {installed} and {checkout})",
        hint="reinstall docdelta; the wheel ships them as docdelta/_examples/demo",
    )


def build_demo_repo(dest: Path) -> DemoRepo:
    """Create the demo's git repository at `dest` (which must be absent or empty)."""
    if dest.exists() and any(dest.iterdir()):
        raise ConfigError(
            f"{dest} is not empty; the demo repository needs a fresh directory",
            hint="pass a new or empty directory, or delete this one",
        )
    source = examples_dir()
    dest.mkdir(parents=True, exist_ok=True)
    _git(dest, "init", "-q", "-b", "main")
    shas = []
    for folder, message, date in _COMMITS:
        shutil.copytree(source / folder, dest, dirs_exist_ok=True)
        _git(dest, "add", "-A")
        _git(dest, "commit", "-q", "-m", message, date=date)
        shas.append(_git(dest, "rev-parse", "HEAD"))
    return DemoRepo(path=dest, base_sha=shas[0], head_sha=shas[1])


def _git(repo: Path, *args: str, date: str = "") -> str:
    """git with no user or system config, so hooks, signing and names cannot vary the shas."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": _AUTHOR,
        "GIT_AUTHOR_EMAIL": _EMAIL,
        "GIT_COMMITTER_NAME": _AUTHOR,
        "GIT_COMMITTER_EMAIL": _EMAIL,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise InfraError(
            f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()}", hint="is git installed?"
        )
    return done.stdout.strip()
