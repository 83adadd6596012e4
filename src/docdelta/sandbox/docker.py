"""The Docker provider: one hardened container per run, driven only through the Docker API.

Only the Docker API is used (no bind mounts, no host paths, no host PIDs): in a GitHub
Docker action our containers are siblings on the host daemon, so the checkout goes in with
`put_archive` and files come out with `get_archive`, both on a per-run labelled volume.

Hardening is the default, not an option: a non-root user, no capabilities,
no-new-privileges, a read-only root with a writable workspace volume and a /tmp tmpfs,
memory/CPU/pids limits, a wall-clock timeout that kills every process of the run, a cap
on captured output and an environment built from scratch for every exec. Every container,
network and volume carries the `org.docdelta` label and is removed on every exit path;
`gc` sweeps what a crashed process left.
"""

from __future__ import annotations

import io
import select
import socket
import struct
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import docker.errors
from docker import DockerClient

from docdelta.errors import InfraError, SandboxError
from docdelta.gateway.runtime import Gateway, RunningGateway
from docdelta.sandbox.base import ExecResult, Sandbox, SandboxProvider, SandboxSpec
from docdelta.sandbox.dockerapi import AGENT_UID, AGENT_USER, LABEL, ROLE_LABEL, RUN_LABEL, raw_socket

VOLUME_ROOT = "/workspace"
WORKSPACE = f"{VOLUME_ROOT}/repo"
TOOLS_DIR = f"{VOLUME_ROOT}/tools"
DEFAULT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",  # noqa: S108 - the container's own tmpfs
    "TMPDIR": "/tmp",  # noqa: S108
    "LANG": "C.UTF-8",
}
"""The floor of every exec's environment (the spec's and the call's env override it);
HOME and TMPDIR are on the tmpfs because the root filesystem is read-only."""

_KILLED = 137  # 128 + SIGKILL: how an OOM-killed (or otherwise SIGKILLed) process exits
_OOM_PROBE = "cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || cat /sys/fs/cgroup/memory.events"


