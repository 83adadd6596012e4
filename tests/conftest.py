"""Shared fixtures and the docker-marker rule for the whole suite."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path

import pytest

CheckoutFactory = Callable[..., Path]

_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
}


@pytest.fixture
def tmp_checkout(tmp_path: Path) -> CheckoutFactory:
    """Make a checkout like the runner passes to a sandbox: files committed once in a git repo.

    `tmp_checkout({"README.md": "hi"}, name="x")` -> path; `git=False` skips the repository.
    """

    def make(files: Mapping[str, str | bytes], *, name: str = "checkout", git: bool = True) -> Path:
        root = tmp_path / name
        root.mkdir(parents=True)
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        if git:
            env = {**os.environ, **_GIT_ENV}
            for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--allow-empty", "-m", "sealed"]):
                subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
        return root

    return make


@cache
def _docker_answers() -> str | None:
    """None when a Docker engine answers a ping, else why not."""
    try:
        import docker  # noqa: PLC0415 - only docker-marked tests pay for the import

        docker.from_env(timeout=5).ping()
    except Exception as exc:
        return f"no Docker engine: {exc}"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A docker test skips without an engine, but FAILS when DOCDELTA_REQUIRE_DOCKER=1:
    in CI a missing engine must not turn the container tests silently green."""
    if item.get_closest_marker("docker") is None:
        return
    why = _docker_answers()
    if why is None:
        return
    if os.environ.get("DOCDELTA_REQUIRE_DOCKER") == "1":
        pytest.fail(f"DOCDELTA_REQUIRE_DOCKER=1 but {why}", pytrace=False)
    pytest.skip(why)
