"""Conditions (overlays of instruction files) and the sealed checkout each one runs in.

Every condition uses the same source commit; only the instruction files differ. A
sealed checkout is that commit's files without history or remote, minus every
instruction file and everything docdelta keeps for itself (config, tasks, gold,
hidden tests), plus the condition's overlay, committed as a fresh one-commit
repository with a fixed identity. Nothing in it names the condition: `seal` is
never told the name, and identical overlays give byte-identical commits.

The part every condition shares is sealed once (`seal_source`: the stripped files,
indexed and packed, never committed) and each condition is an overlay on it
(`overlay_checkout`): hard links to the shared files, the shared pack linked in, and
only the condition's own files hashed and committed. So sealing costs one tree per
source commit, not one per condition, and a condition's `.git` holds the shared
objects and its own, never another condition's instruction files.

Files come straight from the object database (`ls-tree` + one `cat-file --batch`)
rather than `git archive | tar -x`: archive honours `export-ignore`/`export-subst`
attributes (the agent would see a different tree than the commit) and would write
files that must then be deleted.

A checkout is sealed once per seal key (source commit, overlay, instruction matcher,
strip list) and a source once per source key (its tree, matcher, strip list):
`seal_once` and `source_once` reuse what a record beside it vouches for, after git
confirms it is unchanged, so a rerun with every result reused seals nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from docdelta.atomic import atomic_write
from docdelta.errors import ConfigError
from docdelta.git import EXECUTABLE_MODE, Repo, apply_patch, commit_overlay, pack_snapshot, run_git
from docdelta.instructions.detect import (
    InstructionMatcher,
    Overlay,
    check_content,
    check_link,
    diff_files,
    instruction_files,
)
from docdelta.instructions.globs import GlobSet
from docdelta.instructions.loading import GitTree, instruction_links
from docdelta.sandbox.base import record_path
from docdelta.vocabulary import BASE, BUILTIN_CONDITIONS, HEAD, NONE, PATCHED, Frozen, sha256_hex

__all__ = [
    "CONDITIONS",
    "Overlay",
    "SealedCheckout",
    "SealedSource",
    "build_overlays",
    "seal",
    "seal_conditions",
    "seal_once",
    "seal_source",
]

CONDITIONS = BUILTIN_CONDITIONS

# Fixed so the same tree always gives the same commit id; neutral so nothing the
# agent can read says which condition it is in.
_IDENT = {"name": "docdelta", "email": "docdelta@localhost", "date": "2000-01-01T00:00:00+0000"}
_MESSAGE = "snapshot"
SEAL_FORMAT = 2
"""Part of every seal key: raise it when `seal` lays out the same inputs differently."""
SOURCE_PREFIX = "source-"
"""A sealed source's directory beside its checkouts; a checkout's name is a hash, never this."""


# ------------------------------------------------------------------ overlays
def _read_overlay(directory: Path, where: str) -> Overlay:
    """The files and links under `directory`, checked like committed instruction files."""
    files: dict[str, bytes] = {}
    links: dict[str, str] = {}
    for root, dirs, names in os.walk(directory):
        for name in [*names, *dirs]:
            full = Path(root, name)
            rel = full.relative_to(directory).as_posix()
            if full.is_symlink():
                links[rel] = check_link(rel, os.readlink(full), where)
            elif full.is_file():
                files[rel] = check_content(rel, full.read_bytes(), where)
    return Overlay(files=files, symlinks=links)


def _write_overlay(overlay: Overlay, directory: Path) -> None:
    for rel, data in overlay.files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_bytes(data)
    for rel, target in overlay.symlinks.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).symlink_to(target)


def _patched(head: Overlay, patch: Path, matcher: InstructionMatcher) -> Overlay:
    """Head's instruction files with the patch file `patch` applied (`apply_to_overlay`)."""
    try:
        raw = patch.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the patch {patch}: {exc.strerror}", hint="check --patch") from exc
    return apply_to_overlay(head, raw, f"the patch {patch}", patch.name, matcher)


