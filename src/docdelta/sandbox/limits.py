"""Resource bounds of one local sandbox: its processes, memory, file sizes and disk.

A pull request's instruction file can make the agent fork-bomb, allocate or write until
the machine gives out, so each local run gets the bounds Docker gives a container
(`SandboxSpec.memory_mb`, `pids`, `workspace_mb`), by the strongest means this machine
offers, and every hit becomes the exec's outcome (`ExecResult.oom`, `pids_limit`,
`disk_full`), never a pass:

- **cgroups** (v2 where docdelta's own cgroup delegates `memory` and `pids`, else v1
  where the `memory` and `pids` hierarchies are writable, as for root in CI): one group
  per sandbox holding every process of every exec, with `memory_mb` (no swap) and `pids`
  as hard limits; the kernel's own counters (`oom_kill`, `pids.events max`) tell a hit
  from any other failure, whatever the agent prints.
- **rlimits** always, set by `prlimit` on the exec's bwrap: no file larger than the
  workspace quota, no core dumps; where no cgroup bounds them, also a per-process data
  size of `memory_mb` and a count of `pids` processes for the uid the agent runs as.
- **a size-capped tmpfs** (as root, where mounts are allowed) under the whole sandbox
  directory (checkout view, tools, `$HOME`, `/tmp`): writes past `workspace_mb` fail
  with ENOSPC, and what is written counts against the memory limit, as under Docker.
  Elsewhere the file-size rlimit bounds one file, and a failed exec whose sandbox holds
  `workspace_mb` or more is recorded as `disk_full`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from docdelta.sandbox.base import DISK_FULL_MARGIN, SandboxSpec

CGROUP_ROOT = Path("/sys/fs/cgroup")
MIB = 1024 * 1024
ENTER = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
"""Moves the shell into each cgroup named (their `cgroup.procs`), then becomes the exec:
every process it starts is born inside, so none escapes the limit before it applies."""


def _own_path(controller: str) -> str:
    """docdelta's cgroup path in a hierarchy (v1 controller name, or "" for v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller == "" and names == "") or controller in names.split(","):
            return path.lstrip("/")
    return ""


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def _parents() -> dict[str, Path]:
    """Where this process may create groups: {"v2": dir} or {"memory": dir, "pids": dir}."""
    with contextlib.suppress(OSError):
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            own = CGROUP_ROOT / _own_path("")
            delegated = (own / "cgroup.subtree_control").read_text().split()
            if {"memory", "pids"} <= set(delegated) and _writable_dir(own):
                return {"v2": own}
            return {}
        found = {}
        for controller in ("memory", "pids"):
            base = CGROUP_ROOT / controller
            own = base / _own_path(controller)
            parent = own if own.is_dir() else base
            if not _writable_dir(parent):
                return {}
            found[controller] = parent
        return found
    return {}


def unmount_under(path: Path) -> None:
    """Lazily unmount every mount at or under `path`: a sandbox tmpfs that a killed
    docdelta left mounted would otherwise keep its directory from being removed."""
    with contextlib.suppress(OSError):
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        inside = [
            point
            for point in (line.split()[1].encode().decode("unicode_escape") for line in mounts)
            if Path(point) == path or Path(point).is_relative_to(path)
        ]
        for point in sorted(inside, reverse=True):
            subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)


def _counter(path: Path, name: str) -> int:
    """A named count in a flat-keyed cgroup file (`oom_kill 2`, `max 5`); 0 when absent."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return 0


@dataclass
class Hits:
    """The kernel's counts of limit hits, read before and after each exec."""

    oom_kills: int = 0
    pids_refused: int = 0


@dataclass
class Limits:
    """The bounds of one sandbox: made with it, applied to each exec, undone on close."""

    spec: SandboxSpec
    slot_dir: Path
    groups: dict[str, Path] = field(default_factory=dict)
    tmpfs: bool = False

    @classmethod
    def create(cls, spec: SandboxSpec, slot_dir: Path) -> Limits:
        """Make the sandbox's cgroups and, as root, mount its size-capped tmpfs on the
        (still empty) sandbox directory; each is skipped where the machine refuses it."""
        limits = cls(spec, slot_dir)
        name = f"docdelta-{secrets.token_hex(6)}"
        for kind, parent in _parents().items():
            group = parent / name
            try:
                group.mkdir()
                limits.groups[kind] = group
                limits._configure(kind, group)
            except OSError:
                limits.close()
                limits = cls(spec, slot_dir)
                break
        if os.geteuid() == 0 and shutil.which("mount"):
            size = f"size={spec.workspace_mb}m,mode=0755"
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", size, "docdelta-sandbox", str(slot_dir)],
                capture_output=True,
                check=False,
            )
            limits.tmpfs = done.returncode == 0
        return limits

    def _configure(self, kind: str, group: Path) -> None:
        memory, pids = str(self.spec.memory_mb * MIB), str(self.spec.pids)
        if kind == "v2":
            (group / "memory.max").write_text(memory)
            if (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")
            (group / "pids.max").write_text(pids)
        elif kind == "memory":
            (group / "memory.limit_in_bytes").write_text(memory)
            if (group / "memory.memsw.limit_in_bytes").exists():
                (group / "memory.memsw.limit_in_bytes").write_text(memory)
        else:
            (group / "pids.max").write_text(pids)

    @property
    def cgroups(self) -> bool:
        return bool(self.groups)

    def wrap(self, argv: list[str]) -> list[str]:
        """The exec's command line with its rlimits set and, first, its cgroups entered."""
        rlimits = ["prlimit", f"--fsize={self.spec.workspace_mb * MIB}", "--core=0"]
        if not self.cgroups:
            rlimits += [f"--data={self.spec.memory_mb * MIB}", f"--nproc={self.spec.pids}"]
        command = [*rlimits, "--", *argv]
        if not self.cgroups:
            return command
        procs = [str(group / "cgroup.procs") for group in self.groups.values()]
        return ["sh", "-c", ENTER, "sh", str(len(procs)), *procs, *command]

    def hits(self) -> Hits:
        if "v2" in self.groups:
            group = self.groups["v2"]
            return Hits(_counter(group / "memory.events", "oom_kill"), _counter(group / "pids.events", "max"))
        memory, pids = self.groups.get("memory"), self.groups.get("pids")
        return Hits(
            _counter(memory / "memory.oom_control", "oom_kill") if memory else 0,
            _counter(pids / "pids.events", "max") if pids else 0,
        )

    def disk_full(self) -> bool:
        """True when the sandbox has (about) `workspace_mb` written: asked only after a
        failed exec, since a full disk is why it may have failed."""
        quota = self.spec.workspace_mb * MIB
        if self.tmpfs:
            with contextlib.suppress(OSError):
                stat = os.statvfs(self.slot_dir)
                return stat.f_bavail * stat.f_frsize < DISK_FULL_MARGIN
            return False
        used = 0
        for top, _dirs, files in os.walk(self.slot_dir):
            for name in files:
                with contextlib.suppress(OSError):
                    used += os.lstat(os.path.join(top, name)).st_blocks * 512
        return used + DISK_FULL_MARGIN >= quota

    def close(self) -> None:
        """Unmount the tmpfs (its files go with it) and remove the cgroups; called once
        every process of the sandbox is gone."""
        if self.tmpfs:
            subprocess.run(["umount", "--lazy", str(self.slot_dir)], capture_output=True, check=False)
            self.tmpfs = False
        for group in self.groups.values():
            with contextlib.suppress(OSError):
                group.rmdir()
        self.groups.clear()
