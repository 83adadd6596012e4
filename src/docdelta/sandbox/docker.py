"""The Docker provider: one hardened container per run, driven only through the Docker API.

Only the Docker API is used (no bind mounts, no host paths, no host PIDs): in a GitHub
Docker action our containers are siblings on the host daemon, so the checkout goes in as an
archive on the container's attached stdin, which its first process unpacks onto a per-run
labelled volume, and files come out with `get_archive`. The run's first command (the
agent's) is that first process's too, sent on the same stdin; later ones are `docker exec`s.

Hardening is the default, not an option: a non-root user, no capabilities,
no-new-privileges, a read-only root with a writable workspace volume and a /tmp tmpfs,
memory/CPU/pids limits, a wall-clock timeout that kills every process of the run, a cap
on captured output, a size-capped container log and an environment built from scratch for
every exec.

Nothing outlives docdelta: once the checkout is unpacked, the container's first process
reads its stdin, which is attached to this process (the SDK's create sets StdinOnce), and a
process of it keeps reading while the first command runs, so when docdelta exits or is
killed Docker closes that stdin, the first process ends and with it the container and every
process in it (the gateway has the same watchdog). Every container,
network and volume carries the `org.docdelta` labels, with its owner (host/pid/start), and
is removed on every exit path: a closed run's container is killed at once, and its objects
are removed off the run's path (`_Removals`), waited for by the provider's `close` and at
exit; each new provider, and `docdelta gc`, removes what dead owners left.
"""

from __future__ import annotations

import io
import os
import select
import shlex
import socket
import struct
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from contextlib import suppress
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import docker.errors
import requests
from docker import DockerClient

from docdelta.errors import InfraError, SandboxError
from docdelta.interrupts import deferred_signals
from docdelta.sandbox.base import (
    AGENT_UID,
    DISK_FULL_MARGIN,
    ExecResult,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
    toolchain_identity,
)
from docdelta.sandbox.dockerapi import (
    AGENT_USER,
    LABEL,
    OWNER_LABEL,
    ROLE_LABEL,
    RUN_LABEL,
    bounded_log,
    close_stdin,
    owner_gone,
    owner_id,
    raw_socket,
    remove_container,
)
from docdelta.sandbox.gateway_container import GatewayContainer, RunningGateway

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

WATCHDOG = ["sh", "-c", "exec cat >/dev/null"]
"""The holder container's first process: it ends when its stdin (docdelta's attach) closes."""
FILLED = "docdelta-filled"
"""What the agent container's first process prints, with tar's exit status, once the
checkout is unpacked."""
FILL_THEN_WATCH = [
    "sh",
    "-c",
    f'read -r size && head -c "$size" | tar -x -f - -C {VOLUME_ROOT}; echo "{FILLED} $?"; '
    'IFS= read -r script && eval "$(printf "$script")"; exec cat >/dev/null',
]
"""The agent container's first process: it unpacks the archive that follows a line with its
size on stdin into the workspace volume, says so, runs the one command that follows on a line
of its own (`_first_command`: the sandbox's first exec, usually the agent), then is the
`WATCHDOG`. `head` ends tar's input at the archive's last byte, so even a tar that reads its
input to the end finishes without waiting for an end of stdin that only comes when docdelta
lets go. Only the options every tar has: modes as recorded, less the umask (a checkout's are
644, 755 and 444). The command comes as one line that `printf` turns back into the script
(`_printf_line`) because `read` is the one reader every sh has that never takes a byte past
its line: what follows it on stdin is the command's own input."""
EMPTY_ARCHIVE = bytes(tarfile.RECORDSIZE)
"""An archive with no member: what a restarted container unpacks (its volume kept the files)."""
FILL_IDLE_S = 60.0
"""Filling a workspace fails after this long without a byte sent or received: the engine or
the container has stopped answering."""
LOG_MAX_BYTES = 1024 * 1024
"""The agent container's log: nothing of ours writes it, so only a process writing to
/proc/1/fd/1 would, and it gets this much of the daemon's disk."""
MAX_READ_BYTES = 16 * 1024 * 1024
"""The largest file docdelta reads back from a sandbox (metrics, answers, reports)."""
_NO_CWD = 126
"""The exit status of a command whose working directory is missing: `docker exec`'s (the
runtime cannot start it)."""
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


