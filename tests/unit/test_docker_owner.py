"""Owner labels decide what `gc` and every start may remove: only a dead run of this host
*and this PID namespace*. A docdelta inside a `--network host` container (act, a
self-hosted runner, the action image tests) shares the host's name; comparing its pids
with the host's removed a live run's containers mid-run ("Removal In Progress")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from docdelta.sandbox.dockerapi import owner_gone, owner_id


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_live_owner_is_not_gone_and_a_dead_one_is() -> None:
    assert not owner_gone(owner_id())
    host, namespace, _pid, start = owner_id().split("/")
    assert owner_gone(f"{host}/{namespace}/{_dead_pid()}/{start}")


def test_an_owner_in_another_pid_namespace_is_never_gone() -> None:
    """Same host name, another namespace: its pid says nothing about our processes."""
    host, namespace, _pid, start = owner_id().split("/")
    assert namespace == os.readlink("/proc/self/ns/pid")
    assert not owner_gone(f"{host}/pid:[1]/{_dead_pid()}/{start}")


def test_other_hosts_and_unknown_labels_are_never_gone() -> None:
    assert not owner_gone(f"not-{socket.gethostname()}/{owner_id().split('/', 1)[1]}")
    assert not owner_gone(f"{socket.gethostname()}/{_dead_pid()}/123")  # the old 3-part label
    assert not owner_gone("")
