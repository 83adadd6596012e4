"""The local sandbox: the agent runs as a subprocess in Linux namespaces, no Docker.

Why namespaces rather than "just a subprocess": an agent under test must not reach
the network (it could fetch the answer, or leak the checkout), must not outlive its
timeout, and must not read the user's repository or the results workdir (where the
other conditions' instruction files and the gold answers live). `unshare` gives all
three without root: a user namespace maps us to root inside, a network namespace
holds only `lo`, a pid namespace dies with its first process, and a mount namespace
lets us lay an empty tmpfs over the directories to hide. Capabilities are dropped
before the agent starts, so it cannot unmount what hides those directories.

The workspace path is `<root>/slot-<k>/repo` for every condition, so nothing the
agent sees (cwd, paths in tool output) names the condition it runs in.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import IO, Any, ClassVar

from docdelta.errors import ConfigError, SandboxError
from docdelta.sandbox.base import ExecResult, Sandbox, SandboxProvider, SandboxSpec

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_KILL_GRACE_S = 2.0
_CHUNK = 65536


@cache
def _probe(unshare: str, tier: str) -> bool:
    """Can this machine run `tier` isolation? Asked once per process, by doing it."""
    with tempfile.TemporaryDirectory(prefix="docdelta-probe-") as tmp:
        try:
            done = subprocess.run(
                [*_prefix(unshare, tier, [tmp]), "true"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0


def _prefix(unshare: str, tier: str, hide: Sequence[str]) -> list[str]:
    """The argv that wraps an agent command for an isolation tier."""
    if tier == "none":
        return []
    if tier == "netns":
        return [unshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--"]
    mounts = "".join(
        f"mount -t tmpfs -o size=64k,mode=0555 tmpfs {shlex.quote(p)} || exit 125; " for p in hide
    )
    script = f'{mounts}exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- "$@"'
    return [
        unshare,
        "--user",
        "--map-root-user",
        "--net",
        "--mount",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--",
        "sh",
        "-c",
        script,
        "sh",
    ]


class LocalProvider(SandboxProvider):
    """Creates local sandboxes in `<root>/slot-<slot>`.

    Options: `root` (default: a fresh private directory under the system temp dir,
    removed by `close()`, so concurrent docdelta processes never share a slot; every
    condition of one experiment still sees the same workspace path), `slot` (one per
    parallel job), `hide` (host directories the agent must not read, e.g. the
    user's repository and the results workdir), `allow_network` (run without
    isolation where namespaces are unavailable, or when a spec asks for network),
    `unshare` (the binary to use).
    """

    name: ClassVar[str] = "local"

    def __init__(
        self,
        *,
        root: str | os.PathLike[str] | None = None,
        slot: int = 0,
        hide: Sequence[str | os.PathLike[str]] = (),
        allow_network: bool = False,
        unshare: str = "unshare",
    ) -> None:
        self._own_root = root is None
        base = Path(tempfile.mkdtemp(prefix="docdelta-sandbox-")) if root is None else Path(root)
        self.root = base.resolve()
        self.slot = slot
        self.allow_network = allow_network
        self.unshare = shutil.which(unshare) or unshare
        self.hide = [str(Path(p).resolve()) for p in hide if Path(p).is_dir()]
        for hidden in self.hide:
            if self.root.is_relative_to(hidden):
                raise ConfigError(
                    f"sandbox root {self.root} lies inside {hidden}, a directory the agent must not see",
                    hint="choose a sandbox root outside the repository and the results workdir",
                )
        self._live: LocalSandbox | None = None

    def close(self) -> None:
        if self._live is not None:
            self._live.close()
        if self._own_root:
            _remove(self.root)

    def _tier(self, spec: SandboxSpec) -> str:
        if spec.network != "none":
            if not self.allow_network:
                raise SandboxError(
                    f"the local sandbox cannot give an agent network mode {spec.network!r} safely",
                    hint="use --sandbox docker, or pass --allow-network to run it unisolated (recorded)",
                )
            return "none"
        if _probe(self.unshare, "mounts"):
            return "mounts"
        if _probe(self.unshare, "netns"):
            return "netns"
        if self.allow_network:
            return "none"
        raise SandboxError(
            f"cannot isolate the agent: `{self.unshare} --user --map-root-user --net` does not work here",
            hint="enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), "
            "use --sandbox docker, or pass --allow-network to run without isolation (recorded)",
        )

    def create(self, checkout: Path, spec: SandboxSpec) -> Sandbox:
        tier = self._tier(spec)
        if self._live is not None and not self._live.closed:
            raise SandboxError(
                f"slot {self.slot} under {self.root} already holds a live sandbox",
                hint="close the previous sandbox first, or give each parallel job its own slot",
            )
        slot_dir = self.root / f"slot-{self.slot}"
        _remove(slot_dir)  # a crashed run may have left one behind
        try:
            slot_dir.mkdir(parents=True)
            shutil.copytree(checkout, slot_dir / "repo", symlinks=True)
            for sub in ("tools", "home", "tmp"):
                (slot_dir / sub).mkdir()
        except OSError as exc:
            _remove(slot_dir)
            raise SandboxError(
                f"cannot prepare sandbox {slot_dir} from {checkout}: {exc}",
                hint="check that the checkout exists and the temp dir is writable",
            ) from exc
        isolation = {"none": "none", "netns": "netns", "mounts": "netns+mounts" if self.hide else "netns"}
        self._live = LocalSandbox(slot_dir, spec, _prefix(self.unshare, tier, self.hide), isolation[tier])
        return self._live


def _remove(path: Path) -> None:
    """rmtree that also removes read-only trees (e.g. a module cache an agent made)."""

    def retry(func: Callable[..., Any], p: str, _exc: Any) -> None:
        os.chmod(p, 0o700)
        parent = os.path.dirname(p)
        os.chmod(parent, 0o700)
        func(p)

    if path.exists() or path.is_symlink():
        shutil.rmtree(path, onerror=retry)


class LocalSandbox(Sandbox):
    """One live local sandbox; the workspace and tools dir are real host paths."""

    def __init__(self, slot_dir: Path, spec: SandboxSpec, prefix: list[str], isolation: str) -> None:
        self.slot_dir = slot_dir
        self.spec = spec
        self.workspace = str(slot_dir / "repo")
        self.tools_dir = str(slot_dir / "tools")
        self.isolation = isolation
        self._prefix = prefix
        self.closed = False

    def _resolve(self, path: str) -> Path:
        """Host path for an in-sandbox path, refusing anything outside the slot."""
        if self.closed:
            raise SandboxError(f"sandbox {self.slot_dir} is closed", hint="create a new sandbox")
        full = Path(os.path.realpath(Path(self.workspace) / path))
        if not full.is_relative_to(self.slot_dir):
            raise SandboxError(
                f"path {path!r} resolves to {full}, outside the sandbox {self.slot_dir}",
                hint="use a path relative to the workspace or under the sandbox's tools dir",
            )
        return full

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": str(self.slot_dir / "home"),
            "LANG": "C.UTF-8",
            "TMPDIR": str(self.slot_dir / "tmp"),
            "GIT_CEILING_DIRECTORIES": str(self.slot_dir),
        }
        return env | dict(self.spec.env) | dict(extra or {})

    def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = 600.0,
    ) -> ExecResult:
        workdir = self._resolve(cwd or ".")
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [*self._prefix, *argv],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=self._env(env),
                start_new_session=True,
            )
        except OSError as exc:
            raise SandboxError(
                f"cannot start {argv[0]!r} in {workdir}: {exc}",
                hint="check that the command exists on the system PATH",
            ) from exc
        cap = self.spec.max_output_bytes
        out, err = _Capture(proc.stdout, cap), _Capture(proc.stderr, cap)
        if stdin is not None:
            threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
        # A timer kills at the deadline while we block in waitpid: Popen.wait(timeout=)
        # would poll with sleeps and add milliseconds to every short command.
        expired = threading.Event()

        def kill_at_deadline() -> None:
            expired.set()
            _killpg(proc.pid)

        timer = threading.Timer(timeout, kill_at_deadline)
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
            _killpg(proc.pid)  # whatever the command left running in its group dies with it
            proc.wait()
        timed_out = expired.is_set()
        out.join()
        err.join()
        return ExecResult(
            exit_code=None if timed_out else proc.returncode,
            stdout=bytes(out.data),
            stderr=bytes(err.data),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
        )

    def read_file(self, path: str) -> bytes:
        full = self._resolve(path)
        try:
            return full.read_bytes()
        except OSError as exc:
            raise SandboxError(f"cannot read {path!r} in the sandbox: {exc.strerror}", hint="") from exc

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        full = self._resolve(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
        full.chmod(mode)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _remove(self.slot_dir)


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    """Write stdin from a thread, so a command that never reads it cannot block us."""
    assert pipe is not None
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError):
        pass


class _Capture:
    """Drain a pipe to its end, keeping at most `cap` bytes.

    Draining past the cap (rather than stopping) keeps a chatty agent from blocking
    on a full pipe, which would turn an output cap into a spurious timeout.
    """

    def __init__(self, pipe: IO[bytes] | None, cap: int) -> None:
        assert pipe is not None
        self.data = bytearray()
        self.truncated = False
        self._cap = cap
        self._thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self._thread.start()

    def _drain(self, pipe: IO[bytes]) -> None:
        with pipe:
            while chunk := os.read(pipe.fileno(), _CHUNK):
                room = self._cap - len(self.data)
                if len(chunk) > room:
                    self.truncated = True
                self.data += chunk[: max(room, 0)]

    def join(self) -> None:
        # A grandchild that escaped the process group may hold the pipe open; do not wait forever.
        self._thread.join(_KILL_GRACE_S)
