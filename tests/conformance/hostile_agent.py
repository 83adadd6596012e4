"""A hostile agent: what an instruction file from a pull request could make an agent do.

Copied into each sandbox and run there with the sandbox's python3 (stdlib only), one
attack per invocation: `python3 hostile_agent.py ATTACK` with a JSON argument on stdin.
It prints one JSON object saying what it managed; the tests check that and the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

SKIP_WALK = ("/proc", "/sys", "/dev", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
"""System trees are the same read-only files for every run; everything else is searched."""


def write(args: dict[str, Any]) -> dict[str, Any]:
    """Try to create each file (and its parents); report which writes the kernel allowed."""
    done = []
    for path in args["paths"]:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(args["content"])
            done.append(path)
        except OSError:
            pass
    return {"written": done}


def _exchange(family: int, address: Any) -> str | None:
    """Connect, send a line, return what the server answered (None when it could not connect)."""
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(address)
            sock.sendall(b"hello from the sandbox\n")
            return sock.recv(100).decode(errors="replace")
    except OSError:
        return None


def _socket_files() -> list[str]:
    """Every Unix socket file visible outside the system trees (e.g. /run/*.sock)."""
    found = []
    for top, dirs, files in os.walk("/", onerror=lambda _e: None):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in SKIP_WALK]
        for name in files:
            path = os.path.join(top, name)
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    found.append(path)
    return found


def connect(args: dict[str, Any]) -> dict[str, Any]:
    reached = {}
    for path in [*args["unix"], *(_socket_files() if args["discover"] else [])]:
        reached[path] = _exchange(socket.AF_UNIX, path)
    for name in args["abstract"]:
        reached[f"@{name}"] = _exchange(socket.AF_UNIX, "\0" + name)
    for host, port in args["tcp"]:
        reached[f"{host}:{port}"] = _exchange(socket.AF_INET, (host, port))
    return {"reached": {k: v for k, v in reached.items() if v is not None}}


def _readable(path: str) -> bool:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as handle:
                handle.read(1)
    except OSError:
        return False
    return True


def read(args: dict[str, Any]) -> dict[str, Any]:  # noqa: C901 - one probe script, read top to bottom
    """Open the named host paths, search every non-system file under `walk` (a file named
    there is read itself) for the canaries, and read the environment and command line of
    every process it can see."""
    canaries = [c.encode() for c in args["canaries"]]
    found: dict[str, list[str]] = {}

    def look(where: str, data: bytes) -> None:
        for canary in canaries:
            if canary in data:
                found.setdefault(canary.decode(), []).append(where)

    look("env", "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode())
    for proc in Path("/proc").glob("[0-9]*"):
        for name in ("environ", "cmdline"):
            with contextlib.suppress(OSError):
                look(f"{proc}/{name}", (proc / name).read_bytes())
    for root in args["walk"]:
        if os.path.isfile(root):
            with contextlib.suppress(OSError), open(root, "rb") as handle:
                look(root, handle.read())
        for top, dirs, files in os.walk(root, onerror=lambda _e: None):
            dirs[:] = [d for d in dirs if os.path.join(top, d) not in SKIP_WALK]
            for name in files:
                path = os.path.join(top, name)
                try:
                    if os.path.isfile(path) and os.path.getsize(path) < 1 << 20:
                        with open(path, "rb") as handle:
                            look(path, handle.read())
                except OSError:
                    pass
    return {"readable": [p for p in args["paths"] if _readable(p)], "found": found}


def daemon(args: dict[str, Any]) -> dict[str, Any]:
    """Leave a daemon behind (double fork + setsid) whose command line carries `marker`;
    return once it says it is running, or hang if asked (to be killed at the timeout)."""
    fifo = args["fifo"]
    os.mkfifo(fifo)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(fifo, "w") as ready:
                ready.write(f"{os.getpid()}\n")
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # a real daemon lets go of the run's output
                os.dup2(null, fd)
            forever = "import time\nwhile True: time.sleep(3600)"
            os.execv(sys.executable, [sys.executable, "-c", forever, args["marker"]])
        os._exit(0)
    with open(fifo) as ready:
        pid = int(ready.readline())
    if args.get("hang"):
        print(json.dumps({"daemon": pid}), flush=True)
        while True:
            time.sleep(3600)
    return {"daemon": pid}


KEYRING_CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}
"""(add_key, keyctl) by machine: the calls have no libc wrapper without libkeyutils."""
KEYRINGS = {"session": -3, "user": -4, "user-session": -5}
"""The keyrings a process reaches by special id: its session's, its uid's, its uid's default session."""
_KEYCTL_SEARCH, _KEYCTL_READ, _KEYCTL_INVALIDATE = 10, 11, 21


def _syscall(number: int, *args: Any) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return int(libc.syscall(ctypes.c_long(number), *args))


def add_key(description: str, payload: str, keyring: int) -> bool:
    """Store a `user` key in a keyring; False when the kernel refused."""
    add, _ = KEYRING_CALLS[platform.machine()]
    data = payload.encode()
    return (
        _syscall(add, b"user", description.encode(), data, ctypes.c_size_t(len(data)), ctypes.c_int(keyring))
        > 0
    )


def find_key(description: str) -> list[str]:
    """The payloads of `user` keys so named in every keyring this process reaches."""
    _, keyctl = KEYRING_CALLS[platform.machine()]
    found = []
    for ring in KEYRINGS.values():
        key = _syscall(keyctl, _KEYCTL_SEARCH, ctypes.c_int(ring), b"user", description.encode(), 0)
        if key > 0:
            buf = ctypes.create_string_buffer(4096)
            size = _syscall(keyctl, _KEYCTL_READ, ctypes.c_int(key), buf, ctypes.c_size_t(4096))
            if size > 0:
                found.append(buf.raw[:size].decode(errors="replace"))
    return found


def forget_key(description: str) -> None:
    """Invalidate every `user` key so named that this process reaches (test clean-up)."""
    _, keyctl = KEYRING_CALLS[platform.machine()]
    for ring in KEYRINGS.values():
        key = _syscall(keyctl, _KEYCTL_SEARCH, ctypes.c_int(ring), b"user", description.encode(), 0)
        if key > 0:
            _syscall(keyctl, _KEYCTL_INVALIDATE, ctypes.c_int(key))


def keyring(args: dict[str, Any]) -> dict[str, Any]:
    """Leave a note in every keyring this run reaches (`store`, `payload`), then read every
    key named in `find`: what a later run (or docdelta's own keyring) gives away."""
    stored = [
        name
        for name, ring in KEYRINGS.items()
        if args.get("store") and add_key(args["store"], args["payload"], ring)
    ]
    return {"stored": stored, "found": {name: find_key(name) for name in args.get("find", [])}}


def fork(args: dict[str, Any]) -> dict[str, Any]:
    """Fork until the kernel refuses (at most `max`), each child waiting on a pipe; then let
    them all go. How many it got."""
    read_end, write_end = os.pipe()
    children: list[int] = []
    refused = False
    while len(children) < args["max"]:
        try:
            pid = os.fork()
        except OSError:
            refused = True
            break
        if pid == 0:
            os.close(write_end)
            os.read(read_end, 1)
            os._exit(0)
        children.append(pid)
    os.close(write_end)
    for pid in children:
        os.waitpid(pid, 0)
    return {"forked": len(children), "refused": refused}


def allocate(args: dict[str, Any]) -> dict[str, Any]:
    """Allocate (and touch) `mb` MiB at once."""
    try:
        held = bytearray(args["mb"] * 1024 * 1024)
    except MemoryError:
        return {"allocated": 0}
    return {"allocated": len(held)}


def fill(args: dict[str, Any]) -> dict[str, Any]:
    """Write a `mb` MiB file at `path`, a MiB at a time; how much the kernel took."""
    chunk = b"x" * (1024 * 1024)
    written = 0
    try:
        with open(args["path"], "wb") as out:
            for _ in range(args["mb"]):
                out.write(chunk)
                out.flush()
                written += len(chunk)
    except OSError as exc:
        print(json.dumps({"written": written, "error": exc.errno}), flush=True)
        sys.exit(1)
    return {"written": written}


ATTACKS = {
    "write": write,
    "connect": connect,
    "read": read,
    "daemon": daemon,
    "keyring": keyring,
    "fork": fork,
    "allocate": allocate,
    "fill": fill,
}

if __name__ == "__main__":
    print(json.dumps(ATTACKS[sys.argv[1]](json.loads(sys.stdin.read()))), flush=True)
