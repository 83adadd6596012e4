"""The docker sandbox runs on whatever engine DOCKER_HOST names.

The test starts a second dockerd of its own, reachable only through its own Unix socket:
its own network namespace, data root, exec root, pidfile and cgroup parent, no default bridge and no iptables
or masquerading rules (the runs here need no network), so it shares nothing with the main
engine. The base image goes in with `save` from the main engine and `load` into the second.
A small matrix then runs with DOCKER_HOST pointing at the second engine: its image build,
containers and volumes are made there (its event log shows them) and none on the main
engine, and `docdelta gc` with the same DOCKER_HOST sweeps the second engine. At the end
the second engine is stopped and its directories are removed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import run_args, saved_results
from gitrepo import GitRepo

from docdelta.agents.models import RunStatus
from docdelta.errors import ExitCode
from docdelta.sandbox.dockerapi import LABEL, OWNER_LABEL

pytestmark = pytest.mark.docker

DOCKERD = shutil.which("dockerd") or "/usr/sbin/dockerd"
READY = "API listen on"
"""What dockerd logs once its socket serves the API: the test waits for this line."""


@dataclass(frozen=True)
class Engine:
    host: str
    """DOCKER_HOST of the second engine (unix://...)."""
    client: Any


def _start_dockerd(root: Path) -> subprocess.Popen[str]:
    """Start the second engine and return once it serves its API (it says so in its log);
    the rest of its log is drained to `root/dockerd.log` so the daemon never blocks on it."""
    argv = [
        # Its own network namespace: a dockerd started with `--bridge none` deletes the host's
        # `docker0` (it takes the default bridge for its own), which cut the main engine's
        # default bridge out from under every later test. unshare execs dockerd (same pid).
        "unshare", "--net", "--",
        DOCKERD,
        "--host", f"unix://{root}/docker.sock",
        "--data-root", str(root / "data"),
        "--exec-root", str(root / "exec"),
        "--pidfile", str(root / "dockerd.pid"),
        "--cgroup-parent", f"docdelta-test-{root.name}",
        "--bridge", "none",
        "--iptables=false",
        "--ip-masq=false",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    stderr = proc.stderr
    log = []
    for line in stderr:
        log.append(line)
        if READY in line:
            break
    else:
        pytest.fail(f"the second dockerd did not start: {''.join(log[-20:])}")

    def drain() -> None:
        with (root / "dockerd.log").open("w") as out:
            shutil.copyfileobj(stderr, out)

    threading.Thread(target=drain, daemon=True).start()
    return proc


@pytest.fixture
def second_engine(client: Any, base_image: str) -> Iterator[Engine]:
    if os.geteuid() != 0 or not os.path.exists(DOCKERD):
        why = f"a second engine needs root and {DOCKERD}"
        if os.environ.get("DOCDELTA_REQUIRE_DOCKER") == "1":  # CI has both: never skipped there
            pytest.fail(f"DOCDELTA_REQUIRE_DOCKER=1 but {why}", pytrace=False)
        pytest.skip(why)
    import docker  # noqa: PLC0415 - only when a docker test runs

    # A short path: a Unix socket's path is limited to 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="dd-engine-", dir="/tmp"))
    # The host's own interfaces and the main engine's docker0; a user network's `br-*` bridge
    # and a container's `veth*` come and go with other tests running beside this one.
    bridges = sorted(
        p.name for p in Path("/sys/class/net").iterdir() if not p.name.startswith(("veth", "br-"))
    )
    proc = _start_dockerd(root)
    try:
        second = docker.DockerClient(base_url=f"unix://{root}/docker.sock")
        assert second.info()["DockerRootDir"] == str(root / "data"), "the client reached the second engine"
        with tempfile.TemporaryFile() as archive:
            for chunk in client.api.get_image(base_image):  # saved by this name, so loaded with it
                archive.write(chunk)
            archive.seek(0)
            second.images.load(archive)
        # Present under its name, so nothing on the second engine ever tries to pull it.
        assert second.images.get(base_image).id == client.images.get(base_image).id
        yield Engine(host=f"unix://{root}/docker.sock", client=second)
        second.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=120) == 0, "the second engine stopped cleanly"
        for mount in reversed(Path("/proc/self/mounts").read_text().splitlines()):
            where = mount.split()[1]
            if where.startswith(str(root)):
                subprocess.run(["umount", "-l", where], check=False)
        shutil.rmtree(root)
        for cgroup in _cgroup_parents(root):  # dockerd leaves them, empty, in every hierarchy
            cgroup.rmdir()
    assert not root.exists() and not Path(f"/proc/{proc.pid}").exists()
    assert _cgroup_parents(root) == []
    # The main engine's network is untouched: its `docker0` was once deleted by this daemon.
    assert sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name in bridges) == bridges