def from_env(image: str, *, gateway: GatewayContainer | None = None) -> DockerProvider:
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
        gateway: GatewayContainer | None = None,
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
        self._tars: dict[tuple[str, int, int], futures.Future[bytes]] = {}
        self._tars_lock = threading.Lock()
        self._archiver = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="docker-archive")
        self._image_present = False
        self._open: set[DockerSandbox] = set()
        """Runs made and not closed yet: held here, so one its caller dropped unclosed is
        still ended by `close`."""
        self._open_lock = threading.Lock()
        self._closed = False
        self.removals = REMOVALS
        """Closed runs' containers, volumes and networks, removed off the run's path (the
        process's one queue, shared by its providers)."""
        gc(client)  # leftovers of runs whose docdelta process is gone

    def close(self) -> None:
        """End every run still open (a caller that abandoned one, a worker thread still in
        its `create` when Ctrl-C closed the run) and wait for the removal of every closed
        run's objects: nothing of this provider's runs (nor of any other provider's closed
        runs in this process) is left once it returns. From then on `create` refuses."""
        with self._open_lock:
            self._closed = True
            still_open = list(self._open)
        for sandbox in still_open:
            sandbox.close()
        self._archiver.shutdown(wait=True, cancel_futures=True)
        self.removals.drain()

    def _opened(self, sandbox: DockerSandbox) -> None:
        """Count `sandbox` as open, so `close` ends it; raises SandboxError once the provider
        is closed (the sandbox's own constructor then removes what it made)."""
        with self._open_lock:
            if self._closed:
                raise SandboxError("the Docker provider is closed", hint="start a new run")
            self._open.add(sandbox)

    def _ended(self, sandbox: DockerSandbox) -> None:
        """`sandbox` is closed: `close` has nothing left to end of it."""
        with self._open_lock:
            self._open.discard(sandbox)

    def checkout_tar(self, checkout: Path) -> futures.Future[bytes]:
        """The archive a run's volume is filled from, built once per checkout (path, inode,
        ctime) rather than once per run, and kept for the few checkouts a matrix has. Built
        on a worker thread from the moment the first run of a checkout asks for it, so the
        building (0.3-0.9 s on minijinja's here, quiet to loaded) goes on while that run's
        container is made and started; a build that failed is tried again by the next run.

        Why an archive and not a read-only bind of the sealed checkout plus a copy inside:
        the engine may be remote (`DOCKER_HOST`), where no host path exists, and the agent,
        unprivileged in its container, cannot mount an overlay; the volume's tmpfs is also
        what enforces the workspace quota. Each run still gets its own copy on its own
        volume, so nothing it does reaches the sealed checkout or another run. Why on the
        container's stdin (`FILL_THEN_WATCH`) and not `put_archive`: the engine unpacks a put
        archive in a helper process it starts for each call, which cost more than the
        container's own start on a large checkout; the container's first process is already
        running and unpacks it as the agent user, as `put_archive` would have owned it."""
        info = checkout.stat()
        key = (str(checkout.resolve()), info.st_ino, info.st_ctime_ns)
        with self._tars_lock:
            for stale in [k for k in self._tars if k != key and not os.path.isdir(k[0])]:
                del self._tars[stale]
            kept = self._tars.get(key)
            if kept is None or (kept.done() and kept.exception() is not None):
                while len(self._tars) >= _KEPT_ARCHIVES:
                    del self._tars[next(iter(self._tars))]
                kept = self._tars[key] = self._archiver.submit(_checkout_tar, checkout)
            return kept

    def create(self, checkout: Path, spec: SandboxSpec) -> DockerSandbox:
        if self._closed:
            raise SandboxError("the Docker provider is closed", hint="start a new run")
        if not checkout.is_dir():
            raise SandboxError(
                f"checkout {checkout} is not a directory", hint="pass the sealed checkout's path"
            )
        if spec.network == "gateway" and self.gateway is None:
            raise SandboxError(
                "network mode 'gateway' needs a model gateway, and none is configured",
                hint="configure the gateway (model API key and upstreams) or use network 'none'",
            )
        if not self._image_present:  # once: a run whose image went since fails in its create
            try:
                self.client.images.get(self.image)
            except docker.errors.ImageNotFound as exc:
                raise SandboxError(
                    f"Docker image {self.image!r} is not present on the engine",
                    hint="build it first (scripts/provision-docker.sh builds docdelta-base:latest)",
                ) from exc
            self._image_present = True
        return DockerSandbox(self, checkout, spec)

    def environment(self) -> str:
        """The image by its id (a tag can move to another build), the bound toolchain paths
        as this host sees them (the engine's host, unless the engine is remote) and the env."""
        try:
            image = self.client.images.get(self.image).id
        except docker.errors.ImageNotFound:
            image = "missing"  # `create` says so, naming the image
        return toolchain_identity(f"{self.name} {self.image} {image}", self.ro_paths, self.env)


