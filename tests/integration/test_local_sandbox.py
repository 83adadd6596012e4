"""What the local providers add to the shared contract: the allowlisted root, confinement of
host-side file access, refusal instead of downgrade, the explicit `none` provider, leftovers."""

from __future__ import annotations

import contextlib
import http.server
import os
import secrets
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import BlockingAgent, agent_processes
from toolchain import PYTHON_TOOLCHAIN, CheckoutFactory

from docdelta.errors import ConfigError, SandboxError
from docdelta.sandbox import ExecResult, SandboxSpec, get_provider, provider_names
from docdelta.sandbox.local import (
    ETC_ALLOWLIST,
    ETC_BOUND,
    INSIDE_WORKSPACE,
    INSTALL_HINT,
    OWNER_FILE,
    ROOT_PREFIX,
    LocalProvider,
    LocalSandbox,
)


@pytest.fixture
def checkout(tmp_checkout: CheckoutFactory) -> Path:
    return tmp_checkout({"README.md": "hello\n"})


@pytest.fixture
def sandbox(tmp_path: Path, checkout: Path) -> Iterator[LocalSandbox]:
    with LocalProvider(root=tmp_path / "sb").create(checkout, SandboxSpec()) as sb:
        assert isinstance(sb, LocalSandbox)
        yield sb


def test_unknown_provider_names_the_known_ones() -> None:
    assert provider_names() == ["docker", "local", "none"]
    with pytest.raises(ConfigError, match="unknown sandbox 'podman'") as err:
        get_provider("podman")
    assert "local" in err.value.hint and "none" in err.value.hint
    with pytest.raises(ConfigError, match="bad options"):
        get_provider("local", colour="red")


def test_the_root_is_an_allowlist(sandbox: LocalSandbox) -> None:
    assert sandbox.isolation == "bwrap" and sandbox.workspace == INSIDE_WORKSPACE
    top = sandbox.exec(["ls", "-A", "/"]).stdout.decode().split()
    assert set(top) <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc", "dev", "etc"} | {
        "workspace",
        "home",
        "tmp",
    }
    etc = set(sandbox.exec(["ls", "-A", "/etc"]).stdout.decode().split())
    assert (
        etc <= {*ETC_ALLOWLIST, "passwd", "group", "resolv.conf"}
        and {"passwd", "hosts", "ld.so.cache"} <= etc
    )
    assert sandbox.exec(["cat", "/etc/resolv.conf"]).stdout == b"", "no name servers without network"
    assert sandbox.exec(["ls", "/etc/ssl/private"]).exit_code != 0, "the host's private keys stay out"
    for rel in ETC_BOUND:  # shown from the host, not copied: the same entries, and read-only
        host = sorted(p.name for p in Path("/etc", rel).iterdir())
        assert sandbox.exec(["ls", "-A", f"/etc/{rel}"]).stdout.decode().split() == host
        assert sandbox.exec(["sh", "-c", f"touch /etc/{rel}/x || echo denied"]).stdout == b"denied\n"
    # As root, the agent is nobody on the host (see local._identity); else uid 1000 in a user namespace.
    uid_inside = "65534" if os.geteuid() == 0 else "1000"
    assert f"agent:x:{uid_inside}:".encode() in sandbox.exec(["cat", "/etc/passwd"]).stdout
    who = sandbox.exec(["sh", "-c", "id -u; grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'"])
    uid, caps, pids = who.stdout.decode().split("\n")[:3]
    assert uid == uid_inside and caps.split()[1] == "0" * 16, "an unprivileged uid with no capabilities"
    assert int(pids) <= 5, "its own /proc shows only its own processes (bwrap, sh, ls, grep)"
    denied = sandbox.exec(["sh", "-c", "touch /usr/x || touch /etc/x || mkdir /new || echo denied"])
    assert denied.stdout == b"denied\n", "the system root is read-only"


def test_the_agents_files_belong_to_an_unprivileged_host_user(sandbox: LocalSandbox) -> None:
    assert sandbox.exec(["sh", "-c", "echo mine > made.txt"]).exit_code == 0
    owner = (sandbox.host_workspace / "made.txt").stat().st_uid
    assert owner != 0 and owner == (65534 if os.geteuid() == 0 else os.geteuid())
    sandbox.write_file("from-host.txt", b"x")  # files the host writes stay the agent's to change
    assert sandbox.exec(["sh", "-c", "echo changed > from-host.txt"]).exit_code == 0


