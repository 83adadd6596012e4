"""The hostile-agent suite: every sandbox provider must hold against an agent that attacks.

An instruction file from a pull request can make the agent do anything inside its sandbox,
so each test here is an attack (tests/conformance/hostile_agent.py, run in the sandbox)
followed by a check, on the host, that it failed: writes outside the checkout, host Unix
sockets and TCP ports, the gold answers and other runs' files, secrets in the environment,
daemons that outlive the run, notes left in /tmp or in a kernel keyring for the next run.

Each attack is also run once without a sandbox (the explicit `none` provider) where it
must succeed: that proves the probe can see what it looks for, so a pass is not a blind
probe's pass.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from gitrepo import GitRepo
from toolchain import CheckoutFactory

from conformance import hostile_agent
from conformance.providers import ProviderFactory
from docdelta.agents.base import classify
from docdelta.agents.models import RunStatus
from docdelta.sandbox import Sandbox, SandboxProvider, SandboxSpec, get_provider
from docdelta.sandbox.base import ExecResult

AGENT = Path(__file__).with_name("hostile_agent.py").read_bytes()
SECRET_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "DOCDELTA_GATEWAY_KEY")


def attack(sandbox: Sandbox, name: str, args: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
    """Run one attack in the sandbox as an agent would run; its JSON report."""
    script = f"{sandbox.tools_dir}/hostile_agent.py"
    sandbox.write_file(script, AGENT)
    result = sandbox.exec(["python3", script, name], stdin=json.dumps(args).encode(), timeout=timeout)
    assert result.exit_code == 0, result.stderr.decode(errors="replace")
    report: dict[str, Any] = json.loads(result.stdout.decode().splitlines()[-1])
    return report


@pytest.fixture
def checkout(tmp_checkout: CheckoutFactory) -> Path:
    return tmp_checkout({"README.md": "hello\n"}, name="sealed")


@pytest.fixture
def unsandboxed(tmp_path: Path) -> Iterator[SandboxProvider]:
    """No sandbox at all (`--sandbox none`): the control where every attack must succeed."""
    made = get_provider("none", root=tmp_path / "unsandboxed")
    yield made
    made.close()


# ----------------------------------------------------------------- writes
@pytest.fixture
def host_targets() -> Iterator[list[Path]]:
    """Host places an escaped agent would write to: /tmp, $HOME, /root, docdelta's
    site-packages (a .pth there runs at the user's next `docdelta --version`)."""
    tag = uuid.uuid4().hex[:12]
    dirs = {Path(tempfile.gettempdir()), Path.home(), Path("/root"), Path(sysconfig.get_paths()["purelib"])}
    targets = sorted(d / f"docdelta-hostile-{tag}.pth" for d in dirs)
    yield targets
    for target in targets:
        target.unlink(missing_ok=True)


def _write_outside(provider: SandboxProvider, checkout: Path, targets: list[Path]) -> tuple[list[Path], str]:
    """Plant a .pth everywhere; (what landed on the host, what the user's next Python ran)."""
    planted = "import os; os.environ['DOCDELTA_ESCAPED'] = 'yes'\n"
    with provider.create(checkout, SandboxSpec()) as sb:
        attack(sb, "write", {"paths": [str(p) for p in targets], "content": planted})
    landed = [p for p in targets if p.exists()]
    probe = "import os; print(os.environ.get('DOCDELTA_ESCAPED'))"
    next_python = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return landed, next_python.stdout.strip()


def test_writes_outside_the_checkout_never_reach_the_host(
    provider: SandboxProvider, checkout: Path, host_targets: list[Path]
) -> None:
    landed, ran = _write_outside(provider, checkout, host_targets)
    assert landed == [] and ran == "None", f"the agent wrote on the host: {landed}"


def test_control_unsandboxed_writes_land_and_the_pth_runs(
    unsandboxed: SandboxProvider, checkout: Path, host_targets: list[Path]
) -> None:
    landed, ran = _write_outside(unsandboxed, checkout, host_targets)
    assert landed == host_targets and ran == "yes"


# --------------------------------------------------------------- sockets
@dataclass
class HostServers:
    """A Unix socket, an abstract socket and a loopback TCP port on the host that record
    every client that reaches them and answer it."""

    unix: str
    abstract: str
    tcp: tuple[str, int]
    seen: list[bytes] = field(default_factory=list)


def _serve(server: socket.socket, servers: HostServers) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            try:
                servers.seen.append(conn.recv(100))
                conn.sendall(b"host says hi\n")
            except OSError:
                pass


@pytest.fixture
def host_servers() -> Iterator[HostServers]:
    short = Path(tempfile.mkdtemp(prefix="dd-sock-"))  # AF_UNIX paths must be short
    path = str(short / "host.sock")
    abstract = f"docdelta-hostile-{uuid.uuid4().hex[:12]}"
    sockets = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX), socket.socket()]
    sockets[0].bind(path)
    os.chmod(path, 0o777)  # any uid may connect: the sandbox must stop it, not file modes
    short.chmod(0o755)
    sockets[1].bind("\0" + abstract)
    sockets[2].bind(("127.0.0.1", 0))
    servers = HostServers(unix=path, abstract=abstract, tcp=("127.0.0.1", sockets[2].getsockname()[1]))
    for sock in sockets:
        sock.listen(8)
        threading.Thread(target=_serve, args=(sock, servers), daemon=True).start()
    yield servers
    for sock in sockets:
        sock.close()
    shutil.rmtree(short)