class DockerSandbox(Sandbox):
    """One run's container (plus its volume, and in gateway mode its network and gateway)."""

    workspace = WORKSPACE
    tools_dir = TOOLS_DIR

    def __init__(self, provider: DockerProvider, checkout: Path, spec: SandboxSpec) -> None:
        self._client = provider.client
        self._spec = spec
        self.run_id = uuid.uuid4().hex[:12]
        self._labels = {LABEL: "1", RUN_LABEL: self.run_id, OWNER_LABEL: owner_id()}
        self._watchdog: Any = None
        self._first: Any = None
        """The output of the container's first process while it waits for its one command
        (`FILL_THEN_WATCH`); taken by the exec that sends it."""
        self._holder_watchdog: Any = None
        self._holder: Any = None
        self._image = provider.image
        self._volume = ""
        self._holder_at = 0
        self._removals = provider.removals
        self._ended = provider._ended
        self._cleanups: list[Callable[[], None]] = []
        self.gateway: RunningGateway | None = None
        self._ro_paths = provider.ro_paths
        self._env = {**DEFAULT_ENV, **provider.env, **spec.env}
        self._oom_kills = 0
        self._closed = False
        self.isolation = f"docker-{ {'none': 'none', 'gateway': 'internal', 'open': 'open'}[spec.network] }"
        self.phases: dict[str, float] = {}
        try:
            archive = provider.checkout_tar(checkout)  # built meanwhile, the first time
            mark = time.perf_counter()
            network = self._network(provider)
            self._container = self._create_container(provider.image, network)
            mark = self._phase("create", mark)
            output = self._start()
            mark = self._phase("start", mark)
            self._fill(output, archive.result())
            self._phase("copy", mark)
            provider._opened(self)  # the provider ends it in its `close` if nobody else does
        except BaseException as exc:
            self.close()
            if isinstance(exc, docker.errors.DockerException):
                raise InfraError(f"could not start the run's container: {exc}") from exc
            raise

    # ------------------------------------------------------------ lifecycle
    def _phase(self, name: str, since: float) -> float:
        """Record `name` as taking from `since` until now; returns now."""
        now = time.perf_counter()
        self.phases[name] = now - since
        return now

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
        # The workspace quota: a tmpfs of fixed size (the only quota every Docker host
        # supports; overlay2's size option needs xfs project quotas).
        size = f"size={self._spec.workspace_mb}m,uid={AGENT_UID},gid={AGENT_UID},mode=0755"
        volume = self._client.volumes.create(
            f"docdelta-{self.run_id}",
            driver="local",
            driver_opts={"type": "tmpfs", "device": "tmpfs", "o": size},
            labels=self._labels,
        )
        self._volume = str(volume.name)
        self._cleanups.append(volume.remove)
        self._holder_at = len(self._cleanups)
        """Where a holder's removal goes in `_cleanups`: undone after the agent's container
        (cleanups run in reverse), before the volume it holds."""
        container = self._client.containers.create(
            image,
            FILL_THEN_WATCH,
            stdin_open=True,
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
            # No working_dir: the engine would make the workspace's repo/ as root at the start,
            # and the agent user's tar could not unpack into it; every exec names its cwd.
            environment={},
            log_config=bounded_log(LOG_MAX_BYTES),
        )
        self._cleanups.append(lambda: remove_container(container))
        return container

    def _hold_workspace(self) -> None:
        """A tmpfs volume lives while a container has it mounted: before the restart that
        ends a timed-out run, a holder container (no network, nothing to do, the same stdin
        watchdog) mounts it too, so the files outlive the agent's container's stop. Made only
        then, once per run: a run that never times out never pays for it."""
        if self._holder is not None:
            return
        holder = self._client.containers.create(
            self._image,
            WATCHDOG,
            stdin_open=True,
            name=f"docdelta-{self.run_id}-disk",
            user=AGENT_USER,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            volumes={self._volume: {"bind": VOLUME_ROOT, "mode": "ro"}},
            mem_limit="32m",
            pids_limit=4,
            network_mode="none",
            labels={**self._labels, ROLE_LABEL: "disk"},
            environment={},
            log_config=bounded_log(LOG_MAX_BYTES),
        )
        self._holder = holder
        self._cleanups.insert(self._holder_at, lambda: remove_container(holder))
        self._holder_watchdog = holder.attach_socket(params={"stdin": 1, "stream": 1})
        holder.start()

    def _start(self) -> Any:
        """Start the container with its watchdog attached (before the start, so its stdin
        is never closed while it runs) and its output, which `_fill` reads and keeps for the
        first exec (attached before the start too, so the fill's report cannot pass unseen)."""
        for stream in (self._watchdog, self._first):
            if stream is not None:
                close_stdin(stream)
        self._first = None
        self._watchdog = self._container.attach_socket(params={"stdin": 1, "stream": 1})
        output = self._container.attach_socket(params={"stdout": 1, "stderr": 1, "stream": 1})
        try:
            self._container.start()
        except BaseException:
            close_stdin(output)
            raise
        return output

    def _fill(self, output: Any, archive: bytes) -> None:
        """Hand the started container's first process `archive` to unpack into the workspace
        (`FILL_THEN_WATCH`) and return once it has; a failed unpack (a checkout larger than
        the workspace quota, or than the memory it counts against; an image without tar)
        is a SandboxError that says why. Keeps `output` for the first exec when the unpack
        succeeded (nothing writes to it until that exec's command runs), closes it otherwise:
        an attach nobody reads would hold up the container's output once its buffer filled."""
        try:
            status, stderr = _unpack(raw_socket(self._watchdog), raw_socket(output), archive)
        except BaseException:
            close_stdin(output)
            raise
        if status == 0:
            self._first = output  # the first process waits for its command: nothing writes meanwhile
        else:
            close_stdin(output)
            why = "it ended first" if status is None else f"tar exited {status}"
            detail = stderr.decode("utf-8", errors="replace").strip()[-2000:]
            raise SandboxError(
                f"could not unpack the checkout into the workspace of docdelta-{self.run_id} "
                f"({why}){': ' + detail if detail else ''}",
                hint="the image needs sh, head and tar; a checkout must fit the workspace quota "
                "(workspace_mb) and the memory limit (memory_mb), which the workspace counts against",
            )

    def close(self) -> None:
        """End the run now, remove its objects soon: every process of the run is killed
        before this returns (the agent's container is killed and waited for: SIGKILL to its
        init ends its whole PID namespace, so nothing of the agent runs on, writes or reaches
        the gateway); the removal of the containers, volume, gateway and network, in reverse
        order of creation, goes to the provider's `removals`, off the run's path, and the
        provider's `close` waits for it. A second call does nothing. Safe from another
        thread while an exec runs (Ctrl-C with `--jobs N`): the container is killed, so the
        exec ends. Signals are held meanwhile, so a second Ctrl-C cannot skip a step."""
        with deferred_signals():
            if self._closed:
                return
            self._closed = True
            for watchdog in (self._watchdog, self._holder_watchdog, self._first):
                if watchdog is not None:
                    close_stdin(watchdog)
            self._watchdog = self._holder_watchdog = self._first = None
            container = getattr(self, "_container", None)
            if container is not None:
                _retried(container.kill, docker.errors.APIError)  # 409: it has stopped already
                _retried(lambda: container.wait(timeout=30))
            cleanups, self._cleanups = self._cleanups, []
            self._removals.submit(lambda: _undo(cleanups))
            self._ended(self)

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
        workdir = self._path(cwd or WORKSPACE)
        started = time.monotonic()
        first, self._first = self._first, None
        if first is not None:
            out, exit_code = self._first_command(first, command, workdir, stdin or b"", started + timeout)
            ended = exit_code is None
        else:
            out, exit_code = self._docker_exec(command, workdir, stdin or b"", started + timeout)
            ended = False
        duration = time.monotonic() - started
        if out.timed_out:
            self._kill_all()
            return ExecResult(None, out.stdout, out.stderr, duration, timed_out=True, truncated=out.truncated)
        if ended:  # the container's first process ended under the command
            oom = self._restart_ended()
            return ExecResult(None, out.stdout, out.stderr, duration, oom=oom, truncated=out.truncated)
        if exit_code == _KILLED and self._oom_killed():
            return ExecResult(None, out.stdout, out.stderr, duration, oom=True, truncated=out.truncated)
        full = exit_code != 0 and self._workspace_full()
        return ExecResult(
            exit_code, out.stdout, out.stderr, duration, truncated=out.truncated, disk_full=full
        )

    def _first_command(
        self, output: Any, command: Sequence[str], workdir: str, stdin: bytes, deadline: float
    ) -> tuple[_Output, int | None]:
        """Run `command` as the container's first process's one command (`FILL_THEN_WATCH`):
        no `docker exec`, whose start costs the runtime a process of its own, for the run
        that matters most, the agent's. It is what an exec gives: the agent user (the
        container's), `env -i`'s environment, `workdir`, exactly `stdin` then its end, both
        streams capped, the exit status. The status comes after a marker with a nonce on
        both streams, so neither stream's last bytes are lost and the command cannot print a
        status of its own; the exit code is None when the first process ended first (the
        command killed it, or the kernel's OOM killer did).

        The container stays watched meanwhile: once `head` has passed the command its input,
        a `cat` reads the rest of the container's stdin (through fd 3: a background job's
        own stdin is /dev/null) and at its end, docdelta gone, kills the first process, which
        ends the container and every process in it."""
        marker = f"docdelta-ran-{uuid.uuid4().hex}".encode()
        watch = "{ cat <&3; kill -9 $$; } >/dev/null 2>&1 &"
        feed = f"{{ head -c {len(stdin)}; {watch} }}" if stdin else f"{{ {watch} }}"
        quoted = " ".join(shlex.quote(arg) for arg in command)
        script = (
            f"exec 3<&0; if cd -- {shlex.quote(workdir)}; then {feed} | {quoted} 3<&-; s=$?; "
            f"else s={_NO_CWD}; fi; "
            f"printf '%s %s\n' {marker.decode()} $s; printf '%s %s\n' {marker.decode()} $s >&2"
        )
        try:
            return _converse(
                raw_socket(self._watchdog),
                raw_socket(output),
                _printf_line(script) + stdin,
                marker,
                deadline,
                self._spec.max_output_bytes,
            )
        finally:
            close_stdin(output)

    def _docker_exec(
        self, command: Sequence[str], workdir: str, stdin: bytes, deadline: float
    ) -> tuple[_Output, int | None]:
        """Run `command` with `docker exec`: every exec after the first."""
        api = self._client.api
        exec_id = api.exec_create(
            self._container.id,
            command,
            stdin=True,
            stdout=True,
            stderr=True,
            workdir=workdir,
            user=AGENT_USER,
        )["Id"]
        stream = api.exec_start(exec_id, socket=True)
        sock = raw_socket(stream)
        try:
            out = _pump(sock, stdin, deadline, self._spec.max_output_bytes)
        finally:
            sock.close()
        return out, (None if out.timed_out else self._exit_code(exec_id))

    def _restart_ended(self) -> bool:
        """The container's first process ended under its command (the command killed every
        process it could, or the kernel's OOM killer took the first process), so the
        container did, and its workspace with it: no holder had it mounted. Start it again
        as a timeout does, so later execs run and fail on the missing files the way they do
        when the agent deletes them (not on a stopped container); True when the OOM killer
        was why."""
        self._check_open()  # closed meanwhile (Ctrl-C): that is why, and there is nothing to keep
        self._container.reload()
        oom = bool(self._container.attrs["State"].get("OOMKilled"))
        self._kill_all()
        return oom

    def _workspace_full(self) -> bool:
        """True when the workspace quota has less than DISK_FULL_MARGIN left (asked only
        after a failed process: a full disk is why it may have failed)."""
        probe = self._container.exec_run(["df", "-Pk", VOLUME_ROOT], user=AGENT_USER).output.decode()
        fields = probe.splitlines()[-1].split() if probe.strip() else []
        return len(fields) >= 4 and fields[3].isdigit() and int(fields[3]) * 1024 < DISK_FULL_MARGIN

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
        self._hold_workspace()
        try:
            self._container.kill()
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: it has ended already (its first process did)
                raise
        self._container.wait(timeout=30)
        self._fill(self._start(), EMPTY_ARCHIVE)
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
            stream, stat = self._container.get_archive(full)
        except docker.errors.NotFound:
            raise SandboxError(
                f"{full} does not exist in sandbox docdelta-{self.run_id}",
                hint="check the path; relative paths are under the workspace",
            ) from None
        # The agent may have made it a symlink (to a host-looking path, or to a huge file) or
        # a huge file: refused from the archive's stat, before a byte of it is read.
        if stat.get("linkTarget"):
            raise SandboxError(f"{full} is a symlink; refused", hint="the agent must write a regular file")
        if int(stat.get("size", 0)) > MAX_READ_BYTES:
            raise SandboxError(
                f"{full} is {stat.get('size')} bytes, over the {MAX_READ_BYTES}-byte limit for files "
                "docdelta reads from a sandbox",
                hint="the agent must write a smaller file",
            )
        raw = bytearray()
        for chunk in stream:
            raw += chunk
            if len(raw) > MAX_READ_BYTES + 64 * 1024:  # the tar framing around the file
                raise SandboxError(f"{full} grew past the read limit while it was read", hint="retry")
        with tarfile.open(fileobj=io.BytesIO(bytes(raw))) as archive:
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