def apply_to_overlay(head: Overlay, raw: bytes, what: str, name: str, matcher: InstructionMatcher) -> Overlay:
    """`head` with the unified diff `raw` applied; it may touch only instruction files and
    must change something. `what` names the patch in errors ("the patch P"), `name` briefly."""
    touched = [p for df in diff_files(raw.decode(errors="surrogateescape")) for p in (df.old, df.new) if p]
    if not touched:
        raise ConfigError(f"{what} changes no file", hint="pass a unified diff (`git diff`)")
    for path in touched:
        if not matcher.matches(path):
            raise ConfigError(
                f"{what} touches {path}, which is not an instruction file",
                hint="a patched condition may only change instruction files; split the patch",
            )
    with tempfile.TemporaryDirectory(prefix="docdelta-patch-") as tmp:
        work = Path(tmp, "files")
        work.mkdir()
        _write_overlay(head, work)
        try:
            apply_patch(work, raw)
        except ConfigError as exc:
            raise ConfigError(f"{what}: {exc.message}", hint=exc.hint) from exc
        patched = _read_overlay(work, f"{name} applied to head")
    if patched.sha256 == head.sha256:
        raise ConfigError(
            f"{what} applied, but changed nothing in head's instruction files, so the "
            "patched condition would be a copy of head",
            hint="make the patch with `git diff` against the head ref (paths like a/AGENTS.md b/AGENTS.md)",
        )
    return patched


def build_overlays(
    repo: Repo,
    base_sha: str,
    head_sha: str,
    names: Sequence[str],
    matcher: InstructionMatcher,
    patch: Path | None,
    extra: Mapping[str, Overlay] | None = None,
) -> dict[str, Overlay]:
    """One overlay per requested condition name, in the order given.

    base/head: the instruction files at that commit; none: no instruction file;
    patched: head's files with `patch` applied; `extra`: overlays the caller built (an
    ablation's variants), by name. A condition is just an overlay.
    """
    extra = extra or {}
    unknown = [n for n in names if n not in CONDITIONS and n not in extra]
    if unknown:
        raise ConfigError(
            f"unknown condition(s) {', '.join(unknown)}", hint=f"valid conditions: {', '.join(CONDITIONS)}"
        )
    cache: dict[str, Overlay] = {}

    def head() -> Overlay:
        if HEAD not in cache:
            cache[HEAD] = instruction_files(repo, head_sha, matcher)
        return cache[HEAD]

    def patched() -> Overlay:
        if patch is None:
            raise ConfigError(
                "the patched condition needs a patch", hint="pass --patch FILE (a unified diff)"
            )
        return _patched(head(), patch, matcher)

    builders: dict[str, Callable[[], Overlay]] = {
        BASE: lambda: instruction_files(repo, base_sha, matcher),
        HEAD: head,
        NONE: Overlay,
        PATCHED: patched,
    }
    return {name: extra[name] if name in extra else builders[name]() for name in names}


# ---------------------------------------------------------------------- seal
@dataclass(frozen=True)
class SealedCheckout:
    path: Path
    commit: str
    tree_sha256: str
    """Content hash of every file and link in the checkout (excluding .git)."""
    overlay_sha256: str
    source_sha256: str
    """The same hash before the overlay: equal across conditions of one experiment."""
    shared: Path | None = None
    """The sealed source these files are hard links to (`seal_source`): the same directory
    for every condition, with no instruction file in it. Hidden-test grading shows it as
    the grading tree's base, so code under test cannot tell the conditions apart even by the
    path it is mounted from. None when it is not kept (`seal`, for a single use)."""

    def copy_to(self, dest: Path) -> Path:
        """A per-cell copy (links kept as links, .git included, mtimes kept so git stays clean)."""
        shutil.copytree(self.path, dest, symlinks=True)
        return dest


def _safe_path(path: str, source_sha: str) -> str:
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        raise ConfigError(
            f"refusing to write {path!r} from {source_sha[:12]} into a checkout",
            hint="the commit holds a path git itself would refuse to check out; pick another source",
        )
    return path


def _tree_hash(digests: dict[str, str]) -> str:
    return sha256_hex("".join(f"{p}\0{d}\n" for p, d in sorted(digests.items())).encode())


@dataclass(frozen=True)
class SealedSource:
    """The source commit's files without any instruction file or anything stripped, indexed
    and packed but never committed (`git.pack_snapshot`): what every condition shares."""

    path: Path
    tree: str
    """The git tree id of these files."""
    digests: Mapping[str, str]
    """Path -> `F:`/`X:`/`L:` digest of every file and link, for `SealedCheckout.tree_sha256`."""

    @property
    def sha256(self) -> str:
        return _tree_hash(dict(self.digests))