def test_host_side_paths_outside_the_sandbox_are_refused(tmp_path: Path, sandbox: LocalSandbox) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (sandbox.host_workspace / "link").symlink_to(outside)
    for bad in ("../../../secret.txt", "/etc/passwd", "/workspace"):
        with pytest.raises(SandboxError, match="outside the sandbox"):
            sandbox.read_file(bad)
    # A link to a host file: refused on the host (a copied workspace), or followed inside the
    # sandbox, where no host file exists (a copy-on-write view is read through an exec).
    with pytest.raises(SandboxError, match=r"outside the sandbox|No such file"):
        sandbox.read_file("link")
    with pytest.raises(SandboxError, match="No such file"):
        sandbox.read_file(str(outside))  # in-sandbox /tmp is the sandbox's own, not the host's
    with pytest.raises(SandboxError, match="outside the sandbox"):
        sandbox.write_file("../../escape.txt", b"x")
    with pytest.raises(SandboxError, match="outside the sandbox"):
        sandbox.exec(["true"], cwd="/")
    assert not (tmp_path / "sb" / "escape.txt").exists()
    sandbox.write_file("/home/agent/.profile", b"ok")  # the private home is the sandbox's own
    assert sandbox.exec(["cat", "/home/agent/.profile"]).stdout == b"ok"


def test_without_bubblewrap_it_refuses_and_never_downgrades(tmp_path: Path) -> None:
    for allow_network in (False, True):
        with pytest.raises(SandboxError, match="needs bubblewrap") as err:
            LocalProvider(
                root=tmp_path / "a", bwrap=str(tmp_path / "no-bwrap-here"), allow_network=allow_network
            )
        assert err.value.hint == INSTALL_HINT and "apt-get install bubblewrap" in err.value.hint


def test_a_bubblewrap_that_cannot_build_a_sandbox_is_refused(tmp_path: Path) -> None:
    # A fake bwrap standing in for a machine whose kernel denies user namespaces.
    fake = tmp_path / "fake-bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(SandboxError, match="No permissions to create new namespace"):
        LocalProvider(root=tmp_path / "a", bwrap=str(fake))


def test_network_other_than_none_needs_allow_network_and_is_recorded(tmp_path: Path, checkout: Path) -> None:
    with pytest.raises(SandboxError, match="'open'"):
        LocalProvider(root=tmp_path / "a").create(checkout, SandboxSpec(network="open"))
    with pytest.raises(SandboxError, match="'gateway'"):
        LocalProvider(root=tmp_path / "a", allow_network=True).create(
            checkout, SandboxSpec(network="gateway")
        )
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with LocalProvider(root=tmp_path / "b", allow_network=True).create(
            checkout, SandboxSpec(network="open")
        ) as sb:
            assert sb.isolation == "bwrap+host-network"
            probe = f"import socket; socket.create_connection(('127.0.0.1', {server.server_port}), timeout=5)"
            assert sb.exec(["python3", "-c", probe]).exit_code == 0
    finally:
        server.shutdown()


def test_the_none_provider_is_explicit_and_recorded(tmp_path: Path, checkout: Path) -> None:
    with get_provider("none", root=tmp_path / "n").create(checkout, SandboxSpec()) as sb:
        assert sb.isolation == "none"
        assert sb.workspace == str((tmp_path / "n" / "slot-0" / "repo").resolve())
        assert sb.exec(["cat", "README.md"]).stdout == b"hello\n"
        assert sb.exec(["sh", "-c", 'echo "$HOME"']).stdout.decode().startswith(str(tmp_path / "n"))


def test_read_only_toolchain_paths_and_env(tmp_path: Path, checkout: Path) -> None:
    tool = tmp_path / "toolchain" / "bin"
    tool.mkdir(parents=True)
    (tool / "mytool").write_text("#!/bin/sh\necho tool says hi\n")
    (tool / "mytool").chmod(0o755)
    provider = LocalProvider(
        root=tmp_path / "sb", ro_paths=[tool.parent], env={"PATH": f"{tool}:/usr/bin:/bin"}
    )
    with provider.create(checkout, SandboxSpec()) as sb:
        assert sb.exec(["sh", "-c", "mytool"]).stdout == b"tool says hi\n"
        assert sb.exec(["sh", "-c", f"touch {tool}/x"]).exit_code != 0, "toolchains are read-only"
        assert sb.exec(["ls", str(tmp_path)]).stdout == b"toolchain\n", (
            "only the named path, not its siblings"
        )


