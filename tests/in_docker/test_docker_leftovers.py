"""Every exit path removes what a run created: success, failure, timeout, Ctrl-C; and
`gc` sweeps what a killed process could not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import leftovers
from toolchain import CheckoutFactory

from docdelta.errors import SandboxError
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider, gc
from docdelta.sandbox.dockerapi import LABEL, OWNER_LABEL, RUN_LABEL, owner_id

pytestmark = pytest.mark.docker


@pytest.fixture
def checkout(tmp_checkout: CheckoutFactory) -> Path:
    return tmp_checkout({"README.md": "hi\n"})


def test_success_failure_and_timeout_leave_nothing(client: Any, base_image: str, checkout: Path) -> None:
    provider = DockerProvider(client, base_image)
    run_ids = []
    with provider.create(checkout, SandboxSpec()) as ok:
        run_ids.append(ok.run_id)
        assert ok.exec(["true"]).exit_code == 0
        assert sorted(leftovers(client, ok.run_id)) == [f"docdelta-{ok.run_id}"] * 2, (
            "a live sandbox is visible by its labels: its container and volume, no holder"
        )
    with pytest.raises(RuntimeError), provider.create(checkout, SandboxSpec()) as failing:
        run_ids.append(failing.run_id)
        raise RuntimeError("the agent adapter crashed")
    with provider.create(checkout, SandboxSpec()) as slow:
        run_ids.append(slow.run_id)
        assert slow.exec(["sleep", "30"], timeout=0.5).timed_out
        assert f"docdelta-{slow.run_id}-disk" in leftovers(client, slow.run_id), "the restart's holder"
        assert slow.exec(["cat", "README.md"]).stdout == b"hi\n", "the workspace outlived the restart"
    provider.close()  # removal is off the run's path; closing the provider waits for it
    assert {run: leftovers(client, run) for run in run_ids} == {run: [] for run in run_ids}


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import docker
    from docdelta.sandbox.base import SandboxSpec
    from docdelta.sandbox.docker import DockerProvider
    with DockerProvider(docker.from_env(), sys.argv[1]).create(Path(sys.argv[2]), SandboxSpec()) as sb:
        print(sb.run_id, flush=True)
        sb.exec(["sh", "-c", "echo sleeping; exec sleep 60"])
    """
)


GC = (
    "import json, sys, docker\n"
    "from docdelta.sandbox.docker import gc\n"
    "print(json.dumps(gc(docker.from_env(), dry_run=sys.argv[1] == 'dry')))"
)


def _on_host(host: str | None, argv: list[str]) -> list[str]:
    """`argv` as a process of the host name `host` (a UTS namespace of its own; as is without
    one): what its runs' owner labels name, and the only runs its `gc` counts as its host's."""
    if host is None:
        return argv
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv]


def _gc_on(host: str, *, dry_run: bool) -> list[str]:
    done = subprocess.run(
        _on_host(host, [sys.executable, "-c", GC, "dry" if dry_run else "wet"]),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    names: list[str] = json.loads(done.stdout)
    return names


def _start_child(
    base_image: str, checkout: Path, host: str | None = None
) -> tuple[subprocess.Popen[str], str]:
    argv = _on_host(host, [sys.executable, "-c", CHILD, base_image, str(checkout)])
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def _printed(client: Any, run_id: str, line: bytes) -> None:
    """Block until the run's container has printed `line`. A sandbox's first exec (the
    agent's) is its container's first process's command, so what it prints is in the
    container's log, which `follow` replays from its start: a line printed first is not missed."""
    logs = client.containers.get(f"docdelta-{run_id}").logs(stream=True, follow=True)
    try:
        next(chunk for chunk in logs if line in chunk)
    finally:
        logs.close()


def test_ctrl_c_removes_the_run(client: Any, base_image: str, checkout: Path) -> None:
    child, run_id = _start_child(base_image, checkout)
    _printed(client, run_id, b"sleeping\n")  # Ctrl-C lands mid-exec, not before it
    assert leftovers(client, run_id)
    os.kill(child.pid, signal.SIGINT)
    child.wait()  # the child removes its container, network and volume before it exits
    assert child.returncode != 0
    assert leftovers(client, run_id) == []


def test_gc_removes_what_a_killed_run_left_and_spares_live_runs(
    client: Any, base_image: str, checkout: Path
) -> None:
    """The runs and the sweeps happen on a host name of this test's own, so the `gc` of
    every other docdelta on this engine (each provider sweeps when it starts) counts the
    killed run as another host's and leaves it to this test's sweeps."""
    host = f"docdelta-gc-{uuid.uuid4().hex[:8]}"
    live, live_id = _start_child(base_image, checkout, host)
    child, run_id = _start_child(base_image, checkout, host)
    child.kill()  # SIGKILL: no cleanup can run
    child.wait(timeout=30)
    try:
        left = leftovers(client, run_id)
        assert len(left) == 2, "a killed run leaves its container and volume"
        assert set(left) <= set(_gc_on(host, dry_run=True)), "a dry run names them"
        assert not set(left) & set(gc(client)), "a sweep from another host spares them"
        assert len(leftovers(client, run_id)) == 2, "and a dry run removes nothing"
        removed = _gc_on(host, dry_run=False)
        assert sorted(removed) == sorted(left), "its own host's sweep removes them, and only them"
        assert leftovers(client, run_id) == []
        assert len(leftovers(client, live_id)) == 2, "a live run is never removed"
    finally:
        live.kill()
        live.wait(timeout=30)
    _gc_on(host, dry_run=False)


def test_gc_survives_a_container_another_process_removes_while_it_lists(client: Any, base_image: str) -> None:
    """Every provider starts with `gc`, while other docdelta processes on the engine finish
    runs: a container listed and then removed before it was inspected must not crash the
    run with a traceback (it did, 1 run in 12, when other helpers' runs ended alongside)."""
    run_id = uuid.uuid4().hex[:12]
    labels = {LABEL: "1", RUN_LABEL: run_id, OWNER_LABEL: owner_id()}  # a live owner: gc spares it
    doomed = client.containers.create(base_image, "true", labels=labels)
    inspect = client.api.inspect_container

    def removed_first(container: Any, *args: Any, **kwargs: Any) -> Any:
        """The other process's removal, landing exactly between the listing and the inspect."""
        if container == doomed.id:
            client.api.remove_container(doomed.id, force=True, v=True)
        return inspect(container, *args, **kwargs)

    client.api.inspect_container = removed_first
    try:
        removed = gc(client)
    finally:
        client.api.inspect_container = inspect
    assert doomed.name not in removed
    assert leftovers(client, run_id) == []


def test_closing_the_provider_ends_a_run_its_caller_dropped(
    client: Any, base_image: str, checkout: Path
) -> None:
    provider = DockerProvider(client, base_image)
    run_id = provider.create(checkout, SandboxSpec()).run_id  # dropped unclosed
    assert leftovers(client, run_id), "the dropped run is still there"
    provider.close()
    assert leftovers(client, run_id) == []
    with pytest.raises(SandboxError, match="closed"):
        provider.create(checkout, SandboxSpec())