def seal_source(
    repo: Repo,
    source_sha: str,
    dest: Path,
    matcher: InstructionMatcher,
    strip: Sequence[str],
    env_links: Mapping[str, str] | None = None,
) -> SealedSource:
    """Write `source_sha`'s files at `dest` (new or empty) minus every instruction file, every
    link through which instruction files are seen and everything `strip` names, then index
    and pack them. `env_links` (`envs.links`: the workspace install's node_modules) are added
    where the tree has nothing, and are part of every hash, like the tree's own links."""
    _fresh(dest)
    stripped = GlobSet(strip)
    # A link through which agents see instruction files (`.cursor/rules -> ../docs/rules`) is
    # the condition's, like the files: stripped here, put back by the overlay that holds it.
    links_in = instruction_links(GitTree(repo, source_sha), matcher.families)
    entries = [
        e
        for e in repo.tree(source_sha)
        if e.is_blob
        and not matcher.matches(e.path)
        and e.path not in links_in
        and not stripped.matches(_safe_path(e.path, source_sha))
    ]
    by_oid: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        by_oid.setdefault(e.oid, []).append(i)
    digests: dict[str, str] = {}
    links: dict[str, str] = {}
    made: set[Path] = set()
    # Regular files first and links last, so no write can pass through a link.
    for oid, data in repo.read_blobs(list(by_oid)):
        for i in by_oid[oid]:
            e = entries[i]
            if e.is_symlink:
                links[e.path] = data.decode(errors="surrogateescape")
                continue
            target = dest / e.path
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            target.write_bytes(data)
            if e.mode == EXECUTABLE_MODE:
                target.chmod(0o755)
            digests[e.path] = f"{'X' if e.mode == EXECUTABLE_MODE else 'F'}:{sha256_hex(data)}"
    links.update({p: t for p, t in (env_links or {}).items() if p not in digests and p not in links})
    digests.update({p: f"L:{t}" for p, t in links.items()})
    _make_links(dest, links, source_sha)
    added = sorted(set(links) - {e.path for e in entries})  # the workspace install's links
    return SealedSource(path=dest, tree=pack_snapshot(dest, repo, entries, added), digests=digests)


def overlay_checkout(
    source: SealedSource, overlay: Overlay, dest: Path, strip: Sequence[str], source_sha: str
) -> SealedCheckout:
    """The sealed checkout of `source` with `overlay` at `dest` (new or empty), committed as a
    one-commit repository; its cost does not grow with the tree.

    Files are hard links to `source`'s (nothing writes a sealed checkout in place: runs get
    copy-on-write views or copies) and git objects come from `source`'s pack plus the
    overlay's own (`git.commit_overlay`), so a checkout holds no byte of another condition's
    instruction files. An overlay file is never written through an existing inode or a
    link, which would reach `source` and every other condition."""
    _fresh(dest)
    shutil.copytree(
        source.path,
        dest,
        symlinks=True,
        copy_function=_link_or_copy,
        ignore=lambda where, _names: [".git"] if Path(where) == source.path else [],
        dirs_exist_ok=True,
    )
    stripped = GlobSet(strip)
    files = {p: d for p, d in overlay.files.items() if not stripped.matches(_safe_path(p, source_sha))}
    links = {p: t for p, t in overlay.symlinks.items() if not stripped.matches(_safe_path(p, source_sha))}
    digests = dict(source.digests)
    for path, data in sorted(files.items()):
        _place(dest, path, source_sha).write_bytes(data)
        digests[path] = f"F:{sha256_hex(data)}"
    for path in links:
        _place(dest, path, source_sha)
    _make_links(dest, links, source_sha)
    digests.update({p: f"L:{t}" for p, t in links.items()})
    commit = commit_overlay(dest, source.path, [*files, *links], message=_MESSAGE, **_IDENT)
    return SealedCheckout(
        path=dest,
        commit=commit,
        tree_sha256=_tree_hash(digests),
        overlay_sha256=overlay.sha256,
        source_sha256=source.sha256,
        shared=source.path,
    )


def seal(
    repo: Repo,
    source_sha: str,
    overlay: Overlay,
    dest: Path,
    matcher: InstructionMatcher,
    strip: Sequence[str],
    env_links: Mapping[str, str] | None = None,
) -> SealedCheckout:
    """Build the sealed checkout of `source_sha` with `overlay` at `dest` (new or empty), for a
    single use (`docdelta selftest`); a matrix shares one `seal_source` between its
    conditions through `seal_once`."""
    _fresh(dest)
    with tempfile.TemporaryDirectory(prefix="docdelta-source-", dir=dest.parent) as tmp:
        source = seal_source(repo, source_sha, Path(tmp, "source"), matcher, strip, env_links)
        return replace(overlay_checkout(source, overlay, dest, strip, source_sha), shared=None)