def _connect(
    provider: SandboxProvider, checkout: Path, servers: HostServers, *, discover: bool
) -> dict[str, str]:
    """Connect to the test's servers; with `discover`, also to the Docker engine's socket and
    every socket file the agent can find (only ever inside a sandbox: no bytes to host daemons)."""
    engine = [p for p in ("/var/run/docker.sock", "/run/docker.sock") if Path(p).exists()] if discover else []
    args = {
        "unix": [servers.unix, *engine],
        "abstract": [servers.abstract],
        "tcp": [list(servers.tcp)],
        "discover": discover,
    }
    with provider.create(checkout, SandboxSpec()) as sb:
        reached: dict[str, str] = attack(sb, "connect", args)["reached"]
    return reached


def test_host_sockets_and_ports_are_unreachable(
    provider: SandboxProvider, checkout: Path, host_servers: HostServers
) -> None:
    reached = _connect(provider, checkout, host_servers, discover=True)
    assert reached == {} and host_servers.seen == [], f"the agent reached {reached}"


def test_control_unsandboxed_reaches_every_host_socket(
    unsandboxed: SandboxProvider, checkout: Path, host_servers: HostServers
) -> None:
    reached = _connect(unsandboxed, checkout, host_servers, discover=False)
    assert len(host_servers.seen) == 3 and reached[host_servers.unix] == "host says hi\n"


# ----------------------------------------------------------------- reads
@dataclass
class HostSecrets:
    canaries: dict[str, str]
    """what -> canary text planted there"""
    paths: list[str]
    """host paths a cheating agent would open"""


@pytest.fixture
def host_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostSecrets]:
    """Gold answers and other conditions' files where docdelta keeps them, a worktree's main
    gitdir, a note in the host's /tmp, and API keys in docdelta's own environment."""

    def canary(what: str) -> str:
        return f"canary-{what}-{uuid.uuid4().hex[:12]}"

    c = {w: canary(w) for w in ("repo", "tasks", "workdir", "gitdir", "host-tmp", "env")}
    repo = GitRepo.init(tmp_path / "user-repo")
    repo.commit({"AGENTS.md": f"# {c['repo']}\n", ".docdelta/tasks/t.yaml": f"gold: {c['repo']}\n"})
    repo.git("worktree", "add", "-q", str(tmp_path / "user-worktree"))
    gitdir_note = repo.path / ".git" / "info" / "docdelta-note"
    gitdir_note.write_text(c["gitdir"])
    tasks = tmp_path / "tasks"
    (tasks / "t").mkdir(parents=True)
    (tasks / "t.yaml").write_text(f"id: t\ngold:\n  answer: {c['tasks']}\n")
    (tasks / "t" / "reference.patch").write_text(f"+{c['tasks']}\n")
    result = tmp_path / "work" / "runs" / "user-repo" / "t" / "head" / "r1" / "result.json"
    result.parent.mkdir(parents=True)
    result.write_text(json.dumps({"answer": c["workdir"]}))
    host_tmp = Path(tempfile.gettempdir()) / f"docdelta-hostile-{uuid.uuid4().hex[:12]}.txt"
    host_tmp.write_text(c["host-tmp"])
    for name in SECRET_VARS:
        monkeypatch.setenv(name, c["env"])
    paths = [
        str(repo.path / "AGENTS.md"),
        str(repo.path / ".docdelta" / "tasks" / "t.yaml"),
        str(tasks / "t.yaml"),
        str(tasks / "t" / "reference.patch"),
        str(result),
        str(gitdir_note),
        str(repo.path / ".git" / "HEAD"),
        str(host_tmp),
        "/root",
    ]
    yield HostSecrets(canaries=c, paths=[p for p in paths if Path(p).exists()])
    host_tmp.unlink()


