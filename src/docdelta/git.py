"""The only module that runs git.

Every call goes through `_run`, which builds the environment from scratch: no
system or global config, no inherited GIT_DIR/GIT_WORK_TREE, C locale, no pager,
no prompts. So a user's `diff.external`, colour settings, aliases or a CI
runner's leftover variables can neither change what we parse nor what a sealed
checkout contains. Failures become `ConfigError` (the user's input is at fault)
or `InfraError` (git itself failed), never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from docdelta.errors import ConfigError, InfraError

SYMLINK_MODE = "120000"
EXECUTABLE_MODE = "100755"
GITLINK_MODE = "160000"

_BASE_ENV = {
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_ADVICE": "0",
}
# Repository-local config of the repo under test could still steer output; these
# command-line settings win over it. safe.directory lets the Action read a
# checkout owned by another uid (it is the runner's own checkout, not PR content).
_OVERRIDES = (
    "-c", "safe.directory=*",
    "-c", "core.quotePath=false",
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
)  # fmt: skip


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The controlled environment every git call runs with (exported for tests)."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.devnull, **_BASE_ENV}
    env.update(extra or {})
    return env


def _run(
    args: Sequence[str],
    cwd: Path,
    *,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run git; the caller decides what a non-zero exit means."""
    try:
        return subprocess.run(
            ["git", *_OVERRIDES, *args],
            cwd=cwd,
            input=input,
            capture_output=True,
            env=git_env(env),
            check=False,
        )
    except FileNotFoundError as exc:
        raise InfraError("git is not installed or not on PATH", hint="install git >= 2.30") from exc


