"""The bundled demo: a tiny project whose AGENTS.md gets better in one commit.

The example is stored as plain files (no nested .git): `examples/demo/repo/` is
the tree at the base commit and `examples/demo/head/` holds the files that change
at the head commit. `build_demo_repo` replays that history into a real git
repository with a fixed author, committer and dates, so its commit ids are the same
on every machine and `docdelta demo` results are comparable across runs.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from docdelta.errors import ConfigError, DocdeltaError, InfraError
from docdelta.git import Repo, commit_snapshot

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


def examples_dir(part: str = "demo") -> Path:
    """`examples/<part>` (the demo's files, the example workflows): inside an installed wheel,
    else at the editable checkout's root."""
    installed = Path(str(files("docdelta").joinpath("_examples", part)))
    if installed.is_dir():
        return installed
    checkout = Path(__file__).resolve().parents[2] / "examples" / part
    if checkout.is_dir():
        return checkout
    raise InfraError(
        f"the {part} files are missing (looked in {installed} and {checkout})",
        hint=f"reinstall docdelta; the wheel ships them as docdelta/_examples/{part}",
    )


def build_demo_repo(dest: Path) -> DemoRepo:
    """Create the demo's git repository at `dest`, or reuse an identical earlier build.

    The history is replayed in a scratch directory first; because its commit ids are
    reproducible, an existing `dest` whose HEAD is the same commit is the same demo and
    is reused (so `docdelta demo` can be rerun and resumes). Anything else is refused.
    """
    source = examples_dir()
    with tempfile.TemporaryDirectory(prefix=".demo-", dir=_existing_parent(dest)) as scratch:
        built = Path(scratch) / "repo"
        built.mkdir()
        shas = []
        for folder, message, date in _COMMITS:
            shutil.copytree(source / folder, built, dirs_exist_ok=True)
            shas.append(commit_snapshot(built, message=message, name=_AUTHOR, email=_EMAIL, date=date))
        if dest.exists() and any(dest.iterdir()):
            if _head(dest) != shas[-1]:
                raise ConfigError(
                    f"{dest} is not empty and is not this docdelta demo repository",
                    hint="pass a new or empty --workdir, or delete this directory",
                )
        else:
            if dest.exists():
                dest.rmdir()
            built.rename(dest)
    return DemoRepo(path=dest, base_sha=shas[0], head_sha=shas[1])


def _existing_parent(dest: Path) -> Path:
    """The scratch build sits beside `dest` so the final rename stays on one filesystem."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    return dest.parent


def _head(path: Path) -> str | None:
    try:
        return Repo(path).resolve("HEAD")
    except DocdeltaError:
        return None
