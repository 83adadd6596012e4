"""Where results outlive a workdir: bytes by name in a directory (for `actions/cache` or an
artifact) or on an orphan git branch (`docdelta-results`, appended to by trusted runs only;
the caller decides which run is trusted, PR runs only read). The base-arm cache and pool
(`docdelta.experiment.reuse`) and the history (`docdelta.scorecard.history`) keep their
files here; what is read back is validated by them."""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from docdelta.atomic import atomic_write
from docdelta.errors import InfraError
from docdelta.git import overlay_commit, run_git

log = logging.getLogger("docdelta.results.backends")


class ArmStore(Protocol):
    """Bytes by name; validation is the caller's (`restore`). The same backends keep files
    by path (`read`, `paths`, `add`) for the history (`docdelta.scorecard.history`)."""

    def read(self, path: str) -> bytes | None: ...
    def paths(self, prefix: str) -> list[str]:
        """Every file under the folder `prefix`, sorted."""
        ...

    def add(self, files: Mapping[str, bytes], message: str) -> None:
        """Add these files (new paths: a writer never rewrites another's file) in one step."""
        ...

    def get(self, digest: str) -> bytes | None: ...
    def put(self, digest: str, data: bytes) -> None: ...
    def recent(self, limit: int) -> list[bytes]:
        """Up to `limit` entries, newest first (the forecast's history)."""
        ...

    def members(self, pool_digest: str) -> list[bytes]:
        """Every member entry of the pool (`member_name`), in no particular order."""
        ...


