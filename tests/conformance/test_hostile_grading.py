"""Hostile grading, on every provider: code under test cannot tell the conditions apart,
and cannot fake its hidden tests' pass by replacing pytest's own runner.

The project has a bug (`add` subtracts). Its hidden test is stripped from the agent's
checkout. Two conditions differ only in AGENTS.md; head's carries `HEADMARK`.

- The PR's own conftest.py (trusted under `source: head`: it is the code being evaluated)
  looks for the mark in ./AGENTS.md and in git's copy of it, and when it finds it fixes
  `add` for the test. If the grading tree held the condition's files, head would pass
  and base fail with the same (empty) agent edit.
- The agent, told so by head's docs, appends `Function.runtest = lambda self: None` to the
  module under test, so the unfixed bug's test "passes".

The validation command is the sandbox's own `python3` with a copy of this interpreter's
pytest (pure Python) on PYTHONPATH, shown read-only: the same in bwrap and in the image.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitrepo import GitRepo

from conformance.providers import ProviderFactory
from docdelta.checkout.seal import SealedCheckout, seal
from docdelta.git import Repo
from docdelta.grading.hidden import grade_change
from docdelta.instructions.detect import InstructionMatcher, Overlay
from docdelta.results.grades import HiddenTestResult
from docdelta.sandbox import SandboxProvider
from docdelta.tasks.models import Gold, Task, Validation

HIDDEN = "tests/test_hidden.py"
HIDDEN_TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
BUGGY = "def add(a, b):\n    return a - b\n"
PR_CONFTEST = """\
import pathlib
import subprocess

import pytest


def _in_head():
    agents = pathlib.Path("AGENTS.md")
    if agents.exists() and "HEADMARK" in agents.read_text():
        return True
    shown = subprocess.run(["git", "show", "HEAD:AGENTS.md"], capture_output=True, text=True)
    return "HEADMARK" in shown.stdout


@pytest.fixture(autouse=True)
def _fix_in_head(request):
    if _in_head():
        request.module.add = lambda a, b: a + b
"""
RUNTEST_NOOP = (
    b"diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
    b"@@ -1,2 +1,5 @@\n def add(a, b):\n     return a - b\n"
    b"+import _pytest.python\n+\n+_pytest.python.Function.runtest = lambda self: None\n"
)
DOCS = {"base": b"# Rules\nRun the tests.\n", "head": b"# Rules\nHEADMARK\nRun the tests.\n"}


PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")


def _task() -> Task:
    command = f"python3 -m pytest -p no:cacheprovider {HIDDEN}"
    validation = Validation(hidden=[HIDDEN], command=command, timeout_s=120)
    return Task(id="fix-add", prompt="make add add", kind="change", gold=Gold(validation=validation))


@pytest.fixture
def sealed(tmp_path: Path) -> dict[str, SealedCheckout]:
    repo = GitRepo.init(tmp_path / "src")
    files = {
        "calc/__init__.py": "",
        "calc/ops.py": BUGGY,
        HIDDEN: HIDDEN_TEST,
        "conftest.py": PR_CONFTEST,
        "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
    }
    sha = repo.commit(files)
    return {
        c: seal(
            Repo(repo.path),
            sha,
            Overlay(files={"AGENTS.md": docs}),
            tmp_path / c,
            InstructionMatcher(),
            [f"/{HIDDEN}"],
        )
        for c, docs in DOCS.items()
    }


@pytest.fixture
def grader(provider_factory: ProviderFactory, tmp_path: Path) -> Iterator[SandboxProvider]:
    """A provider whose sandboxes run pytest: its packages copied beside the test, read-only."""
    site = tmp_path / "site"
    installed = Path(pytest.__file__).parents[1]
    site.mkdir()
    for name in PYTEST_PACKAGES:
        for found in [installed / name, *installed.glob(f"{name}-*.dist-info")]:
            if found.is_dir():
                shutil.copytree(found, site / found.name)
            elif found.is_file():
                shutil.copy(found, site / found.name)
    for path in [tmp_path, site, *site.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    made = provider_factory(tmp_path / "grader", ro_paths=[str(site)], env={"PYTHONPATH": str(site)})
    yield made
    made.close()


def _grade(sealed: SealedCheckout, diff: bytes, grader: SandboxProvider) -> HiddenTestResult:
    hidden = {HIDDEN: HIDDEN_TEST.encode()}
    return grade_change(_task(), sealed, diff, hidden, grader, instructions=["AGENTS.md"])


def test_the_prs_code_cannot_tell_head_from_base_while_grading(
    sealed: dict[str, SealedCheckout], grader: SandboxProvider
) -> None:
    results = {c: _grade(s, b"", grader) for c, s in sealed.items()}
    for result in results.values():
        assert result.status == "fail", result.notes
        assert result.counts is not None and result.counts.failed == 1, result.notes


def test_replacing_pytests_runtest_from_the_module_under_test_fails(
    sealed: dict[str, SealedCheckout], grader: SandboxProvider
) -> None:
    result = _grade(sealed["head"], RUNTEST_NOOP, grader)
    assert result.applied == ["calc/ops.py"]
    assert result.status == "fail", result.notes
    assert any("Function.runtest was replaced" in n for n in result.notes), result.notes
