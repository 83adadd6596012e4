"""Docker API plumbing shared by the sandbox and the gateway: labels, the agent user,
and the raw socket under the SDK's hijacked-connection wrappers."""

from __future__ import annotations

import os
import socket
from contextlib import suppress
from pathlib import Path
from typing import Any, cast

import docker.errors
from docker.types import LogConfig

from docdelta.sandbox.base import AGENT_UID

LABEL = "org.docdelta"
"""Every Docker object we create carries this label (value "1"); `gc` removes by it."""
RUN_LABEL = f"{LABEL}.run"
ROLE_LABEL = f"{LABEL}.role"
OWNER_LABEL = f"{LABEL}.owner"
"""`host/pid/start`: the docdelta process a run's objects belong to. Objects whose owner
is gone are leftovers any later start removes; objects of a live owner, or of another
host (another docdelta container on a shared daemon), are never touched."""
AGENT_USER = f"{AGENT_UID}:{AGENT_UID}"


def raw_socket(stream: object) -> socket.socket:
    """The socket of an attach/exec stream, for half-closing stdin and select()."""
    return cast(socket.socket, getattr(stream, "_sock", stream))


def bounded_log(max_bytes: int) -> Any:
    """A container log the daemon keeps to `max_bytes` on its disk (one file, no rotation
    copies), so a process writing to its container's stdout cannot fill the host."""
    return LogConfig(type=LogConfig.types.JSON, config={"max-size": str(max_bytes), "max-file": "1"})


def close_stdin(stream: object) -> None:
    """End an attach connection now (shutdown, not just close: the SDK's file wrappers keep
    the socket open past `close`), so Docker closes the container's stdin."""
    sock = raw_socket(stream)
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with suppress(OSError):
        sock.close()


def remove_container(container: Any) -> None:
    """Remove a container (and its anonymous volumes) and return only once it is gone.

    With `force` the daemon answers 409 only when a removal of that container is already
    under way (its own teardown after an exit, a concurrent `gc`): the container is still
    listed and still holds its volume and network, so waiting for the daemon's `removed`
    condition, not a timer, is what lets the caller remove those next and leave nothing."""
    try:
        container.remove(force=True, v=True)
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
        with suppress(docker.errors.NotFound):
            container.wait(condition="removed")


def _start_ticks(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), so a
    reused pid does not pass for the process that owned a run."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _pid_namespace() -> str:
    """This process's PID namespace (`pid:[4026531836]`). A pid means something only inside
    its namespace: a docdelta in a container started with `--network host` (act, a
    self-hosted runner) shares the host's name, and its pid 7 is not the host's pid 7."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "pid:[unknown]"


def owner_id() -> str:
    """This process as an owner label value: host / PID namespace / pid / start ticks."""
    return f"{socket.gethostname()}/{_pid_namespace()}/{os.getpid()}/{_start_ticks(os.getpid())}"


def owner_gone(owner: str) -> bool:
    """True only for an owner on this host, in this PID namespace, whose process no longer
    exists; an owner this process cannot see (another host or namespace) is never gone."""
    parts = owner.split("/")
    if len(parts) != 4:
        return False
    host, namespace, pid, start = parts
    if host != socket.gethostname() or namespace != _pid_namespace() or not pid.isdigit():
        return False
    return _start_ticks(int(pid)) != start