def _fresh(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ConfigError(f"{dest} is not empty", hint="seal into a fresh directory")


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link (no bytes copied), or a copy where links cannot be made (another file system)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _place(dest: Path, path: str, source_sha: str) -> Path:
    """Where an overlay's `path` goes in `dest`: its parents made as plain directories inside
    the checkout, and whatever the source had there removed (never written through)."""
    target = dest / path
    parent = dest
    for part in Path(path).parts[:-1]:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            raise ConfigError(
                f"{path} from {source_sha[:12]} would be written through {parent.relative_to(dest)}, "
                "which is a symlink or a file in the checkout",
                hint="the overlay and the source commit disagree about which paths are directories",
            )
        parent.mkdir(exist_ok=True)
    if target.is_dir() and not target.is_symlink():
        raise ConfigError(
            f"{path} is both a file and a directory in the checkout of {source_sha[:12]}",
            hint="the overlay and the source commit disagree about which paths are directories",
        )
    target.unlink(missing_ok=True)
    return target


def _make_links(dest: Path, links: dict[str, str], source_sha: str) -> None:
    root = dest.resolve()
    for path in sorted(links):
        link = dest / path
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.parent.resolve().is_relative_to(root):
            raise ConfigError(
                f"{path} from {source_sha[:12]} would be created through a symlink outside the checkout",
                hint="the overlay and the source commit disagree about which paths are directories",
            )
        try:
            link.symlink_to(links[path])
        except FileExistsError as exc:
            raise ConfigError(
                f"{path} is both a symlink and a directory in the checkout of {source_sha[:12]}",
                hint="the overlay and the source commit disagree about which paths are directories",
            ) from exc


# ---------------------------------------------------------------- seal once
class SealRecord(Frozen):
    """What `seal` made at a path, written beside it (never inside: the agent would read it)
    once the checkout is complete."""

    key: str
    commit: str
    tree_sha256: str
    overlay_sha256: str
    source_sha256: str


def seal_key(
    source_sha: str,
    overlay: Overlay,
    matcher: InstructionMatcher,
    strip: Sequence[str],
    env_links: Mapping[str, str] | None = None,
) -> str:
    """Everything `seal`'s output depends on."""
    parts = [SEAL_FORMAT, source_sha, overlay.sha256, [list(g) for g in matcher.globs], sorted(strip)]
    if env_links:
        parts.append(sorted(env_links.items()))
    return sha256_hex(json.dumps(parts).encode())


class SourceRecord(Frozen):
    """What `seal_source` made at a path, written beside it once complete."""

    key: str
    tree: str
    digests: dict[str, str]


def source_key(
    repo: Repo,
    source_sha: str,
    matcher: InstructionMatcher,
    strip: Sequence[str],
    env_links: Mapping[str, str] | None = None,
) -> str:
    """Everything `seal_source`'s output depends on: the source's tree, not its commit, so
    two commits with the same files share one."""
    parts = [SEAL_FORMAT, repo.tree_id(source_sha), [list(g) for g in matcher.globs], sorted(strip)]
    parts.append(sorted((env_links or {}).items()))
    return sha256_hex(json.dumps(parts).encode())


def source_once(
    repo: Repo,
    source_sha: str,
    parent: Path,
    matcher: InstructionMatcher,
    strip: Sequence[str],
    env_links: Mapping[str, str] | None = None,
) -> SealedSource:
    """The sealed source under `parent`, named by its key: the one already there when its
    record says so and git finds its files as indexed, else sealed afresh (beside, moved
    into place, then recorded, like `seal_once`). Checking is what keeps an edit made by hand
    through one checkout's hard link from reaching the next checkout made from it."""
    key = source_key(repo, source_sha, matcher, strip, env_links)
    dest = parent / f"{SOURCE_PREFIX}{key[:16]}"
    record = _read_record(record_path(dest), SourceRecord)
    if record is not None and record.key == key and _as_indexed(dest, record.tree):
        return SealedSource(path=dest, tree=record.tree, digests=record.digests)
    source = _built_beside(dest, lambda at: seal_source(repo, source_sha, at, matcher, strip, env_links))
    made = SourceRecord(key=key, tree=source.tree, digests=dict(source.digests))
    atomic_write(record_path(dest), made.model_dump_json().encode())
    return replace(source, path=dest)


def seal_once(
    repo: Repo,
    source_sha: str,
    overlay: Overlay,
    dest: Path,
    matcher: InstructionMatcher,
    strip: Sequence[str],
    env_links: Mapping[str, str] | None = None,
) -> SealedCheckout:
    """The sealed checkout at `dest`: the one already there when its record has this seal
    key and git finds it unchanged (same commit, nothing modified, added or removed), else
    made afresh as an overlay on the source `source_once` seals once for every condition
    beside `dest`. A half-built checkout is never reused: it is built beside `dest`, moved
    into place, and only then recorded."""
    return seal_conditions(repo, source_sha, {dest: overlay}, matcher, strip, env_links)[dest]


def seal_conditions(
    repo: Repo,
    source_sha: str,
    overlays: Mapping[Path, Overlay],
    matcher: InstructionMatcher,
    strip: Sequence[str],
    env_links: Mapping[str, str] | None = None,
) -> dict[Path, SealedCheckout]:
    """`seal_once` for each destination -> overlay of one source commit, back to back: the
    source is sealed, or checked, at most once for all of them."""
    sources: list[SealedSource] = []

    def source(parent: Path) -> SealedSource:
        if not sources or sources[0].path.parent != parent:
            sources[:] = [source_once(repo, source_sha, parent, matcher, strip, env_links)]
        return sources[0]

    return {
        dest: _seal_once(repo, source_sha, overlay, dest, matcher, strip, env_links, source)
        for dest, overlay in overlays.items()
    }


def _seal_once(
    repo: Repo,
    source_sha: str,
    overlay: Overlay,
    dest: Path,
    matcher: InstructionMatcher,
    strip: Sequence[str],
    env_links: Mapping[str, str] | None,
    source_of: Callable[[Path], SealedSource],
) -> SealedCheckout:
    key = seal_key(source_sha, overlay, matcher, strip, env_links)
    record = _read_record(record_path(dest), SealRecord)
    if record is not None and record.key == key and _unchanged(dest, record.commit):
        return SealedCheckout(
            path=dest,
            commit=record.commit,
            tree_sha256=record.tree_sha256,
            overlay_sha256=record.overlay_sha256,
            source_sha256=record.source_sha256,
            shared=source_of(dest.parent).path,
        )
    sealed = _built_beside(
        dest, lambda at: overlay_checkout(source_of(dest.parent), overlay, at, strip, source_sha)
    )
    made = SealRecord(
        key=key,
        commit=sealed.commit,
        tree_sha256=sealed.tree_sha256,
        overlay_sha256=sealed.overlay_sha256,
        source_sha256=sealed.source_sha256,
    )
    atomic_write(record_path(dest), made.model_dump_json().encode())
    return replace(sealed, path=dest)


def _as_indexed(dest: Path, tree: str) -> bool:
    """git's own check on a sealed source: its index is still `tree` and the files on disk
    are exactly the indexed ones (none modified, none added, ignored ones included)."""
    if not (dest / ".git").is_dir():
        return False
    written = run_git(dest, "write-tree")
    if written.returncode != 0 or written.stdout.decode().strip() != tree:
        return False
    # Each checkout made from it links its files, which changes their ctime: refresh first
    # (it rewrites only this index's stat data, which no checkout shares) or every file
    # would look modified.
    refreshed = run_git(dest, "update-index", "-q", "--refresh")
    same = run_git(dest, "diff-files", "--quiet") if refreshed.returncode == 0 else refreshed
    others = run_git(dest, "ls-files", "--others", "-z")
    return same.returncode == 0 and others.returncode == 0 and not others.stdout


_Built = TypeVar("_Built")
_Record = TypeVar("_Record", SealRecord, SourceRecord)


def _built_beside(dest: Path, build: Callable[[Path], _Built]) -> _Built:
    """`build` run on a directory beside `dest`, then moved into place, with `dest`'s record
    dropped first: a half-built directory is never where a later run would reuse it."""
    record_path(dest).unlink(missing_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    for stale in (dest, partial):
        shutil.rmtree(stale, ignore_errors=True)
    built = build(partial)
    partial.rename(dest)
    return built


def _read_record(path: Path, kind: type[_Record]) -> _Record | None:
    """The record at `path`, or None when there is none or it does not read as `kind`."""
    try:
        return kind.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def _unchanged(dest: Path, commit: str) -> bool:
    """git's own stat-based check: HEAD is the sealed commit and the tree matches it."""
    if not (dest / ".git").is_dir():
        return False
    head = run_git(dest, "rev-parse", "HEAD")
    if head.returncode != 0 or head.stdout.decode().strip() != commit:
        return False
    status = run_git(
        dest, "--no-optional-locks", "status", "--porcelain", "--untracked-files=all", "--ignored=matching"
    )
    return status.returncode == 0 and not status.stdout