class DirectoryStore:
    """`<root>/arms/<digest>.json` (and `pools/`, and any path `add` writes), written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, path: str) -> bytes | None:
        """The file at `path` (relative to the root), None when there is none."""
        file = self.root / path
        return file.read_bytes() if file.is_file() else None

    def paths(self, prefix: str) -> list[str]:
        """Every file under the folder `prefix`, as paths relative to the root, sorted."""
        top = self.root / prefix
        return sorted(p.relative_to(self.root).as_posix() for p in top.rglob("*") if p.is_file())

    def add(self, files: Mapping[str, bytes], message: str) -> None:
        """Write each file (path relative to the root), each atomically; `message` is for a
        branch's commit."""
        try:
            for path, data in files.items():
                atomic_write(self.root / path, data)
        except OSError as exc:
            raise InfraError(
                f"cannot write the results store {self.root}: {exc}", hint="check disk space"
            ) from exc

    def get(self, digest: str) -> bytes | None:
        return self.read(entry_path(digest))

    def members(self, pool_digest: str) -> list[bytes]:
        return [p.read_bytes() for p in sorted((self.root / "pools" / pool_digest).glob("*.json"))]

    def recent(self, limit: int) -> list[bytes]:
        entries = sorted((self.root / "arms").glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        return [p.read_bytes() for p in entries[:limit]]

    def put(self, digest: str, data: bytes) -> None:
        self.add({entry_path(digest): data}, f"docdelta: {digest[:12]}")


class BranchStore:
    """`arms/<digest>.json` (and `pools/`) on an orphan branch of `remote`, one commit per entry.

    Reads fetch the branch once into a private ref (`refs/docdelta/<branch>`); a write
    appends a commit and pushes without force, fetching again and retrying when another
    run pushed first, so concurrent writers never lose each other's entries.
    """

    def __init__(
        self,
        repo_root: Path,
        branch: str,
        *,
        remote: str = "origin",
        attempts: int = 3,
        auth: Mapping[str, str] | None = None,
    ) -> None:
        """`auth` is git configuration by environment (`token_auth`) for a checkout whose
        credentials were not persisted: `persist-credentials: false` on a private repository."""
        self.root, self.branch, self.remote, self.attempts = repo_root, branch, remote, attempts
        self.ref = f"refs/docdelta/{branch}"
        self._auth = dict(auth or {})
        self._fetched = False

    def _fetch(self) -> bool:
        """Update the private ref; False when the branch does not exist yet."""
        proc = run_git(
            self.root,
            "fetch", "--quiet", "--no-tags", self.remote, f"+refs/heads/{self.branch}:{self.ref}",
            env=self._auth,
        )  # fmt: skip
        self._fetched = True
        if proc.returncode == 0:
            return True
        err = proc.stderr.decode(errors="replace").strip()
        if "couldn't find remote ref" in err:
            return False
        raise InfraError(
            f"cannot fetch the results branch {self.branch!r} from {self.remote}: {err}",
            hint="check that the workflow's token may read the repository (contents: read)",
        )

    def _tip(self) -> str:
        proc = run_git(self.root, "rev-parse", "--verify", "--quiet", f"{self.ref}^{{commit}}")
        return proc.stdout.decode().strip() if proc.returncode == 0 else ""

    def _ready(self) -> bool:
        """Fetched once; False when the branch does not exist yet."""
        if not self._fetched:
            self._fetch()
        return bool(self._tip())

    def read(self, path: str) -> bytes | None:
        """The file at `path` on the branch as last fetched, None when there is none."""
        if not self._ready():
            return None
        proc = run_git(self.root, "cat-file", "blob", f"{self.ref}:{path}")
        return proc.stdout if proc.returncode == 0 else None

    def paths(self, prefix: str) -> list[str]:
        """Every file under the folder `prefix` on the branch, sorted."""
        if not self._ready():
            return []
        listed = run_git(self.root, "ls-tree", "-r", "--name-only", self.ref, "--", f"{prefix.rstrip('/')}/")
        return sorted(listed.stdout.decode().split())

    def get(self, digest: str) -> bytes | None:
        return self.read(entry_path(digest))

    def members(self, pool_digest: str) -> list[bytes]:
        found = (self.read(n) for n in self.paths(f"pools/{pool_digest}"))
        return [data for data in found if data is not None]

    def recent(self, limit: int) -> list[bytes]:
        """The entries the branch's newest commits added (one entry per commit)."""
        if not self._ready():
            return []
        added = run_git(self.root, "log", f"-{limit}", "--format=", "--name-only", self.ref, "--", "arms/")
        names = [n for n in added.stdout.decode().splitlines() if n.endswith(".json")]
        found = (self.read(n) for n in dict.fromkeys(names))
        return [data for data in found if data is not None]

    def put(self, digest: str, data: bytes) -> None:
        self.add({entry_path(digest): data}, f"docdelta: {digest[:12]}")

    def add(self, files: Mapping[str, bytes], message: str) -> None:
        """One commit adding `files` on the branch's tip, pushed without force; when another
        run pushed first, fetch and lay the same files on the new tip (writers add files of
        their own, so nothing of the other run's is lost)."""
        err = ""
        for _ in range(self.attempts):
            self._fetch()
            commit = overlay_commit(self.root, self._tip(), files, message)
            proc = run_git(
                self.root,
                "push",
                "--quiet",
                self.remote,
                f"{commit}:refs/heads/{self.branch}",
                env=self._auth,
            )
            if proc.returncode == 0:
                return
            err = proc.stderr.decode(errors="replace").strip()
            log.warning("push to %s was rejected (%s); fetching and retrying", self.branch, err)
        raise InfraError(
            f"cannot push to the results branch {self.branch!r}: {err}",
            hint="give the workflow `permissions: contents: write` and run it on trusted events only",
        )


def token_auth(repo_root: Path, server_url: str, token: str) -> dict[str, str]:
    """git configuration, passed by environment (never on a command line other processes can
    read), that sends `token` to `server_url` the way actions/checkout does; empty when the
    checkout already carries such a header (a second one would be a duplicate GitHub rejects)."""
    key = f"http.{server_url.rstrip('/')}/.extraheader"
    if not token or run_git(repo_root, "config", "--get-all", key).stdout.strip():
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": key,
        "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
    }


def open_store(
    kind: str, location: str, repo_root: Path, auth: Mapping[str, str] | None = None
) -> ArmStore | None:
    """The backend a `results-store` setting names (None for `none`); `auth` for a branch."""
    if kind == "directory":
        return DirectoryStore(Path(location) if Path(location).is_absolute() else repo_root / location)
    if kind == "branch":
        return BranchStore(repo_root, location, auth=auth)
    return None


POOL_PREFIX = "pool-"


def entry_path(name: str) -> str:
    """Where a backend keeps an entry: `pools/` for pools (`<pool>/<arm>` names a member,
    `<pool>` alone a pool index of earlier versions), `arms/` for arms."""
    return f"pools/{name}.json" if name.startswith(POOL_PREFIX) else f"arms/{name}.json"


def member_name(pool_digest: str, digest: str) -> str:
    return f"{pool_digest}/{digest}"
