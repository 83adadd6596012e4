"""The bundled demo: a tiny project whose AGENTS.md gets better in one commit.

The example is stored as plain files (no nested .git): `examples/demo/repo/` is
the tree at the base commit and `examples/demo/head/` holds the files that change
at the head commit. `build_demo_repo` replays that history into a real git
repository with a fixed author, committer and dates, so its commit ids are the same
on every machine and `docdelta demo` results are comparable across runs. A build records
what it was made from and its commit ids (`DemoStamp`), so a rerun in the same workdir
checks the repository instead of replaying the history again.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from pydantic import ValidationError

from docdelta.atomic import atomic_write
from docdelta.errors import ConfigError, DocdeltaError, InfraError
from docdelta.git import Repo, commit_snapshot
from docdelta.vocabulary import Frozen, sha256_hex

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


STAMP = "docdelta-demo.json"
"""In the built repository's `.git` (which git leaves alone): its `DemoStamp`."""


class DemoStamp(Frozen):
    """What a demo repository was built from (`_source_digest`) and the commit ids it got."""

    source: str
    shas: tuple[str, ...]


def _source_digest(source: Path) -> str:
    """Everything the demo's commit ids follow from: the files of each commit (their
    executable bit included), the messages, dates and the author."""
    parts: list[object] = [_AUTHOR, _EMAIL, _COMMITS]
    for folder, _, _ in _COMMITS:
        for path in sorted(p for p in (source / folder).rglob("*") if p.is_file()):
            rel = path.relative_to(source).as_posix()
            parts.append([rel, bool(path.stat().st_mode & 0o111), sha256_hex(path.read_bytes())])
    return sha256_hex(json.dumps(parts).encode())


def _stamped(dest: Path, digest: str) -> tuple[str, ...] | None:
    """The commit ids the stamp at `dest` records for a build of `digest`, when it does."""
    try:
        stamp = DemoStamp.model_validate_json((dest / ".git" / STAMP).read_bytes())
    except (OSError, ValidationError):
        return None
    return stamp.shas if stamp.source == digest and len(stamp.shas) == len(_COMMITS) else None


def build_demo_repo(dest: Path) -> DemoRepo:
    """Create the demo's git repository at `dest`, or reuse an identical earlier build.

    The history is replayed in a scratch directory first; because its commit ids are
    reproducible, an existing `dest` whose HEAD is the same commit is the same demo and
    is reused (so `docdelta demo` can be rerun and resumes). Anything else is refused.
    A stamp of what the build was made from spares a rerun the replay: when it matches
    the files at hand, `dest`'s HEAD is checked against the commit it records.
    """
    source = examples_dir()
    digest = _source_digest(source)
    known = _stamped(dest, digest)
    if known is not None and _head(dest) == known[-1]:
        return DemoRepo(path=dest, base_sha=known[0], head_sha=known[1])
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
    atomic_write(dest / ".git" / STAMP, DemoStamp(source=digest, shas=tuple(shas)).model_dump_json().encode())
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