def _retried(step: Callable[[], object], *ignored: type[Exception]) -> None:
    """One step of ending a run, once more after a daemon error (e.g. the daemon still
    tearing the container down); an error of `ignored` and a missing object (gone already)
    end it quietly."""
    quiet: tuple[type[Exception], ...] = (docker.errors.NotFound, *ignored)
    for attempt in (1, 2):
        try:
            step()
        except quiet:
            return
        except (docker.errors.APIError, requests.exceptions.RequestException):
            if attempt == 2:
                return
            time.sleep(0.2)
        else:
            return


def _undo(cleanups: Sequence[Callable[[], None]]) -> None:
    """Undo a run's creation in reverse order; each step runs even when another fails (what
    one leaves, `gc` removes once this process is gone)."""
    for cleanup in reversed(cleanups):
        with suppress(Exception):
            _retried(cleanup)


_PENDING_REMOVALS = 4
"""Closed runs whose removal may wait at once; past that a close waits for its own, so a
backlog never holds many runs' workspaces (tmpfs: memory) on the engine."""


class _Removals:
    """Closed runs' objects removed on worker threads, off the runs' path. The threads are
    the pool's, which Python joins at exit: a process that ends without closing its provider
    (an uncaught Ctrl-C) still removes what it submitted before it exits; a SIGKILL leaves
    it to the next provider's `gc`. One per process (`REMOVALS`): the backlog bound then
    holds however many providers the process makes, and one `drain` waits for them all."""

    def __init__(self) -> None:
        self._pool = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="docker-removal")
        self._slots = threading.BoundedSemaphore(_PENDING_REMOVALS)
        self._pending: set[futures.Future[None]] = set()
        self._lock = threading.Lock()

    def submit(self, removal: Callable[[], None]) -> None:
        self._slots.acquire()

        def run() -> None:
            try:
                removal()
            finally:
                self._slots.release()

        try:
            future = self._pool.submit(run)
        except RuntimeError:  # the interpreter is shutting down: remove it here and now
            run()
            return
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: futures.Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def drain(self) -> None:
        """Return once every removal submitted so far has finished."""
        with self._lock:
            pending = list(self._pending)
        futures.wait(pending)