def engine() -> DockerClient:
    """A client for the engine named by DOCKER_HOST (or the default socket); for cli.py."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"cannot reach a Docker engine: {exc}",
            hint="start dockerd (scripts/provision-docker.sh does it) or set DOCKER_HOST; "
            "or run with --sandbox local",
        ) from exc
    return client


def from_env(image: str, *, gateway: Gateway | None = None) -> DockerProvider:
    """The provider on the default engine."""
    return DockerProvider(engine(), image, gateway=gateway)


class DockerProvider(SandboxProvider):
    """Creates one `DockerSandbox` per run from `image`; holds no per-run state itself."""

    name = "docker"

    def __init__(
        self,
        client: DockerClient,
        image: str,
        *,
        gateway: Gateway | None = None,
        ro_paths: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.image = image
        self.gateway = gateway
        self.ro_paths = list(ro_paths)
        """Toolchain paths (on the engine's host) bound read-only at the same path: the
        one exception to "no bind mounts", named by the project in `.docdelta.yml`."""
        self.env = dict(env or {})

    def create(self, checkout: Path, spec: SandboxSpec) -> DockerSandbox:
        if not checkout.is_dir():
            raise SandboxError(
                f"checkout {checkout} is not a directory", hint="pass the sealed checkout's path"
            )
        if spec.network == "gateway" and self.gateway is None:
            raise SandboxError(
                "network mode 'gateway' needs a model gateway, and none is configured",
                hint="configure the gateway (model API key and upstreams) or use network 'none'",
            )
        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(
                f"Docker image {self.image!r} is not present on the engine",
                hint="build it first (scripts/provision-docker.sh builds docdelta-base:latest)",
            ) from exc
        return DockerSandbox(self, checkout, spec)


class DockerSandbox(Sandbox):
    """One run's container (plus its volume, and in gateway mode its network and gateway)."""

    workspace = WORKSPACE
    tools_dir = TOOLS_DIR

    def __init__(self, provider: DockerProvider, checkout: Path, spec: SandboxSpec) -> None:
        self._client = provider.client
        self._spec = spec
        self.run_id = uuid.uuid4().hex[:12]
        self._labels = {LABEL: "1", RUN_LABEL: self.run_id}
        self._cleanups: list[Callable[[], None]] = []
        self.gateway: RunningGateway | None = None
        self._ro_paths = provider.ro_paths
        self._env = {**DEFAULT_ENV, **provider.env, **spec.env}
        self._oom_kills = 0
        self._closed = False
        self.isolation = f"docker-{ {'none': 'none', 'gateway': 'internal', 'open': 'open'}[spec.network] }"
        try:
            network = self._network(provider)
            self._container = self._create_container(provider.image, network)
            self._container.put_archive(VOLUME_ROOT, _checkout_tar(checkout))
            self._container.start()
        except BaseException as exc:
            self.close()
            if isinstance(exc, docker.errors.DockerException):
                raise InfraError(f"could not start the run's container: {exc}") from exc
            raise

    # ------------------------------------------------------------ lifecycle
    def _network(self, provider: DockerProvider) -> str:
        """The container's network: none, the default bridge, or a fresh internal network
        whose only other member is this run's gateway (reachable as `gateway`)."""
        if self._spec.network == "none":
            return "none"
        if self._spec.network == "open":
            return "bridge"
        assert provider.gateway is not None  # checked by DockerProvider.create
        internal = self._client.networks.create(
            f"docdelta-{self.run_id}-internal", internal=True, labels=self._labels
        )
        self._cleanups.append(internal.remove)
        config = provider.gateway.config.for_run(self._spec.max_cost_usd, self._spec.fingerprints)
        self.gateway = replace(provider.gateway, config=config).start(self._client, internal, self._labels)
        self._cleanups.append(self.gateway.close)
        self._env = {**self._env, **self.gateway.client_env(), **self._spec.env}
        return str(internal.name)

    def _create_container(self, image: str, network: str) -> Any:
        volume = self._client.volumes.create(f"docdelta-{self.run_id}", labels=self._labels)
        self._cleanups.append(volume.remove)
        container = self._client.containers.create(
            image,
            ["sleep", "infinity"],
            name=f"docdelta-{self.run_id}",
            hostname="sandbox",
            init=True,  # a real PID 1 reaps orphans, and killing it ends the whole PID namespace
            user=AGENT_USER,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            tmpfs={"/tmp": "rw,nosuid,nodev,size=512m,mode=1777"},  # noqa: S108
            volumes={
                volume.name: {"bind": VOLUME_ROOT, "mode": "rw"},
                **{path: {"bind": path, "mode": "ro"} for path in self._ro_paths},
            },
            mem_limit=f"{self._spec.memory_mb}m",
            memswap_limit=f"{self._spec.memory_mb}m",
            nano_cpus=int(self._spec.cpus * 1e9),
            pids_limit=self._spec.pids,
            network_mode=network,
            labels={**self._labels, ROLE_LABEL: "agent"},
            working_dir=WORKSPACE,
            environment={},
        )
        self._cleanups.append(lambda: container.remove(force=True, v=True))
        return container

    def close(self) -> None:
        """Undo creation in reverse order (container, volume, gateway, network); each step
        runs even when another fails, and a second call does nothing."""
        self._closed = True
        cleanups, self._cleanups = self._cleanups, []
        for cleanup in reversed(cleanups):
            with suppress(docker.errors.NotFound):
                try:
                    cleanup()
                except docker.errors.APIError:
                    # e.g. the daemon still tearing the container down: retry once.
                    time.sleep(0.2)
                    with suppress(docker.errors.APIError):
                        cleanup()

    # ----------------------------------------------------------------- exec
    def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = 600.0,
    ) -> ExecResult:
        self._check_open()
        if not argv:
            raise SandboxError("exec needs a command", hint="pass a non-empty argv")
        merged = {**self._env, **(env or {})}
        # `env -i` so nothing from the image's ENV (or Docker's defaults) reaches the process.
        command = ["env", "-i", *(f"{k}={v}" for k, v in merged.items()), *argv]
        started = time.monotonic()
        api = self._client.api
        exec_id = api.exec_create(
            self._container.id,
            command,
            stdin=True,
            stdout=True,
            stderr=True,
            workdir=self._path(cwd or WORKSPACE),
            user=AGENT_USER,
        )["Id"]
        stream = api.exec_start(exec_id, socket=True)
        sock = raw_socket(stream)
        try:
            out = _pump(sock, stdin or b"", started + timeout, self._spec.max_output_bytes)
        finally:
            sock.close()
        duration = time.monotonic() - started
        if out.timed_out:
            self._kill_all()
            return ExecResult(None, out.stdout, out.stderr, duration, timed_out=True, truncated=out.truncated)
        exit_code = self._exit_code(exec_id)
        if exit_code == _KILLED and self._oom_killed():
            return ExecResult(None, out.stdout, out.stderr, duration, oom=True, truncated=out.truncated)
        return ExecResult(exit_code, out.stdout, out.stderr, duration, truncated=out.truncated)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(
                f"sandbox docdelta-{self.run_id} is closed", hint="create a new sandbox for each run"
            )

    def _exit_code(self, exec_id: str) -> int | None:
        for _ in range(50):  # the stream can close a moment before the exec is marked done
            info = self._client.api.exec_inspect(exec_id)
            if not info["Running"]:
                return int(info["ExitCode"])
            time.sleep(0.02)
        return None

    def _kill_all(self) -> None:
        """Kill every process of the run by restarting the container: SIGKILL to PID 1 ends
        the PID namespace (no process survives, however many it forked); the workspace
        volume keeps the files, so the sandbox stays usable."""
        self._container.kill()
        self._container.wait(timeout=30)
        self._container.start()
        self._oom_kills = 0  # a restarted container starts a fresh memory cgroup

    def _oom_killed(self) -> bool:
        """True when the memory cgroup's OOM-kill counter rose: the SIGKILL was the kernel's."""
        probe = self._container.exec_run(["sh", "-c", _OOM_PROBE], user="0").output.decode()
        kills = next((int(line.split()[1]) for line in probe.splitlines() if line.startswith("oom_kill ")), 0)
        seen, self._oom_kills = self._oom_kills, kills
        return kills > seen

    # ---------------------------------------------------------------- files
    def _path(self, path: str) -> str:
        return str(PurePosixPath(WORKSPACE, path))  # absolute paths replace the workspace part

    def read_file(self, path: str) -> bytes:
        self._check_open()
        full = self._path(path)
        try:
            stream, _ = self._container.get_archive(full)
        except docker.errors.NotFound:
            raise SandboxError(
                f"{full} does not exist in sandbox docdelta-{self.run_id}",
                hint="check the path; relative paths are under the workspace",
            ) from None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.next()
            data = archive.extractfile(member) if member is not None else None
            if data is None:
                raise SandboxError(f"{full} is not a regular file", hint="read a file, not a directory")
            return data.read()

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        self._check_open()
        full = PurePosixPath(self._path(path))
        if not full.is_relative_to(VOLUME_ROOT):
            raise SandboxError(
                f"cannot write {full}: only paths under {VOLUME_ROOT} are writable in a Docker sandbox",
                hint=f"write under the workspace or {TOOLS_DIR}",
            )
        relative = full.relative_to(VOLUME_ROOT)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as archive:
            # Parent entries first so missing directories are created, owned by the agent user.
            for parent in reversed(relative.parents[:-1]):
                archive.addfile(_owned(tarfile.TarInfo(str(parent)), tarfile.DIRTYPE, 0o755))
            info = _owned(tarfile.TarInfo(str(relative)), tarfile.REGTYPE, mode)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        self._container.put_archive(VOLUME_ROOT, buf.getvalue())