def _read(provider: SandboxProvider, checkout: Path, secrets: HostSecrets, walk: list[str]) -> dict[str, Any]:
    args = {"paths": secrets.paths, "canaries": list(secrets.canaries.values()), "walk": walk}
    with provider.create(checkout, SandboxSpec()) as sb:
        return attack(sb, "read", args)


def test_gold_other_conditions_and_secrets_are_unreadable(
    provider: SandboxProvider, checkout: Path, host_secrets: HostSecrets
) -> None:
    seen = _read(provider, checkout, host_secrets, walk=["/"])
    assert seen["readable"] == [] and seen["found"] == {}, f"the agent read {seen}"


def test_control_unsandboxed_reads_gold_gitdir_and_keys(
    unsandboxed: SandboxProvider, checkout: Path, host_secrets: HostSecrets
) -> None:
    # Walking the whole host would take minutes; the planted files themselves suffice.
    seen = _read(
        unsandboxed, checkout, host_secrets, walk=[p for p in host_secrets.paths if Path(p).is_file()]
    )
    assert set(seen["readable"]) == set(host_secrets.paths)
    # Even `none` builds the agent's environment from scratch: only the keys stay hidden.
    assert set(seen["found"]) == set(host_secrets.canaries.values()) - {host_secrets.canaries["env"]}


def test_another_live_runs_checkout_is_unreadable(
    provider_factory: ProviderFactory, tmp_path: Path, tmp_checkout: CheckoutFactory
) -> None:
    canary = f"canary-other-run-{uuid.uuid4().hex[:12]}"
    mine, theirs = provider_factory(tmp_path / "mine"), provider_factory(tmp_path / "theirs")
    try:
        with (
            mine.create(tmp_checkout({"f.txt": "mine\n"}, name="a"), SandboxSpec()) as sb,
            theirs.create(tmp_checkout({"f.txt": "theirs\n"}, name="b"), SandboxSpec()) as other,
        ):
            other.write_file("notes.txt", canary.encode())
            # Wherever the other run's files live on this host (for the local provider, under
            # tmp_path), the agent knows the path: the sandbox must still not show it.
            where = [str(p) for p in tmp_path.rglob("notes.txt")]
            seen = attack(sb, "read", {"paths": where, "canaries": [canary], "walk": ["/"]})
            assert seen["readable"] == [] and seen["found"] == {}, f"the agent read {seen}"
            assert other.read_file("notes.txt") == canary.encode()
    finally:
        mine.close()
        theirs.close()


def _leftovers(provider: SandboxProvider, checkout: Path, name: str) -> tuple[list[str], dict[str, Any]]:
    """An earlier run leaves notes in /tmp, /var/tmp, $HOME and $TMPDIR; what the next run reads."""
    canary = f"canary-earlier-run-{uuid.uuid4().hex[:12]}"
    with provider.create(checkout, SandboxSpec()) as first:
        home, tmpdir = first.exec(["sh", "-c", 'echo "$HOME"; echo "$TMPDIR"']).stdout.decode().split()
        notes = [f"/tmp/{name}", f"/var/tmp/{name}", f"{home}/{name}", f"{tmpdir}/{name}"]
        attack(first, "write", {"paths": notes, "content": canary})
    with provider.create(checkout, SandboxSpec()) as second:
        return notes, attack(second, "read", {"paths": notes, "canaries": [canary], "walk": ["/tmp"]})


@pytest.fixture
def note_name() -> Iterator[str]:
    name = f"docdelta-hostile-{uuid.uuid4().hex[:12]}"
    yield name
    for tmp in ("/tmp", "/var/tmp"):
        Path(tmp, name).unlink(missing_ok=True)