REMOVALS = _Removals()
"""The process's removal queue (see `_Removals`)."""


def gc(client: DockerClient, *, dry_run: bool = False) -> list[str]:
    """Remove the containers, networks and volumes of runs whose docdelta process is gone
    (their owner label names this host and a process that no longer exists); returns their
    names. Objects of live runs, of other hosts, or without an owner are never touched.
    Containers go first: they hold the rest."""
    found: list[str] = []
    label: dict[str, str | list[str] | bool] = {"label": OWNER_LABEL}
    # Other docdelta processes end their runs meanwhile: a container they remove between the
    # listing and its inspect is skipped (`ignore_removed`), not a crash of this run.
    kinds: list[tuple[Callable[[], list[Any]], Callable[[Any], None]]] = [
        (
            lambda: client.containers.list(all=True, filters=label, ignore_removed=True),
            lambda c: c.remove(force=True, v=True),
        ),
        (lambda: client.networks.list(filters=label), lambda n: n.remove()),
        (lambda: client.volumes.list(filters=label), lambda v: v.remove(force=True)),
    ]
    for listing, remove in kinds:
        for thing in listing():
            if not owner_gone(_owner(thing)):
                continue
            found.append(str(thing.name))
            if not dry_run:
                with suppress(docker.errors.NotFound, docker.errors.APIError):
                    remove(thing)
    return found