def gc(client: DockerClient) -> int:
    """Remove every docdelta-labelled container, network and volume (leftovers of a crashed
    run); returns how many objects were removed. Containers go first: they hold the rest."""
    removed = 0
    label: dict[str, str | list[str] | bool] = {"label": LABEL}
    for container in client.containers.list(all=True, filters=label):
        with suppress(docker.errors.NotFound):
            container.remove(force=True, v=True)
            removed += 1
    for network in client.networks.list(filters=label):
        with suppress(docker.errors.NotFound):
            network.remove()
            removed += 1
    for volume in client.volumes.list(filters=label):
        with suppress(docker.errors.NotFound):
            volume.remove(force=True)
            removed += 1
    return removed


# ------------------------------------------------------------------ helpers
def _owned(info: tarfile.TarInfo, kind: bytes, mode: int) -> tarfile.TarInfo:
    info.type = kind
    info.mode = mode
    info.uid = info.gid = AGENT_UID
    info.uname = info.gname = "agent"
    info.mtime = int(time.time())
    return info


def _checkout_tar(checkout: Path) -> bytes:
    """The checkout as `repo/` plus an empty `tools/`, every entry owned by the agent user."""

    def chown(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = AGENT_UID
        info.uname = info.gname = "agent"
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as archive:
        archive.add(checkout, arcname="repo", filter=chown)
        archive.addfile(_owned(tarfile.TarInfo("tools"), tarfile.DIRTYPE, 0o755))
    return buf.getvalue()


class _Output:
    """stdout/stderr of one exec, each capped; what is past the cap is read and dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.streams = {1: bytearray(), 2: bytearray()}
        self.truncated = False
        self.timed_out = False

    def add(self, stream: int, data: bytes) -> None:
        buf = self.streams.get(stream)
        if buf is None:
            return
        room = self.cap - len(buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        buf += data

    @property
    def stdout(self) -> bytes:
        return bytes(self.streams[1])

    @property
    def stderr(self) -> bytes:
        return bytes(self.streams[2])


def _frames(buf: bytearray) -> Iterator[tuple[int, bytes]]:
    """Complete frames of Docker's multiplexed stream (8-byte header: stream id, size)."""
    while len(buf) >= 8:
        stream, size = struct.unpack(">BxxxL", buf[:8])
        if len(buf) < 8 + size:
            return
        yield stream, bytes(buf[8 : 8 + size])
        del buf[: 8 + size]


def _pump(sock: socket.socket, stdin: bytes, deadline: float, cap: int) -> _Output:
    """Feed stdin and collect output until the exec ends or the deadline passes, without
    threads and without deadlocking when the process writes before reading its input."""
    out = _Output(cap)
    pending = memoryview(stdin)
    writing = True
    if not pending:
        sock.shutdown(socket.SHUT_WR)
        writing = False
    sock.setblocking(False)
    raw = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            out.timed_out = True
            return out
        readable, writable, _ = select.select([sock], [sock] if writing else [], [], remaining)
        if writable:
            try:
                sent = sock.send(pending[:65536])
            except (BrokenPipeError, ConnectionResetError):
                sent = len(pending)  # the process closed its stdin; drop the rest
            pending = pending[sent:]
            if not pending:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_WR)
                writing = False
        if readable:
            try:
                chunk = sock.recv(65536)
            except BlockingIOError:
                continue
            if not chunk:
                return out
            raw += chunk
            for stream, data in _frames(raw):
                out.add(stream, data)
