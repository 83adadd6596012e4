"""Grader selftest: prove a change task's hidden tests can tell right from wrong before any agent runs.

A task whose tests pass on the untouched checkout measures nothing; one whose
tests fail on the reference solution measures the task author's mistake; one
that a planted `conftest.py` turns green measures how well agents cheat. And a
test that fails one time in five turns noise into "regressions". So each leg
below must hold, or the task cannot be run.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from docdelta.checkout.seal import SealedCheckout, seal
from docdelta.errors import InfraError, SelftestFailed, TaskError
from docdelta.git import Repo
from docdelta.grading.hidden import grade_change, load_assets
from docdelta.instructions.detect import InstructionMatcher, Overlay
from docdelta.results.grades import TAIL_NOTE, HiddenTestResult, SelftestLeg, SelftestReport
from docdelta.sandbox.base import SandboxProvider, SandboxSpec
from docdelta.tasks.load import LoadedTask
from docdelta.tasks.models import Task

GREEN_CONFTEST = """import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    return True  # every test "passes" without running
"""
TRIVIAL_TEST = "def test_tampered():\n    assert True\n"


def added_file_diff(path: str, text: str) -> bytes:
    """A `git diff` that adds one text file: how a tampering agent's edit would look."""
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    ).encode()


def _tampers(hidden: Mapping[str, bytes]) -> dict[str, bytes]:
    """Diffs that try to manufacture a pass on the untouched code; each must still fail."""
    first = sorted(hidden)[0]
    return {
        "tampered conftest.py fails": added_file_diff("conftest.py", GREEN_CONFTEST),
        f"tampered hidden test {first} fails": added_file_diff(first, TRIVIAL_TEST),
    }


def _leg(name: str, result: HiddenTestResult, want: str) -> SelftestLeg:
    passed = result.status == want
    why = "; ".join(n for n in result.notes if not (passed and n.startswith(TAIL_NOTE)))
    return SelftestLeg(
        name=name,
        passed=passed,
        note=f"grader said {result.status} (wanted {want}){_tally(result)}: {why}",
        result=result,
    )


def _tally(result: HiddenTestResult) -> str:
    """`; pytest: 1 passed, 0 failed, 0 errors`: which runner counted what (empty if nothing)."""
    c = result.counts
    runner = result.runner.value if result.runner else "the command"
    return f"; {runner}: {c.passed} passed, {c.failed} failed, {c.errors} errors" if c else ""


def _must_fail(name: str, result: HiddenTestResult) -> SelftestLeg:
    """A leg that holds only when the tests ran and failed: a run in which no test ran
    (a missing runner, an import error before collection, a command not found) also
    "fails", and would let a task whose tests can never pass or fail look sound."""
    counts = result.counts
    ran_and_failed = counts is not None and counts.total > 0 and counts.failed + counts.errors > 0
    if result.status == "fail" and not ran_and_failed:
        return SelftestLeg(
            name=name,
            passed=False,
            note="no test ran, so this leg proves nothing (it holds only when tests run and fail): "
            + "; ".join(result.notes),
            result=result,
        )
    return _leg(name, result, "fail")


def selftest(
    task: Task,
    sealed: SealedCheckout,
    hidden: Mapping[str, bytes],
    reference: bytes | None,
    provider: SandboxProvider,
    *,
    flake_runs: int = 3,
    spec: SandboxSpec | None = None,
    workdir: Path | None = None,
    raise_on_failure: bool = True,
) -> SelftestReport:
    """Run every leg for one change task; raise TaskError (or InfraError) unless all hold.

    Legs: hidden files absent from the agent's checkout; reference passes
    `flake_runs` times out of `flake_runs`; untouched checkout fails; each tamper fails.
    A "fails" leg holds only when tests ran and failed (see `_must_fail`).
    """
    if reference is None:
        raise TaskError(
            f"task {task.id!r} has no reference solution, so its hidden tests cannot be checked",
            hint="save the solution as a unified diff at <tasks dir>/<task id>/reference.patch",
        )

    def grade(diff: bytes) -> HiddenTestResult:
        return grade_change(task, sealed, diff, hidden, provider, spec=spec, workdir=workdir)

    visible = [p for p in hidden if (sealed.path / p).exists()]
    legs = [
        SelftestLeg(
            name="hidden tests absent from the agent's checkout",
            passed=not visible,
            note=f"the agent can read {', '.join(visible)}; add them to `strip` in .docdelta.yml"
            if visible
            else "",
        )
    ]
    first = grade(reference)
    legs.append(_leg("reference passes", first, "pass"))
    must_fail = {"untouched checkout fails": b"", **_tampers(hidden)}
    legs += [_must_fail(name, grade(diff)) for name, diff in must_fail.items()]
    if first.status == "pass" and flake_runs > 1:
        again = [grade(reference) for _ in range(flake_runs - 1)]
        passes = 1 + sum(r.status == "pass" for r in again)
        bad = next((r for r in again if r.status != "pass"), None)
        legs.append(
            SelftestLeg(
                name=f"flake probe ({flake_runs} runs of the reference)",
                passed=passes == flake_runs,
                note=f"{passes}/{flake_runs} passed",
                result=bad,
            )
        )
    report = SelftestReport(task=task.id, legs=legs)
    if raise_on_failure:
        raise_for(report)
    return report


def raise_for(report: SelftestReport) -> None:
    """InfraError when a failed leg could not run at all, else TaskError naming every failed leg."""
    failed = [leg for leg in report.legs if not leg.passed]
    if not failed:
        return
    if any(leg.result is not None and leg.result.status == "infra_error" for leg in failed):
        raise InfraError(
            f"selftest of task {report.task!r} could not run: "
            + "; ".join(f"{leg.name}: {leg.note}" for leg in failed),
            hint="fix the sandbox (see the message) and rerun `docdelta selftest`",
        )
    raise SelftestFailed(
        f"task {report.task!r} failed its selftest: "
        + "; ".join(f"{leg.name}: {leg.note}" for leg in failed),
        hint="fix the hidden tests, the validation command or the reference patch; "
        "a task whose selftest fails cannot be run",
    )


def selftest_tasks(
    repo: Repo,
    loaded: Sequence[LoadedTask],
    *,
    source: str,
    strip: Sequence[str],
    matcher: InstructionMatcher,
    provider: SandboxProvider,
    scratch: Path,
    flake_runs: int = 3,
    env_links: Callable[[str], Mapping[str, str]] = lambda _sha: {},
) -> list[SelftestReport]:
    """Selftest every change task of `loaded` against a sealed checkout of its source.

    A task drafted from a commit names its own source (`gold.validation.source`);
    others use `source`. The checkout holds no instruction files: the selftest is
    about the task and the grader, not the docs; it holds the workspace install's links
    (`env_links(sha)`, see `envs.links`) as a run's checkouts do. Reports come back for every task
    (none raises), so `docdelta selftest` can show all failures at once.
    """
    reports = []
    for lt in loaded:
        task = lt.task
        if task.kind != "change" or task.gold.validation is None:
            continue
        sha = repo.resolve(task.gold.validation.source or source)
        assets = load_assets(task, lt.path, repo, sha)
        dest = scratch / task.id
        shutil.rmtree(dest, ignore_errors=True)
        stripped = [*strip, *(f"/{p}" for p in assets.hidden)]
        sealed = seal(repo, sha, Overlay(), dest, matcher, stripped, env_links(sha))
        reports.append(
            selftest(
                task,
                sealed,
                assets.hidden,
                assets.reference,
                provider,
                flake_runs=flake_runs,
                workdir=scratch,
                raise_on_failure=False,
            )
        )
    return reports