def _owner(thing: Any) -> str:
    labels = thing.attrs.get("Labels") or (thing.attrs.get("Config") or {}).get("Labels") or {}
    return str(labels.get(OWNER_LABEL, ""))


# ------------------------------------------------------------------ helpers
def _owned(info: tarfile.TarInfo, kind: bytes, mode: int) -> tarfile.TarInfo:
    info.type = kind
    info.mode = mode
    info.uid = info.gid = AGENT_UID
    info.uname = info.gname = "agent"
    info.mtime = int(time.time())
    return info


_KEPT_ARCHIVES = 8
"""Checkout archives a provider keeps: a matrix's conditions, with room for grading copies."""


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


_FILL_REPORT_BYTES = 64 * 1024
"""What of the unpacking's output is kept: its report and the start of tar's errors."""


def _unpack(feed: socket.socket, output: socket.socket, archive: bytes) -> tuple[int | None, bytes]:
    """Send `archive`, after a line with its size, on `feed` (the container's stdin) while
    reading `output` (its stdout and stderr) until `FILL_THEN_WATCH` reports: tar's exit
    status and its stderr; None when the output ended first. Both at once, so a tar that
    writes errors faster than the engine buffers them cannot stall the send. `feed` is never
    half-closed: it stays the container's watchdog."""
    out = _Output(_FILL_REPORT_BYTES)
    pending = memoryview(f"{len(archive)}\n".encode() + archive)
    feed.setblocking(False)
    output.setblocking(False)
    raw = bytearray()
    while True:
        readable, writable, _ = select.select([output], [feed] if pending else [], [], FILL_IDLE_S)
        if not readable and not writable:
            raise InfraError(f"the engine made no progress filling a workspace for {FILL_IDLE_S:.0f} s")
        if writable:
            pending = _send(feed, pending)
        if readable:
            try:
                chunk = output.recv(65536)
            except BlockingIOError:
                continue
            if not chunk:
                return None, out.stderr
            raw += chunk
            for stream, data in _frames(raw):
                out.add(stream, data)
            status = _filled(out.stdout)
            if status is not None:
                return (int(status) if status.isdigit() else None), out.stderr


