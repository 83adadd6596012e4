"""Hardening and limits of the Docker sandbox, observed from inside the container and
through the command agent: a memory hog is recorded `oom`, a fork bomb and an infinite
loop `timeout`, and the next run in the same sandbox works normally."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from toolchain import CheckoutFactory

from docdelta.agents.base import AgentContext
from docdelta.agents.command import CommandAgent
from docdelta.agents.models import RunStatus
from docdelta.errors import SandboxError
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider, DockerSandbox

pytestmark = pytest.mark.docker

HOG_CODE = "x = []\nwhile True: x.append(bytearray(10**6))"
HOG = f"python3 -c {shlex.quote(HOG_CODE)}"
# Every process forks forever and shrugs off failed forks: only the pids limit holds it.
FORK_BOMB_CODE = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
FORK_BOMB = f"python3 -c {shlex.quote(FORK_BOMB_CODE)}"
LOOP = "python3 -c 'while True: pass'"


@pytest.fixture(scope="module")
def sandbox(
    client: Any, base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DockerSandbox]:
    checkout = tmp_path_factory.mktemp("limits") / "repo"
    checkout.mkdir()
    (checkout / "kept.txt").write_text("kept\n")
    spec = SandboxSpec(memory_mb=128, pids=64, cpus=0.5)
    with DockerProvider(client, base_image).create(checkout, spec) as made:
        yield made


def test_runs_unprivileged_read_only_and_limited(sandbox: DockerSandbox, client: Any) -> None:
    out = sandbox.exec(["sh", "-c", "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; touch /etc/x"])
    assert out.stdout.decode().split() == ["1000", "CapEff:", "0000000000000000", "NoNewPrivs:", "1"]
    assert b"Read-only file system" in out.stderr
    host = client.api.inspect_container(f"docdelta-{sandbox.run_id}")["HostConfig"]
    assert (host["Memory"], host["PidsLimit"], host["NanoCpus"]) == (128 * 2**20, 64, 5 * 10**8)
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
    assert sandbox.isolation == "docker-none"


@pytest.mark.parametrize(
    ("command", "status", "timeout"),
    [(HOG, RunStatus.oom, 60.0), (FORK_BOMB, RunStatus.timeout, 3.0), (LOOP, RunStatus.timeout, 2.0)],
    ids=["memory-hog", "fork-bomb", "infinite-loop"],
)
def test_runaway_agents_are_contained_recorded_and_the_next_run_is_fine(
    sandbox: DockerSandbox, command: str, status: RunStatus, timeout: float
) -> None:
    outcome = CommandAgent(command).run("go", sandbox, AgentContext(seed=1, timeout_s=timeout))
    assert outcome.status is status
    after = sandbox.exec(
        [
            "sh",
            "-c",
            # /proc, not ps: the base image has no ps (an empty listing would count as none)
            "cat kept.txt; cat /proc/[0-9]*/comm | grep -cv -e '^cat$' -e '^sh$' -e '^grep$' -e init",
        ]
    )
    assert after.stdout == b"kept\n0\n", "the workspace survives and no runaway process is left"


def test_a_fresh_sandbox_is_not_affected_by_a_closed_one(
    client: Any, base_image: str, tmp_checkout: CheckoutFactory
) -> None:
    checkout: Path = tmp_checkout({"a.txt": "a\n"})
    with DockerProvider(client, base_image).create(checkout, SandboxSpec(memory_mb=128)) as sb:
        assert sb.exec(["python3", "-c", HOG_CODE]).oom
    with DockerProvider(client, base_image).create(checkout, SandboxSpec()) as sb:
        result = sb.exec(["cat", "a.txt"])
        assert (result.exit_code, result.stdout, result.oom) == (0, b"a\n", False)


# ---------------------------------------------------------- what the agent writes
@pytest.fixture(scope="module")
def small_disk(
    client: Any, base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DockerSandbox]:
    checkout = tmp_path_factory.mktemp("writes") / "repo"
    checkout.mkdir()
    (checkout / "kept.txt").write_text("kept\n")
    with DockerProvider(client, base_image).create(checkout, SandboxSpec(workspace_mb=32)) as made:
        yield made


def test_filling_the_workspace_stops_at_its_quota_with_a_clear_status(small_disk: DockerSandbox) -> None:
    agent = CommandAgent("sh -c 'head -c 100000000 /dev/zero > big.bin'")
    outcome, result = agent.execute("fill the disk", small_disk, AgentContext(seed=1, timeout_s=60))
    assert result.disk_full and outcome.status is RunStatus.disk_full
    assert b"No space left" in result.stderr
    size = small_disk.exec(["stat", "-c", "%s", "big.bin"]).stdout
    assert int(size) <= 32 * 1024 * 1024, "the write stopped at the quota, not on the host's disk"
    small_disk.exec(["rm", "big.bin"])
    assert small_disk.exec(["cat", "kept.txt"]).stdout == b"kept\n"


def test_files_docdelta_reads_back_are_bounded_and_never_symlinks(small_disk: DockerSandbox) -> None:
    made = small_disk.exec(
        ["sh", "-c", "ln -sf /etc/passwd metrics.json && head -c 17000000 /dev/zero > huge.json"]
    )
    assert made.exit_code == 0, made.stderr
    with pytest.raises(SandboxError, match="symlink"):
        small_disk.read_file("metrics.json")
    with pytest.raises(SandboxError, match="over the"):
        small_disk.read_file("huge.json")
    small_disk.exec(["rm", "huge.json", "metrics.json"])


def test_the_container_log_cannot_fill_the_hosts_disk(small_disk: DockerSandbox, client: Any) -> None:
    # The container's first process's stdout is its Docker log: 5 MB written there is capped.
    flood = small_disk.exec(["sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' x > /proc/1/fd/1"])
    assert flood.exit_code == 0, flood.stderr
    logged = client.containers.get(f"docdelta-{small_disk.run_id}").logs()
    assert len(logged) <= 1024 * 1024


def test_a_checkout_larger_than_the_workspace_quota_is_refused_saying_why(
    client: Any, base_image: str, tmp_path: Path
) -> None:
    checkout = tmp_path / "repo"
    checkout.mkdir()
    (checkout / "big.bin").write_bytes(bytes(3 * 2**20))
    with pytest.raises(SandboxError, match="workspace_mb") as refused:
        DockerProvider(client, base_image).create(checkout, SandboxSpec(workspace_mb=1))
    assert "repo/big.bin" in str(refused.value), "tar names the file that did not fit"


def test_a_command_that_kills_every_process_it_can_ends_only_its_own_run(
    client: Any, base_image: str, tmp_checkout: CheckoutFactory
) -> None:
    """`kill -9 -1` from the agent takes its container's first process, so the container and
    its workspace, with it: the command is reported killed (not hung until its timeout) and
    the next exec still runs, in a started-again container, where the files are gone."""
    checkout: Path = tmp_checkout({"a.txt": "a\n"})
    with DockerProvider(client, base_image).create(checkout, SandboxSpec()) as sb:
        killed = sb.exec(["sh", "-c", "echo before; kill -9 -1; sleep 30"], timeout=600)
        assert (killed.exit_code, killed.stdout, killed.timed_out) == (None, b"before\n", False)
        after = sb.exec(["sh", "-c", "cat a.txt; echo answered"], cwd="/")
        assert after.stdout == b"answered\n" and b"a.txt" in after.stderr