def test_what_an_earlier_run_left_in_tmp_and_home_is_gone(
    provider: SandboxProvider, checkout: Path, note_name: str
) -> None:
    _, seen = _leftovers(provider, checkout, note_name)
    assert seen["readable"] == [] and seen["found"] == {}, f"the next run read {seen}"


def test_control_unsandboxed_runs_share_the_host_tmp(
    unsandboxed: SandboxProvider, checkout: Path, note_name: str
) -> None:
    notes, seen = _leftovers(unsandboxed, checkout, note_name)
    assert seen["readable"] == notes[:2], "the host's /tmp and /var/tmp outlive the run"


def test_kernel_interfaces_and_device_nodes_are_not_writable(
    provider: SandboxProvider, checkout: Path
) -> None:
    """A root-owned sysctl (core_pattern runs a program as host root) or device node must
    not be writable, even by an agent whose uid maps to root. Each write puts back the
    value already there, so even a failing run changes nothing on the host."""
    script = (
        'v=$(cat /proc/sys/kernel/core_pattern) && echo "$v" > /proc/sys/kernel/core_pattern && echo sysctl; '
        "chmod 666 /dev/null && echo chmod; true"
    )
    with provider.create(checkout, SandboxSpec()) as sb:
        assert sb.exec(["sh", "-c", script]).stdout == b""


# --------------------------------------------------------------- daemons
def _marked(marker: str) -> list[int]:
    """Host PIDs whose command line carries `marker` (container processes included)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


def _daemon(provider: SandboxProvider, checkout: Path, marker: str, *, hang: bool) -> list[int]:
    """Leave a daemon (ending normally, or killed at the timeout); host PIDs still carrying
    `marker` once the run's sandbox is closed."""
    args = {"fifo": "ready.fifo", "marker": marker, "hang": hang}
    with provider.create(checkout, SandboxSpec()) as sb:
        if not hang:
            assert attack(sb, "daemon", args)["daemon"] > 0
        else:
            sb.write_file(f"{sb.tools_dir}/hostile_agent.py", AGENT)
            argv = ["python3", f"{sb.tools_dir}/hostile_agent.py", "daemon"]
            hung = sb.exec(argv, stdin=json.dumps(args).encode(), timeout=5)
            assert hung.timed_out and b'"daemon"' in hung.stdout, hung.stderr
    return _marked(marker)


@pytest.fixture
def marker() -> Iterator[str]:
    mark = f"docdelta-hostile-daemon-{uuid.uuid4().hex[:12]}"
    yield mark
    for pid in _marked(mark):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("hang", [False, True], ids=["exits", "times-out"])
def test_a_daemon_dies_with_its_run(
    provider: SandboxProvider, checkout: Path, marker: str, hang: bool
) -> None:
    assert _daemon(provider, checkout, marker, hang=hang) == [], (
        "a process the agent started outlived its run"
    )


def test_control_unsandboxed_daemon_survives(
    unsandboxed: SandboxProvider, checkout: Path, marker: str
) -> None:
    assert len(_daemon(unsandboxed, checkout, marker, hang=False)) == 1, "the probe sees a surviving daemon"


# --------------------------------------------------------------- kernel keyrings
NORMAL_USER = 64123
"""A uid with no account here: docdelta run by a normal user (via setpriv, as root)."""
KEYRING_RUNS = """
import json, sys
from pathlib import Path
sys.path[:0] = [sys.argv[1]]
from conformance import hostile_agent
from docdelta.sandbox import SandboxSpec, get_provider

root, checkout, note, secret = (sys.argv[2], Path(sys.argv[3]), sys.argv[4], sys.argv[5])
if sys.argv[6] == "session":  # what a login shell or a container gives a process
    hostile_agent._syscall(hostile_agent.KEYRING_CALLS[hostile_agent.platform.machine()][1], 1, None)
assert hostile_agent.add_key(secret, "canary-" + secret, hostile_agent.KEYRINGS["session"])
agent = Path(sys.argv[1], "conformance", "hostile_agent.py").read_bytes()
provider = get_provider("local", root=Path(root))
reports = []
for args in ({"store": note, "payload": "canary-" + note}, {"find": [note, secret]}):
    with provider.create(checkout, SandboxSpec()) as sb:
        sb.write_file(f"{sb.tools_dir}/agent.py", agent)
        done = sb.exec(["python3", f"{sb.tools_dir}/agent.py", "keyring"], stdin=json.dumps(args).encode())
        assert done.exit_code == 0, done.stderr
        reports.append(json.loads(done.stdout.decode().splitlines()[-1]))
provider.close()
print(json.dumps(reports))
"""