def _printf_line(script: str) -> bytes:
    """`script` as one line that `printf` turns back into it (`FILL_THEN_WATCH` reads it):
    its newlines as octal escapes, its backslashes and percent signs escaped."""
    escaped = script.replace("\\", "\\\\").replace("%", "%%").replace("\n", "\\012")
    return escaped.encode() + b"\n"


class _Marked:
    """A command's two streams up to the marker line `_first_command`'s script prints on
    each after it: what comes before goes to the capped output, the status is read off the
    marker. The bytes a marker may have begun in are held back until the next frame says."""

    def __init__(self, cap: int, marker: bytes) -> None:
        self.out = _Output(cap)
        self.marker = marker
        self.held = {1: bytearray(), 2: bytearray()}
        self.status: dict[int, bytes] = {}

    def add(self, stream: int, data: bytes) -> None:
        held = self.held.get(stream)
        if held is None or stream in self.status:
            return  # a stream past its marker: the command's leftovers, not its output
        held += data
        at = held.find(self.marker)
        if at < 0:
            keep = max(len(held) - len(self.marker) + 1, 0)
            self.out.add(stream, bytes(held[:keep]))
            del held[:keep]
            return
        end = held.find(b"\n", at)
        if end >= 0:
            self.out.add(stream, bytes(held[:at]))
            self.status[stream] = bytes(held[at + len(self.marker) : end]).strip()
            held.clear()

    def ended(self) -> _Output:
        """The output once no marker can come any more (a timeout, the first process's end):
        what was held back was the command's."""
        for stream, held in self.held.items():
            self.out.add(stream, bytes(held))
            held.clear()
        return self.out

    @property
    def done(self) -> bool:
        return len(self.status) == len(self.held)

    def exit_code(self) -> int | None:
        code = self.status.get(1, b"")
        return int(code) if code.isdigit() else None


