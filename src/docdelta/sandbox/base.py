"""The Sandbox contract every provider implements (local namespaces, Docker, ...).

Modelled on inspect_ai's sandbox environments: a live sandbox holds one sealed
checkout and offers exec / read_file / write_file plus a lifecycle. Providers are
chosen by name (see `docdelta.sandbox.get_provider`) and all pass one conformance
suite (tests/conformance/).
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field

from docdelta.errors import SandboxError
from docdelta.vocabulary import sha256_hex

if TYPE_CHECKING:
    from docdelta.gateway.models import ModelCall

NetworkMode = Literal["none", "gateway", "open"]
"""none: no network at all; gateway: only the model gateway is reachable;
open: unrestricted (only with an explicit --allow-network, and recorded)."""

DEFAULT_MAX_OUTPUT = 4 * 1024 * 1024
DEFAULT_MEMORY_MB = 2048
DEFAULT_PIDS = 512
DEFAULT_WORKSPACE_MB = 1024
DISK_FULL_MARGIN = 1024 * 1024
"""Less than this left of the workspace quota after a failed exec counts as a full disk."""
AGENT_UID = 1000
"""The agent's uid inside every sandbox: the user every container runs as (the base image
names it `agent`), and the uid bubblewrap maps the agent to in its user namespace."""


@dataclass(frozen=True)
class SandboxSpec:
    """What a run asks of its sandbox. Providers ignore limits they cannot enforce
    and say so in `Sandbox.isolation`, which is recorded in every result."""

    network: NetworkMode = "none"
    max_output_bytes: int = DEFAULT_MAX_OUTPUT
    memory_mb: int = DEFAULT_MEMORY_MB
    cpus: float = 1.0
    pids: int = DEFAULT_PIDS
    workspace_mb: int = DEFAULT_WORKSPACE_MB
    """Size quota of the writable workspace (Docker: a size-limited tmpfs volume, which
    also counts against `memory_mb`, the checkout unpacked into it included; local: see
    `sandbox.limits`); a full one is `disk_full`."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Base environment for every exec, merged under the per-exec env. Nothing is
    inherited from the host: the environment is built from scratch."""
    max_cost_usd: float | None = None
    """The run's dollar budget, enforced by the model gateway (gateway mode only)."""
    fingerprints: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Instruction-file fingerprints (docdelta.instructions.audit) the gateway matches requests against."""


@dataclass(frozen=True)
class ExecResult:
    exit_code: int | None
    """None when the process was killed (timeout, OOM)."""
    stdout: bytes
    stderr: bytes
    duration_s: float
    timed_out: bool = False
    oom: bool = False
    truncated: bool = False
    """True when stdout or stderr exceeded the spec's cap and was cut."""
    disk_full: bool = False
    """True when the process failed with the workspace quota used up."""
    pids_limit: bool = False
    """True when the kernel refused the process a new process (the `pids` limit)."""


class ModelTelemetry(Protocol):
    """What a sandbox's model gateway reports: the same telemetry for every agent."""

    def calls(self) -> list[ModelCall]:
        """Every model call forwarded or refused for this run, oldest first."""
        ...

    def budget_exceeded(self) -> bool:
        """True when the gateway refused a call because the run's budget was spent."""
        ...


@dataclass(frozen=True)
class FileContent:
    """A regular file to write into a sandbox: its bytes and permission bits."""

    data: bytes
    mode: int = 0o644


CHANGE_TIMEOUT_S = 120.0
"""Bound on the exec that makes `Sandbox.change_files`' changes: trusted tools on a handful of
files, so only a wedged machine reaches it."""