def _cgroup_parents(root: Path) -> list[Path]:
    """The second engine's cgroup parent in each hierarchy (v1: one per controller, v2: one)."""
    cgroups, name = Path("/sys/fs/cgroup"), f"docdelta-test-{root.name}"
    return [*cgroups.glob(name), *cgroups.glob(f"*/{name}")]


def _project(tmp_path: Path, base_image: str) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    task = 'id: quick\nprompt: "How do I run the tests?"\ngold:\n  commands: ["make check"]\nreviewed: true\n'
    config = yaml.safe_dump({"docker": {"base": base_image}})
    repo.commit({"AGENTS.md": "# Agents\n", ".docdelta.yml": config, ".docdelta/tasks/quick.yaml": task})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    return repo


def _owned_events(client: Any, since: int, pid: int) -> list[str]:
    """Every engine event (container, volume, network, image build) of objects the docdelta
    process `pid` owns, from `since` until now."""
    prefix = f"{socket.gethostname()}/{os.readlink('/proc/self/ns/pid')}/{pid}/"
    events = client.events(since=since, until=int(time.time()) + 1, decode=True, filters={"label": LABEL})
    return [
        f"{e.get('Type')} {e.get('Action')}"
        for e in events
        if (e.get("Actor", {}).get("Attributes", {}) or {}).get(OWNER_LABEL, "").startswith(prefix)
    ]


def test_a_matrix_runs_on_the_engine_docker_host_names_and_gc_follows_it(
    client: Any, base_image: str, second_engine: Engine, tmp_path: Path
) -> None:
    repo = _project(tmp_path, base_image)
    answer = 'print(json.dumps({"answer": "run make check", "commands": ["make check"]}))'
    agent = f"python3 -c 'import json; {answer}'"
    args = run_args(repo, tmp_path / "work", agent, "--sandbox", "docker", "--jobs", "2", "--repeats", "1")
    since = int(time.time()) - 1  # a replay bound for the engines' event logs, not a time budget
    env = {**os.environ, "DOCKER_HOST": second_engine.host}
    cmd = [sys.executable, "-m", "docdelta", *args]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate()
    assert proc.returncode == ExitCode.OK, err
    results = saved_results(tmp_path / "work")
    assert [(r.status, r.isolation) for r in results] == [(RunStatus.ok, "docker-none")] * 3
    on_second = _owned_events(second_engine.client, since, proc.pid)
    assert sum(e == "container start" for e in on_second) >= 3, "each run: its container"
    assert _owned_events(client, since, proc.pid) == [], "nothing of the run touched the main engine"

    # gc with the same DOCKER_HOST sweeps that engine: a volume of a process that is gone.
    gone = subprocess.Popen(["true"])
    gone.wait()
    owner = f"{socket.gethostname()}/{os.readlink('/proc/self/ns/pid')}/{gone.pid}/1"
    labels = {LABEL: "1", OWNER_LABEL: owner}
    left = second_engine.client.volumes.create(f"docdelta-gc-{gone.pid}", labels=labels)
    done = subprocess.run(
        [sys.executable, "-m", "docdelta", "gc"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == ExitCode.OK, done.stderr
    assert left.name in done.stdout.split()
    assert [v.name for v in second_engine.client.volumes.list(filters={"label": LABEL})] == []