def test_a_detached_grandchild_dies_with_the_pid_namespace(sandbox: LocalSandbox) -> None:
    """The grandchild says it runs before the command answers; once the timed-out exec
    returns, no process of this host has its (unique) command line any more."""
    naptime = f"29.{secrets.randbelow(10**6):06d}"  # marks the grandchild among the host's processes
    script = (
        f"setsid sh -c 'echo up > started.txt; exec sleep {naptime}' & "
        "until [ -s started.txt ]; do sleep 0.01; done; echo started; sleep 30"
    )
    result = sandbox.exec(["sh", "-c", script], timeout=5)
    assert result.timed_out and result.stdout == b"started\n"
    alive = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if cmdline.read_bytes().split(b"\0")[:2] == [b"sleep", naptime.encode()]:
                alive.append(cmdline.parent.name)
    assert alive == [], "the detached grandchild outlived its run"


def test_default_root_is_private_and_slots_are_separate(checkout: Path) -> None:
    a, b = LocalProvider(slot=7), LocalProvider(slot=8)
    try:
        with a.create(checkout, SandboxSpec()) as sa, b.create(checkout, SandboxSpec()) as sbx:
            assert isinstance(sa, LocalSandbox) and isinstance(sbx, LocalSandbox)
            assert sa.workspace == sbx.workspace == INSIDE_WORKSPACE
            assert sa.host_workspace != sbx.host_workspace
            assert a.root.name.startswith(ROOT_PREFIX) and (a.root / OWNER_FILE).read_text().startswith(
                f"{os.getpid()} "
            )
            with pytest.raises(SandboxError, match="already holds a live sandbox"):
                a.create(checkout, SandboxSpec())
        assert not sa.host_workspace.exists()
    finally:
        a.close()
        b.close()
    assert not a.root.exists() and not b.root.exists()


def test_a_killed_runs_private_root_is_swept_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    dead_pid = int(gone.stdout)
    first = LocalProvider()  # a live docdelta's root, stamped with our PID
    stale, foreign = tmp_path / f"{ROOT_PREFIX}stale", tmp_path / f"{ROOT_PREFIX}foreign"
    for root in (stale, foreign):
        (root / "slot-0" / "repo").mkdir(parents=True)
    (stale / OWNER_FILE).write_text(f"{dead_pid} 12345\n")
    second = LocalProvider()
    try:
        assert not stale.exists(), "a root whose owner died is removed"
        assert first.root.exists(), "a root whose owner is alive is left alone"
        assert foreign.exists(), "a directory without an owner stamp is never guessed at"
    finally:
        first.close()
        second.close()


def test_a_stale_slot_from_a_crashed_run_is_replaced(tmp_path: Path, checkout: Path) -> None:
    stale = tmp_path / "sb" / "slot-0" / "repo"
    stale.mkdir(parents=True)
    (stale / "old.txt").write_text("stale")
    stale.chmod(0o500)
    with LocalProvider(root=tmp_path / "sb").create(checkout, SandboxSpec()) as sb:
        assert sb.exec(["ls"]).stdout == b"README.md\n"


def test_close_from_another_thread_kills_a_running_exec_and_everything_it_started(
    tmp_path: Path, checkout: Path
) -> None:
    """With --jobs N, Ctrl-C closes a sandbox while a worker thread waits in its exec: the
    exec must end now (not at its timeout), and only once every process of its PID
    namespace is gone, so none can write into the slot being removed."""
    agent = BlockingAgent(tmp_path / "sync")
    provider = LocalProvider(root=tmp_path / "sb", ro_paths=[*PYTHON_TOOLCHAIN, tmp_path / "sync"])
    sandbox = provider.create(checkout, SandboxSpec())
    assert isinstance(sandbox, LocalSandbox)
    # A setsid daemon that keeps writing into the workspace, beside the blocked agent.
    daemon = f"setsid sh -c 'while :; do echo x >> {INSIDE_WORKSPACE}/log; done' & exec {agent.cmd()}"
    done: list[ExecResult] = []
    worker = threading.Thread(
        target=lambda: done.append(sandbox.exec(["sh", "-c", daemon], stdin=b"Hang", timeout=3600))
    )
    try:
        worker.start()
        agent.wait_running(1)
        sandbox.close()
        worker.join()
        assert done and done[0].exit_code != 0 and not done[0].timed_out
        assert agent_processes(agent.started) == []
        assert not sandbox.slot_dir.exists(), "the slot is removed, whatever the daemon was writing"
    finally:
        provider.close()
        agent.close()