class Sandbox(ABC):
    """A live sandbox holding one sealed checkout.

    `workspace` is the checkout's path as seen from inside; it is the same for
    every condition and never names one. `tools_dir` is a writable directory
    outside the workspace for adapter files (e.g. the fake agent's script).
    """

    workspace: str
    tools_dir: str
    isolation: str
    gateway: ModelTelemetry | None = None
    """Set by providers that route the agent's model calls through a gateway."""
    phases: Mapping[str, float] = {}
    """Wall seconds of the parts of making this sandbox a provider measures (`create`, `copy`,
    `start`); the runner records them in the run's `PhaseTimings`. Empty: not split."""

    @abstractmethod
    def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = 600.0,
    ) -> ExecResult:
        """Run argv to completion; kill everything it started at the timeout."""

    @abstractmethod
    def read_file(self, path: str) -> bytes:
        """Read a file by its in-sandbox path (relative paths are under `workspace`)."""

    @abstractmethod
    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Write a file by its in-sandbox path, creating parent directories."""

    def change_files(self, write: Mapping[str, FileContent], remove: Sequence[str] = ()) -> None:
        """Remove `remove` and every path of `write` (files, links or whole directories;
        absent ones are fine), then write `write`'s files, creating parent directories.

        For trusted changes made before any untrusted command runs (hidden-test grading's
        tree on top of the sealed checkout): removing first means no write goes through a
        link that was at the path. Raises SandboxError when the removal fails. Providers
        whose every exec has a cost of its own do it in one (the local sandbox's view)."""
        targets = [*remove, *write]
        if targets:
            done = self.exec(["rm", "-rf", "--", *targets], timeout=CHANGE_TIMEOUT_S)
            if done.exit_code != 0:
                why = done.stderr.decode(errors="replace").strip() or f"exit code {done.exit_code}"
                raise SandboxError(f"cannot remove files in the sandbox: {why}", hint="")
        for path, content in write.items():
            self.write_file(path, content.data, mode=content.mode)

    @abstractmethod
    def close(self) -> None:
        """Release everything this sandbox holds; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SandboxProvider(ABC):
    """Creates sandboxes of one kind; may hold shared resources (networks, images)."""

    name: ClassVar[str]

    @abstractmethod
    def create(self, checkout: Path, spec: SandboxSpec) -> Sandbox:
        """Start a sandbox whose workspace holds a copy of `checkout`."""

    def close(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing
        """Release provider-wide resources."""

    def environment(self) -> str:
        """What a command in this provider's sandboxes runs with besides its checkout (the
        image, the toolchain paths and what is at them, the env), as a key. A passed selftest
        is reused only under the same (`Runner.require_selftests`): once the environment
        changes, the hidden tests may no longer run, and the selftest has to show they do."""
        return self.name


def toolchain_identity(kind: str, paths: Sequence[str], env: Mapping[str, str]) -> str:
    """`kind`, `env` and each read-only toolchain path with what is directly in it (name,
    type, inode, size, modification time), hashed. A tool added, removed or rewritten at a
    path or in a directory directly below one (a virtualenv's `bin/` loses `pytest` when
    pytest is uninstalled) changes it, and so does a path recreated or gone. Deeper edits in
    place are not seen: walking a toolchain's tens of thousands of files would cost seconds
    on every run, to save a selftest that costs about as much."""

    def stat(path: str) -> list[int] | str:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError as exc:
            return exc.strerror or "unreadable"
        return [st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns]

    def listing(path: str) -> list[tuple[str, list[int] | str]] | str:
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            return exc.strerror or "unreadable"
        return [(name, stat(os.path.join(path, name))) for name in names]

    shown = {path: [stat(path), listing(path)] for path in paths}
    return sha256_hex(json.dumps([kind, shown, dict(sorted(env.items()))]).encode())


RECORD_SUFFIX = ".sealed.json"


def record_path(dest: Path) -> Path:
    """The record a sealed checkout carries beside it once complete. A sealed checkout never
    changes, so a sandbox may share it as it is (the checkout package writes the record)."""
    return dest.with_name(dest.name + RECORD_SUFFIX)


DEFAULT_IMAGE_BASE = "docdelta-base:latest"
DEFAULT_AGENT_REGISTRY = "ghcr.io/docdelta"
"""Where docdelta's release workflow publishes the agent layers (`agents.images.published_ref`)."""


class DockerImageConfig(BaseModel):
    """The `docker:` section: how to build the environment image the agent runs in.

    Kept here (pydantic only) rather than in sandbox/images.py so reading the config
    never imports the Docker SDK."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    base: str = Field(default=DEFAULT_IMAGE_BASE, description="base image (must hold the agent's runtime)")
    setup: list[str] = Field(
        default=[], description="shell commands run as root, with network, when the image is built"
    )
    extra_ca: Path | None = Field(
        default=None,
        description="PEM bundle added to the image's trust store, for TLS-intercepting proxies",
    )
    agent_registry: str = Field(
        default=DEFAULT_AGENT_REGISTRY,
        description="registry and owner the agent layers are pulled from (docdelta-agent-<agent>:<pin>); "
        "empty: always build them here (npm)",
    )
    image_cache: Path | None = Field(
        default=None,
        description="directory (relative: to the repository root) where the images a run used are kept "
        "as a docker-save tarball and loaded from before any pull or build; persist it with actions/cache",
    )