def _converse(
    feed: socket.socket, output: socket.socket, sent: bytes, marker: bytes, deadline: float, cap: int
) -> tuple[_Output, int | None]:
    """Send `sent` on `feed` (the container's stdin, never half-closed: it stays the
    container's watchdog) while reading `output` (its stdout and stderr) until both streams
    carried `marker`'s line: the output and the exit status. The status is None when the
    output ended first; `timed_out` is set at the deadline."""
    marked = _Marked(cap, marker)
    pending = memoryview(sent)
    raw = bytearray()
    while not marked.done:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            marked.out.timed_out = True
            return marked.ended(), None
        readable, writable, _ = select.select([output], [feed] if pending else [], [], remaining)
        if writable:
            pending = _send(feed, pending)
        if readable:
            try:
                chunk = output.recv(65536)
            except BlockingIOError:
                continue
            if not chunk:
                return marked.ended(), None
            raw += chunk
            for stream, data in _frames(raw):
                marked.add(stream, data)
    return marked.out, marked.exit_code()


def _send(sock: socket.socket, pending: memoryview) -> memoryview:
    """What is left of `pending` after one non-blocking send; nothing once the peer is gone."""
    try:
        return pending[sock.send(pending[: 1 << 20]) :]
    except BlockingIOError:
        return pending
    except (BrokenPipeError, ConnectionResetError):
        return pending[:0]  # the container ended: its output says how


def _filled(stdout: bytes) -> bytes | None:
    """The status `FILL_THEN_WATCH` reported on `stdout`, once its line is complete."""
    _, marker, tail = stdout.partition(f"{FILLED} ".encode())
    status, newline, _ = tail.partition(b"\n")
    return status if marker and newline else None


def _frames(buf: bytearray) -> Iterator[tuple[int, bytes]]:
    """Complete frames of Docker's multiplexed stream (8-byte header: stream id, size)."""
    while len(buf) >= 8:
        stream, size = struct.unpack(">BxxxL", buf[:8])
        if len(buf) < 8 + size:
            return
        yield stream, bytes(buf[8 : 8 + size])
        del buf[: 8 + size]


def _pump(sock: socket.socket, stdin: bytes, deadline: float, cap: int) -> _Output:  # noqa: C901 - one select loop
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