@pytest.fixture
def key_names() -> Iterator[tuple[str, str]]:
    """(the note a head run leaves, a secret in docdelta's own session keyring); both
    forgotten afterwards wherever this process can reach them."""
    note, secret = (f"docdelta-hostile-{what}-{uuid.uuid4().hex[:12]}" for what in ("note", "secret"))
    assert hostile_agent.add_key(secret, f"canary-{secret}", hostile_agent.KEYRINGS["session"])
    yield note, secret
    for name in (note, secret):
        hostile_agent.forget_key(name)


def _keyring(
    provider: SandboxProvider, checkout: Path, note: str, secret: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A head run leaves a note in every keyring it reaches; what a later base run reads."""
    with provider.create(checkout, SandboxSpec()) as head:
        left = attack(head, "keyring", {"store": note, "payload": f"canary-{note}"})
    with provider.create(checkout, SandboxSpec()) as base:
        seen = attack(base, "keyring", {"find": [note, secret]})
    return left, seen


def test_runs_share_no_kernel_keyring(
    provider: SandboxProvider, checkout: Path, key_names: tuple[str, str]
) -> None:
    note, secret = key_names
    left, seen = _keyring(provider, checkout, note, secret)
    assert left["stored"] == [], f"a run stored a key in its {left['stored']} keyring"
    assert seen["found"] == {note: [], secret: []}, f"a later run read {seen['found']}"


def test_control_unsandboxed_runs_share_the_keyring(
    unsandboxed: SandboxProvider, checkout: Path, key_names: tuple[str, str]
) -> None:
    note, secret = key_names
    left, seen = _keyring(unsandboxed, checkout, note, secret)
    assert "session" in left["stored"], "the probe can store a key"
    assert seen["found"][note] and seen["found"][secret] == [f"canary-{secret}"], "the probe sees the keys"


@pytest.mark.skipif(os.geteuid() != 0, reason="runs docdelta as another user, which takes root")
@pytest.mark.parametrize("keyring", ["session", "inherited"], ids=["own-session-keyring", "inherited"])
def test_as_a_normal_user_runs_share_no_kernel_keyring(
    checkout: Path, key_names: tuple[str, str], keyring: str
) -> None:
    """docdelta run by a normal user (bwrap then builds a user namespace of its own), in a
    session keyring of its own or the one it inherits: neither its secret nor a head run's
    note reaches a later run."""
    with tempfile.TemporaryDirectory(prefix="docdelta-normal-user-") as made:  # pytest's tmp is root's
        home = Path(made)
        shutil.copytree(checkout, home / "checkout", symlinks=True)
        for path in [home, *home.rglob("*")]:
            os.lchown(path, NORMAL_USER, NORMAL_USER)
        left, seen = _keyring_as(NORMAL_USER, home, *key_names, keyring)
    assert left["stored"] == [], f"a run stored a key in its {left['stored']} keyring"
    assert seen["found"] == {name: [] for name in key_names}, f"a later run read {seen['found']}"


def _keyring_as(
    uid: int, home: Path, note: str, secret: str, keyring: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    ids = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    argv = [sys.executable, "-c", KEYRING_RUNS, str(Path(__file__).parents[1]), str(home / "sandboxes")]
    argv += [str(home / "checkout"), note, secret, keyring]
    done = subprocess.run(
        ["setpriv", *ids, "--", *argv],
        capture_output=True,
        check=False,
        env={"PATH": os.environ["PATH"], "HOME": str(home)},
        cwd=home,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    left, seen = json.loads(done.stdout)
    return left, seen


def test_what_agents_run_still_works_under_the_filter(provider: SandboxProvider, checkout: Path) -> None:
    """The refused calls are ones agents have no use for: git and python run everywhere, and
    node and npm wherever the sandbox has them (the local sandbox shows the host's; the Docker
    base image has none, and the agent images that add them run them in their own tests)."""
    script = (
        "git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && "
        "python3 -c 'import subprocess, threading; threading.Thread().start(); subprocess.run(\"true\")' && "
        "echo python && if command -v node >/dev/null; then "
        'node -e \'require("child_process").execSync("true"); console.log("node")\' && '
        "npm --version >/dev/null && echo npm; fi"
    )
    with provider.create(checkout, SandboxSpec()) as sb:
        has_node = sb.exec(["sh", "-c", "command -v node"]).exit_code == 0
        done = sb.exec(["sh", "-c", script], timeout=120)
    assert done.exit_code == 0, done.stderr.decode(errors="replace")
    assert done.stdout.decode().split() == ["python", *(["node", "npm"] if has_node else [])]
    assert has_node or provider.name == "docker", "the local sandbox shows the host's node"


# --------------------------------------------------------------- resource bounds
SMALL = SandboxSpec(memory_mb=256, pids=64, workspace_mb=100)
"""Limits small enough that each attack below hits its own in seconds on a shared machine."""


def _bounded(provider: SandboxProvider, checkout: Path, name: str, args: dict[str, Any]) -> ExecResult:
    """Run one resource attack under SMALL; then check that the next run is unaffected."""
    with provider.create(checkout, SMALL) as sb:
        sb.write_file(f"{sb.tools_dir}/hostile_agent.py", AGENT)
        argv = ["python3", f"{sb.tools_dir}/hostile_agent.py", name]
        result = sb.exec(argv, stdin=json.dumps(args).encode(), timeout=120)
    with provider.create(checkout, SMALL) as after:
        next_run = after.exec(["sh", "-c", "echo ok > f && cat f && ls"], timeout=60)
    assert (next_run.exit_code, next_run.stdout) == (0, b"ok\nREADME.md\nf\n"), next_run.stderr
    return result


def test_a_fork_bomb_hits_the_process_limit(provider: SandboxProvider, checkout: Path) -> None:
    result = _bounded(provider, checkout, "fork", {"max": 5000})
    report = json.loads(result.stdout.decode().splitlines()[-1])
    assert report["refused"] and report["forked"] < SMALL.pids, report
    if provider.name == "local":  # Docker caps the count but keeps no record of a hit
        assert classify(result, None) is RunStatus.pids_limit


def test_a_3_gb_allocation_ends_the_run_out_of_memory(provider: SandboxProvider, checkout: Path) -> None:
    result = _bounded(provider, checkout, "allocate", {"mb": 3072})
    assert classify(result, None) is RunStatus.oom, result


def test_a_2_gb_file_fills_the_workspace_quota(provider: SandboxProvider, checkout: Path) -> None:
    result = _bounded(provider, checkout, "fill", {"path": "big.bin", "mb": 2048})
    report = json.loads(result.stdout.decode().splitlines()[-1])
    assert report["written"] <= SMALL.workspace_mb * 1024 * 1024, report
    assert classify(result, None) is RunStatus.disk_full, result


def test_a_sandbox_left_by_a_killed_run_is_removed_with_its_mounts(
    provider_factory: ProviderFactory, checkout: Path, tmp_path: Path
) -> None:
    """A run whose docdelta died leaves its sandbox (as root, a mounted tmpfs); the next
    provider on that root removes it and starts its own."""
    first, second = provider_factory(tmp_path / "a"), None
    try:
        first.create(checkout, SMALL).exec(["sh", "-c", "echo left > note"])
        second = provider_factory(tmp_path / "a")
        with second.create(checkout, SMALL) as sb:
            assert sb.exec(["ls"]).stdout == b"README.md\n"
    finally:
        for made in (second, first):
            if made is not None:
                made.close()


def test_control_unsandboxed_runs_are_unbounded(unsandboxed: SandboxProvider, checkout: Path) -> None:
    """Past each SMALL limit, but not far past it: the probes see an attack that succeeds."""
    forks = _bounded(unsandboxed, checkout, "fork", {"max": 2 * SMALL.pids})
    memory = _bounded(unsandboxed, checkout, "allocate", {"mb": 2 * SMALL.memory_mb})
    disk = _bounded(unsandboxed, checkout, "fill", {"path": "big.bin", "mb": 2 * SMALL.workspace_mb})
    reports = [json.loads(r.stdout.decode().splitlines()[-1]) for r in (forks, memory, disk)]
    assert reports == [
        {"forked": 2 * SMALL.pids, "refused": False},
        {"allocated": 2 * SMALL.memory_mb * 1024 * 1024},
        {"written": 2 * SMALL.workspace_mb * 1024 * 1024},
    ]
    assert all(classify(r, None) is RunStatus.no_answer for r in (forks, memory, disk))