def run_git(
    root: Path, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """git in `root` with the controlled environment; the caller decides what a non-zero
    exit means (the results cache's branch store, tests)."""
    return _run(args, root, input=input, env=env)


def _output(root: Path, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None) -> str:
    proc = _run(args, root, input=input, env=env)
    if proc.returncode != 0:
        raise _failed(proc, f"{args[0]} in {root}")
    return proc.stdout.decode().strip()


_BOT = {
    "GIT_AUTHOR_NAME": "docdelta",
    "GIT_AUTHOR_EMAIL": "docdelta@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "docdelta",
    "GIT_COMMITTER_EMAIL": "docdelta@users.noreply.github.com",
}


def overlay_commit(
    root: Path, parent: str, changes: Mapping[str, bytes | None], message: str, *, reproducible: bool = False
) -> str:
    """A commit on top of `parent` whose tree is parent's with `changes` applied
    (path -> new bytes, or None to delete), made with plumbing only: no work tree, no
    checkout, no hooks, no ref moved. The bytes are stored as data, never executed —
    which is how a fork's instruction files are laid on the trusted base commit.

    `reproducible`: dated as `parent`, so the same changes on the same parent are the same
    commit (a rerun of `docdelta run --repos` finds the plan it resumes)."""
    with tempfile.TemporaryDirectory(prefix="docdelta-index-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        if parent:
            _output(root, "read-tree", parent, env=index)
        for path, data in sorted(changes.items()):
            if data is None:
                _output(root, "update-index", "--force-remove", "--", path, env=index)
                continue
            blob = _output(root, "hash-object", "-w", "--stdin", input=data)
            _output(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=index)
        tree = _output(root, "write-tree", env=index)
    parents = ["-p", parent] if parent else []
    env = dict(_BOT)
    if reproducible and parent:
        date = _output(root, "show", "-s", "--format=%cI", parent)
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return _output(root, "commit-tree", tree, *parents, "-m", message, env=env)


def _failed(proc: subprocess.CompletedProcess[bytes], what: str) -> InfraError:
    err = proc.stderr.decode(errors="replace").strip()
    return InfraError(f"git failed to {what}: {err}", hint="check the repository with `git fsck`")


@dataclass(frozen=True)
class TreeEntry:
    """One entry of `git ls-tree -r -l`: a blob (file or symlink) or a gitlink."""

    path: str
    mode: str
    oid: str
    size: int | None
    """None for gitlinks (submodules), which have no blob."""

    @property
    def is_symlink(self) -> bool:
        return self.mode == SYMLINK_MODE

    @property
    def is_blob(self) -> bool:
        return self.mode != GITLINK_MODE


@dataclass(frozen=True)
class Change:
    """One file of `git diff --raw`: its status letter (A, D, M, R, C, T), modes and paths
    (the same path twice unless it was renamed or copied)."""

    status: str
    old_mode: str
    new_mode: str
    old_path: str
    new_path: str


class Repo:
    """A local git repository, read-only except through `commit_snapshot`."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        if not path.is_dir():
            raise ConfigError(f"{path} is not a git repository (no such directory)", hint=_REPO_HINT)
        proc = _run(["rev-parse", "--show-toplevel"], path)
        if proc.returncode != 0:
            raise ConfigError(f"{path} is not a git repository", hint=_REPO_HINT)
        self.root = Path(proc.stdout.decode().strip())

    @property
    def name(self) -> str:
        """Directory name of the work tree: the `<repo>` part of result paths."""
        return self.root.name

    def _git(self, *args: str, input: bytes | None = None, what: str) -> bytes:
        proc = _run(args, self.root, input=input)
        if proc.returncode != 0:
            raise _failed(proc, what)
        return proc.stdout

    def resolve(self, ref: str) -> str:
        """Full sha of the commit `ref` names (branch, tag, sha, `HEAD~1`, ...)."""
        proc = _run(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], self.root)
        if proc.returncode != 0 or not ref:
            raise ConfigError(
                f"unknown ref {ref!r} in {self.root}",
                hint="fetch it first (in Actions: actions/checkout with fetch-depth: 0) "
                "or pass a branch, tag or commit sha that exists locally",
            )
        return proc.stdout.decode().strip()

    def tree_id(self, sha: str) -> str:
        """The id of commit `sha`'s root tree: equal for two commits with the same files."""
        return (
            self._git("rev-parse", "--verify", f"{sha}^{{tree}}", what=f"read the tree of {sha}")
            .decode()
            .strip()
        )

    def tree(self, sha: str, paths: Sequence[str] = ()) -> list[TreeEntry]:
        """Every blob and gitlink at commit `sha`, recursively (optionally under `paths`)."""
        out = self._git("ls-tree", "-r", "-l", "-z", "--full-tree", sha, "--", *paths, what=f"list {sha}")
        entries = []
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, _kind, oid, size = meta.decode().split()
            if size == _MISSING_SIZE:
                raise missing_object(oid, f"{path.decode(errors='replace')} at {sha[:12]}", self.root)
            entries.append(TreeEntry(path.decode(), mode, oid, None if size == "-" else int(size)))
        return entries

    def file_at(self, sha: str, path: str) -> bytes | None:
        """The content of `path` at commit `sha`; None when the commit has no file there."""
        entry = next((e for e in self.tree(sha, [path]) if e.path == path), None)
        return None if entry is None else self.read_blob(entry.oid)

    def read_blob(self, oid: str) -> bytes:
        return self._git("cat-file", "blob", oid, what=f"read object {oid}")

    def read_blobs(self, oids: Sequence[str]) -> Iterator[tuple[str, bytes]]:
        """Stream many blobs through one `git cat-file --batch`, in the given order.

        One process for a whole tree is what keeps a sealed checkout near the cost
        of `git archive | tar -x`; the request list is fed from a thread so a large
        tree cannot deadlock on full pipes.
        """
        proc = subprocess.Popen(
            ["git", *_OVERRIDES, "cat-file", "--batch"],
            cwd=self.root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=git_env(),
        )
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def feed() -> None:
            # git exits early (and the pipe breaks) when the reader stops; not an error here.
            with contextlib.suppress(BrokenPipeError), stdin:
                stdin.write(b"".join(f"{oid}\n".encode() for oid in oids))

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            for oid in oids:
                header = stdout.readline().split()
                if header[1:] == [b"missing"]:
                    raise missing_object(oid, "an instruction or source file", self.root)
                if len(header) != 3:
                    raise InfraError(f"git could not read object {oid}", hint="run `git fsck`")
                data = stdout.read(int(header[2]))
                stdout.read(1)  # the newline after each object
                yield oid, data
        finally:
            stdout.close()
            proc.wait()
            feeder.join()

    def changes(self, base: str, head: str) -> list[Change]:
        """The files that differ between two commits, with rename detection as `diff` has it:
        `git diff --raw`, which names each file and its modes without computing one hunk
        (a real range's full diff is megabytes that detection would only skim for names)."""
        out = self._git(
            "diff", "--raw", "-z", "--no-abbrev", "--no-ext-diff", "--no-textconv", "-M", base, head, "--",
            what=f"diff {base}..{head}",
        )  # fmt: skip
        fields = [f.decode(errors="surrogateescape") for f in out.split(b"\0")]
        changes, i = [], 0
        while i < len(fields) and fields[i].startswith(":"):
            old_mode, new_mode, _old, _new, status = fields[i][1:].split()
            paths = 2 if status[0] in "RC" else 1
            old_path, new_path = fields[i + 1], fields[i + paths]
            changes.append(Change(status[0], old_mode, new_mode, old_path, new_path))
            i += 1 + paths
        return changes

    def diff(self, base: str, head: str) -> str:
        """Unified diff base..head with rename detection; binary files marked, not inlined."""
        out = self._git(
            "diff", "--no-ext-diff", "--no-color", "--no-textconv", "-M",
            "--src-prefix=a/", "--dst-prefix=b/", base, head, "--",
            what=f"diff {base}..{head}",
        )  # fmt: skip
        return out.decode(errors="surrogateescape")

    def last_change(self, ref: str, paths: Sequence[str]) -> str | None:
        """The newest commit at or before `ref` that changed one of `paths` and has a parent
        (a pair to evaluate), or None."""
        out = self._git("log", "-1", "--format=%H", "--min-parents=1", ref, "--", *paths, what=f"log {ref}")
        return out.decode().strip() or None


_REPO_HINT = "pass --repo with the path of a git work tree (the directory that holds .git)"
_MISSING_SIZE = "BAD"
"""What `git ls-tree -l` prints as the size of a blob the repository does not have."""


def missing_object(oid: str, what: str, root: Path) -> ConfigError:
    """A blob the commit names is not in the repository: a partial (`--filter=blob:none`)
    or shallow clone, or a damaged one. Input to fix, not our failure: say which object
    and how to get it."""
    return ConfigError(
        f"the repository {root} does not have git object {oid} ({what}): it is a partial or "
        "shallow clone, or damaged",
        hint="fetch the full objects: `git fetch --refetch` (a partial clone) or `git fetch --unshallow`, "
        "or clone again without --filter/--depth; in GitHub Actions: actions/checkout with fetch-depth: 0 "
        "and no filter; `git fsck` lists what else is missing",
    )


SNAPSHOT_BRANCH = "main"


def _identity(name: str, email: str, date: str) -> dict[str, str]:
    """Author and committer fixed by the caller, so the same tree always gives the same commit id."""
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_COMMITTER_DATE": date,
    }


def commit_snapshot(path: Path, *, message: str, name: str, email: str, date: str) -> str:
    """Commit everything in `path`, making it a repository first if it is not one; return the id.

    Author, committer, date and message are fixed by the caller and the repository
    gets no template (no sample hooks, no description), so the same files always
    give the same commit id. Ignored files are added too: the snapshot must hold
    exactly what is on disk. The demo calls it once per commit of its history.
    """
    ident = _identity(name, email, date)
    fresh = ["init", "-q", "--template=", f"--initial-branch={SNAPSHOT_BRANCH}", "."]
    init = [] if (path / ".git").exists() else [fresh]
    steps = (
        *init,
        ["add", "--all", "--force", "."],
        ["commit", "-q", "--allow-empty", "--no-verify", "--no-gpg-sign", "-m", message],
        ["rev-parse", "HEAD"],
    )
    proc = None
    for step in steps:
        proc = _run(step, path, env=ident)
        if proc.returncode != 0:
            raise _failed(proc, f"{step[0]} the sealed checkout at {path}")
    assert proc is not None
    return proc.stdout.decode().strip()


def _step(
    path: Path, args: Sequence[str], *, input: bytes | None = None, env: Mapping[str, str] | None = None
) -> str:
    proc = _run(args, path, input=input, env=env)
    if proc.returncode != 0:
        raise _failed(proc, f"{args[0]} the sealed checkout at {path}")
    return proc.stdout.decode().strip()


def _init(path: Path) -> None:
    """A fresh repository without a template (no sample hooks, no description), so the same
    files always give the same repository."""
    _step(path, ["init", "-q", "--template=", f"--initial-branch={SNAPSHOT_BRANCH}", "."])


def pack_snapshot(path: Path, repo: Repo, entries: Sequence[TreeEntry], added: Sequence[str]) -> str:
    """Make `path` a repository whose index and one pack hold exactly `entries` (blobs of
    `repo`, already written at `path`) and `added` (files or links on disk at `path` that
    `repo` does not hold), with no commit and no ref; return the tree id.

    This is the part of a sealed checkout every condition shares: `commit_overlay` adds a
    condition's few files to a copy of the index and commits. The index is written from
    the ids `repo` already knows and the pack copied out of `repo`'s own (its deltas
    reused), reading `repo` as an alternate through the environment only, so nothing in
    `path` points back at it and nothing is written into it: no file is hashed again and
    no object is compressed twice. One pack instead of a directory per object prefix keeps
    each per-cell copy cheap (see bench/bench_cell.py); with no commit it holds nothing but
    this tree's objects.
    """
    _init(path)
    objects = Path(_output(repo.root, "rev-parse", "--path-format=absolute", "--git-common-dir"), "objects")
    env = {"GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects)}
    listed = "".join(f"{e.mode} {e.oid}\t{e.path}\0" for e in entries).encode()
    _step(path, ["update-index", "-z", "--index-info"], input=listed, env=env)
    if added:
        paths = "".join(f"{p}\0" for p in added).encode()
        _step(path, ["update-index", "--add", "-z", "--stdin"], input=paths, env=env)
    tree = _step(path, ["write-tree"], env=env)
    reachable = _step(path, ["rev-list", "--objects", "--no-object-names", tree], env=env)
    pack = str(Path(".git", "objects", "pack", "pack"))
    _step(path, ["pack-objects", "-q", pack], input=f"{reachable}\n".encode(), env=env)
    _step(path, ["prune-packed", "-q"])
    return tree


def commit_overlay(
    path: Path, shared: Path, paths: Sequence[str], *, message: str, name: str, email: str, date: str
) -> str:
    """Commit at `path` the files `pack_snapshot` indexed at `shared` plus `paths` (files or
    links already on disk at `path`, added or replacing), as the one commit of a fresh
    repository; return its id.

    `shared`'s pack is hard-linked, not copied (git never rewrites a pack in place) and its
    index copied, so only `paths` are hashed: the cost does not grow with the tree. The new
    objects stay loose in `path`'s own object store, which therefore holds `shared`'s
    objects and its own, never another overlay's.
    """
    _init(path)
    packs = shared / ".git" / "objects" / "pack"
    for part in sorted(packs.iterdir()):
        os.link(part, path / ".git" / "objects" / "pack" / part.name)
    shutil.copyfile(shared / ".git" / "index", path / ".git" / "index")
    if paths:
        listed = b"".join(f"{p}\0".encode() for p in sorted(paths))
        _step(path, ["update-index", "--add", "--remove", "-z", "--stdin"], input=listed)
    tree = _step(path, ["write-tree"])
    ident = _identity(name, email, date)
    commit = _step(path, ["commit-tree", tree, "-m", message], env=ident)
    _step(path, ["update-ref", f"refs/heads/{SNAPSHOT_BRANCH}", commit])
    return commit


def apply_patch(directory: Path, patch: bytes) -> None:
    """Apply a unified diff to the plain files in `directory` (which is not a repository).

    git apply is strict about context, refuses paths that escape the directory or
    pass through a symlink, and understands renames and mode changes: everything a
    hand-written patcher would get wrong. GIT_CEILING_DIRECTORIES keeps it from
    discovering an enclosing repository and applying paths relative to that.
    """
    proc = _run(
        ["apply", "--whitespace=nowarn", "-"],
        directory,
        input=patch,
        env={"GIT_CEILING_DIRECTORIES": str(directory.parent)},
    )
    if proc.returncode != 0:
        raise ConfigError(
            f"the patch does not apply: {proc.stderr.decode(errors='replace').strip()}",
            hint="make the patch against the head ref's instruction files "
            "(e.g. with `git diff` in a checkout of head)",
        )
