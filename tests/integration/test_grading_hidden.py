"""Hidden-test grading and the grader selftest, end to end: real git, real local sandbox, real pytest.

The project under test has a bug (`add` subtracts); the hidden test is in the
source commit and stripped from the agent's checkout. Each "agent" below edits a
real sandbox copy of the sealed checkout, and its diff is taken with
`capture_agent_diff`, exactly as after a real run.

The validation command names this interpreter explicitly (`sys.executable -m
pytest`), and the sandbox is shown it read-only (PYTHON_TOOLCHAIN): a bare `python3`
would be the system one, which has no pytest.
"""

from __future__ import annotations

import io
import shlex
import sys
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from gitrepo import GitRepo
from toolchain import PYTHON_TOOLCHAIN

from docdelta.checkout.seal import SealedCheckout, seal, seal_conditions
from docdelta.errors import TaskError
from docdelta.git import Repo
from docdelta.grading.hidden import GradingTree, capture_agent_diff, grade_change, grading_tree
from docdelta.grading.selftest import GREEN_CONFTEST, selftest
from docdelta.instructions.detect import InstructionMatcher, Overlay
from docdelta.results.grades import HiddenTestResult
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.local import LocalProvider
from docdelta.tasks.models import Gold, Task, Validation

PYTHON = shlex.quote(sys.executable)
HIDDEN = "tests/test_hidden.py"
HIDDEN_TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
PYPROJECT = '[project]\nname = "calc"\nversion = "0.1"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
FIX_DIFF = (
    b"diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
    b"@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
)

Edits = Mapping[str, str | None]


def _task(command: str | None = None, *, timeout_s: float = 60, report: str | None = None) -> Task:
    cmd = command or f"{PYTHON} -m pytest -p no:cacheprovider {HIDDEN}"
    validation = Validation(hidden=[HIDDEN], command=cmd, timeout_s=timeout_s, report=report)
    return Task(id="fix-add", prompt="make add add", kind="change", gold=Gold(validation=validation))


def _seal(tmp_path: Path, files: Mapping[str, str], strip: list[str]) -> SealedCheckout:
    repo = GitRepo.init(tmp_path / "src")
    sha = repo.commit(dict(files))
    return seal(Repo(repo.path), sha, Overlay(), tmp_path / "sealed", InstructionMatcher(), strip)


@pytest.fixture
def sealed(tmp_path: Path) -> SealedCheckout:
    files = {"calc/__init__.py": "", "calc/ops.py": BUGGY, HIDDEN: HIDDEN_TEST, "pyproject.toml": PYPROJECT}
    return _seal(tmp_path, files, [f"/{HIDDEN}"])


@pytest.fixture
def provider(tmp_path: Path) -> LocalProvider:
    return LocalProvider(root=tmp_path / "sandboxes", slot=1, ro_paths=PYTHON_TOOLCHAIN)


@pytest.fixture
def agent(tmp_path: Path, sealed: SealedCheckout) -> Callable[[Edits], bytes]:
    """Apply edits in a real sandbox (None deletes), as an agent would; return its captured diff."""
    agents = LocalProvider(root=tmp_path / "agent-sandboxes", slot=0)

    def run(edits: Edits) -> bytes:
        with agents.create(sealed.path, SandboxSpec()) as box:
            for path, text in edits.items():
                if text is None:
                    box.exec(["rm", path])
                else:
                    box.write_file(path, text.encode())
            return capture_agent_diff(box, sealed.commit)

    return run


def _grade(task: Task, sealed: SealedCheckout, diff: bytes, provider: LocalProvider) -> HiddenTestResult:
    return grade_change(task, sealed, diff, {HIDDEN: HIDDEN_TEST.encode()}, provider)


# ------------------------------------------------------------------ grading
def test_the_fix_passes_and_the_untouched_checkout_fails(
    sealed: SealedCheckout, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    fixed = _grade(_task(), sealed, agent({"calc/ops.py": FIXED}), provider)
    assert fixed.status == "pass", fixed.notes
    assert fixed.counts is not None and fixed.counts.passed == 1
    assert fixed.applied == ["calc/ops.py"]
    untouched = _grade(_task(), sealed, b"", provider)
    assert untouched.status == "fail"
    assert untouched.counts is not None and untouched.counts.failed == 1
    assert "exit code 1, expected 0" in untouched.notes


def test_hidden_test_is_not_in_the_agents_checkout(sealed: SealedCheckout) -> None:
    assert not (sealed.path / HIDDEN).exists()


def test_a_new_untracked_module_is_graded(
    sealed: SealedCheckout, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    edits = {"calc/impl.py": FIXED, "calc/ops.py": "from calc.impl import add  # noqa: F401\n"}
    result = _grade(_task(), sealed, agent(edits), provider)
    assert result.status == "pass", result.notes
    assert sorted(result.applied) == ["calc/impl.py", "calc/ops.py"]


def test_a_conftest_that_makes_everything_green_is_dropped(
    sealed: SealedCheckout, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    cheat = _grade(_task(), sealed, agent({"conftest.py": GREEN_CONFTEST}), provider)
    assert cheat.status == "fail"
    assert [d.path for d in cheat.dropped] == ["conftest.py"]
    # The same cheat next to a real fix: the fix still counts, the conftest still does not.
    both = _grade(_task(), sealed, agent({"conftest.py": GREEN_CONFTEST, "calc/ops.py": FIXED}), provider)
    assert both.status == "pass", both.notes
    assert both.applied == ["calc/ops.py"]
    assert [d.path for d in both.dropped] == ["conftest.py"]


def test_an_agent_written_hidden_test_is_replaced_by_the_trusted_one(
    sealed: SealedCheckout, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    fake = "def test_add():\n    assert True\n"
    result = _grade(_task(), sealed, agent({HIDDEN: fake, "tests/conftest.py": GREEN_CONFTEST}), provider)
    assert result.status == "fail"
    assert sorted(d.path for d in result.dropped) == ["tests/conftest.py", HIDDEN]


def shown(tree: GradingTree, provider: LocalProvider) -> dict[str, str]:
    """The grading tree as a sandbox shows it: each file's mode and text, each link's target."""
    with provider.create(tree.base, SandboxSpec()) as box:
        box.change_files(tree.write, tree.remove)
        packed = box.exec(["tar", "-c", "-f", "-", "."])
    assert packed.exit_code == 0, packed.stderr
    with tarfile.open(fileobj=io.BytesIO(packed.stdout)) as archive:
        found = {}
        for member in archive:
            name = member.name.removeprefix("./")
            if member.issym():
                found[name] = f"-> {member.linkname}"
            elif member.isfile():
                data = archive.extractfile(member)
                assert data is not None
                found[name] = f"{member.mode & 0o777:o} {data.read().decode()}"
            elif name not in ("", "."):
                found[name] = "dir"
    return found


def test_a_planted_node_module_never_reaches_grading(
    tmp_path: Path, sealed: SealedCheckout, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    """jest is given `--reporters=jest-junit`, resolved from the checkout's node_modules
    first: an agent's own `node_modules/jest-junit` could write a passing report."""
    fake = "module.exports = class { onRunComplete() { /* write a passing report */ } };\n"
    diff = agent({"node_modules/jest-junit/index.js": fake, "calc/ops.py": FIXED})
    tree = grading_tree(sealed, diff, {HIDDEN: HIDDEN_TEST.encode()}, tmp_path / "scratch")
    assert tree.applied == ["calc/ops.py"]
    assert [d.path for d in tree.dropped] == ["node_modules/jest-junit/index.js"]
    assert not any(path.startswith("node_modules") for path in shown(tree, provider))


def test_the_grading_tree_is_the_sealed_one_with_the_permitted_edits_and_the_hidden_test(
    tmp_path: Path, provider: LocalProvider
) -> None:
    """Only the changes are written, yet the sandbox shows the whole grading checkout: a
    deleted module's emptied folder is gone, a new module and a mode change are there, the
    hidden test is there, the condition's instruction file, `.git`, a conftest and an edit
    of the test configuration are not; the sealed checkout is as it was."""
    repo = GitRepo.init(tmp_path / "src")
    files = {
        "calc/__init__.py": "",
        "calc/ops.py": BUGGY,
        "calc/old/legacy.py": "OLD = 1\n",
        "run.sh": "echo run\n",
        "pyproject.toml": PYPROJECT,
        HIDDEN: HIDDEN_TEST,
    }
    sha = repo.commit(files)
    overlay = Overlay(files={"AGENTS.md": b"# Rules\n"})
    sealed = seal(Repo(repo.path), sha, overlay, tmp_path / "sealed", InstructionMatcher(), [f"/{HIDDEN}"])
    before = sorted(
        (p.relative_to(sealed.path).as_posix(), p.read_bytes()) for p in sealed.path.rglob("*") if p.is_file()
    )
    agents = LocalProvider(root=tmp_path / "agent-sandboxes", slot=0)
    with agents.create(sealed.path, SandboxSpec()) as box:
        box.write_file("calc/ops.py", FIXED.encode())
        box.write_file("calc/new.py", b"NEW = 2\n")
        box.write_file("conftest.py", GREEN_CONFTEST.encode())
        box.write_file("pyproject.toml", PYPROJECT.replace('"-q"', '"-q -k nothing"').encode())
        box.write_file("AGENTS.md", b"# Mine\n")
        assert box.exec(["sh", "-c", "rm -r calc/old && chmod +x run.sh"]).exit_code == 0
        diff = capture_agent_diff(box, sealed.commit)
    agents.close()
    tree = grading_tree(
        sealed, diff, {HIDDEN: HIDDEN_TEST.encode()}, tmp_path / "scratch", instructions=["AGENTS.md"]
    )
    assert shown(tree, provider) == {
        "calc": "dir",
        "calc/__init__.py": "644 ",
        "calc/ops.py": f"644 {FIXED}",
        "calc/new.py": "644 NEW = 2\n",
        "run.sh": "755 echo run\n",
        "pyproject.toml": f"644 {PYPROJECT}",
        "tests": "dir",
        HIDDEN: f"644 {HIDDEN_TEST}",
    }
    assert sorted(tree.applied) == ["calc/new.py", "calc/old/legacy.py", "calc/ops.py", "run.sh"]
    assert sorted(d.path for d in tree.dropped) == ["AGENTS.md", "conftest.py", "pyproject.toml"]
    after = sorted(
        (p.relative_to(sealed.path).as_posix(), p.read_bytes()) for p in sealed.path.rglob("*") if p.is_file()
    )
    assert after == before


def test_code_under_test_changes_only_its_own_grading(
    tmp_path: Path, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    """Two conditions' checkouts made as a run makes them share their sealed source, which
    grading shows both: code under test that wrecks the tree and writes through hard links
    changes neither it nor the checkouts, and sees the same mount in either condition."""
    repo = GitRepo.init(tmp_path / "src")
    sha = repo.commit({"calc/__init__.py": "", "calc/ops.py": BUGGY, HIDDEN: HIDDEN_TEST})
    overlays = {
        tmp_path / "co" / c: Overlay(files={"AGENTS.md": d}) for c, d in (("base", b"a\n"), ("head", b"b\n"))
    }
    sealed = seal_conditions(Repo(repo.path), sha, overlays, InstructionMatcher(), [f"/{HIDDEN}"])
    checkouts = list(sealed.values())
    shared = checkouts[0].shared
    assert shared is not None and shared == checkouts[1].shared

    def files() -> list[tuple[str, bytes]]:
        roots = [c.path for c in checkouts] + [shared]
        return sorted((str(p), p.read_bytes()) for r in roots for p in r.rglob("*") if p.is_file())

    before = files()
    wreck = (
        "sh -c 'echo changed >> calc/ops.py; ln calc/__init__.py hard && echo x >> hard; rm -rf calc .git; "
        'grep -o " /workspace/repo .*" /proc/self/mountinfo\''
    )
    task = _task(command=wreck)
    seen = [
        grade_change(task, c, FIX_DIFF, {HIDDEN: HIDDEN_TEST.encode()}, provider, instructions=["AGENTS.md"])
        for c in checkouts
    ]
    assert [r.status for r in seen] == ["fail", "fail"], [r.notes for r in seen]
    assert seen[0].output_tail.strip() and seen[0].output_tail == seen[1].output_tail
    assert files() == before
    fixed = _grade(_task(), checkouts[1], FIX_DIFF, provider)
    assert fixed.status == "pass", fixed.notes


def test_pyproject_test_config_edits_are_undone_but_other_edits_kept(
    sealed: SealedCheckout, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    # Deselecting the hidden test through addopts would make pytest find nothing.
    cheat = PYPROJECT.replace('addopts = "-q"', 'addopts = "-q -k nothing_matches"')
    result = _grade(_task(), sealed, agent({"pyproject.toml": cheat, "calc/ops.py": FIXED}), provider)
    assert result.status == "pass", result.notes
    assert [(d.path, d.reason) for d in result.dropped] == [
        ("pyproject.toml", "changes pyproject's test configuration")
    ]
    honest = PYPROJECT.replace('version = "0.1"', 'version = "0.2"')
    kept = _grade(_task(), sealed, agent({"pyproject.toml": honest, "calc/ops.py": FIXED}), provider)
    assert kept.status == "pass" and not kept.dropped
    assert sorted(kept.applied) == ["calc/ops.py", "pyproject.toml"]


def test_code_that_prints_a_pass_and_exits_zero_is_not_a_pass(
    sealed: SealedCheckout, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    # Imported during collection: ends the whole pytest process with status 0 before any test runs.
    rigged = "import os\nprint('=== 1 passed in 0.01s ===', flush=True)\nos._exit(0)\n"
    result = _grade(_task(), sealed, agent({"calc/ops.py": rigged}), provider)
    assert result.exit_code == 0
    assert result.status == "fail"
    assert "no JUnit report was written: no evidence that any test ran" in result.notes


def test_a_command_that_only_echoes_passed_is_not_a_pass(
    sealed: SealedCheckout, provider: LocalProvider
) -> None:
    task = _task(command="sh -c 'echo \"1 passed in 0.01s\"; echo PASSED'")
    result = _grade(task, sealed, FIX_DIFF, provider)
    assert (result.exit_code, result.status) == (0, "fail")
    assert result.summary is None  # a pytest-like line from a command that is no pytest counts for nothing
    assert "no JUnit report was written: no evidence that any test ran" in result.notes


def test_a_declared_report_committed_by_the_agent_does_not_count(
    sealed: SealedCheckout, provider: LocalProvider, agent: Callable[[Edits], bytes]
) -> None:
    forged = '<testsuite><testcase classname="tests.test_hidden" name="test_add"/></testsuite>'
    task = _task(command="true", report="report.xml")
    result = _grade(task, sealed, agent({"report.xml": forged}), provider)
    assert result.status == "fail"
    assert "no JUnit report was written: no evidence that any test ran" in result.notes


def test_a_grader_that_cannot_get_a_sandbox_is_infra_error(
    tmp_path: Path, sealed: SealedCheckout, provider: LocalProvider
) -> None:
    with provider.create(sealed.path, SandboxSpec()):  # the slot is taken: create() refuses
        result = _grade(_task(), sealed, FIX_DIFF, provider)
    assert result.status == "infra_error"
    assert "the grading sandbox failed" in result.notes[0]
    assert result.applied == ["calc/ops.py"]


def test_a_diff_from_another_commit_is_infra_error(sealed: SealedCheckout, provider: LocalProvider) -> None:
    stale = FIX_DIFF.replace(b"return a - b", b"return a * b")
    result = _grade(_task(), sealed, stale, provider)
    assert result.status == "infra_error"
    assert "does not apply" in result.notes[0]


def test_a_hanging_test_run_fails_with_a_timeout(sealed: SealedCheckout, provider: LocalProvider) -> None:
    result = _grade(_task(command="sleep 30", timeout_s=1), sealed, FIX_DIFF, provider)
    assert result.status == "fail" and result.timed_out
    assert "timed out after 1s" in result.notes[0]


# ----------------------------------------------------------------- selftest
def test_selftest_passes_a_sound_task(sealed: SealedCheckout, provider: LocalProvider) -> None:
    report = selftest(_task(), sealed, {HIDDEN: HIDDEN_TEST.encode()}, FIX_DIFF, provider, flake_runs=2)
    assert report.passed
    names = [leg.name for leg in report.legs]
    assert names == [
        "hidden tests absent from the agent's checkout",
        "reference passes",
        "untouched checkout fails",
        "tampered conftest.py fails",
        f"tampered hidden test {HIDDEN} fails",
        "flake probe (2 runs of the reference)",
    ]


def test_selftest_refuses_a_test_that_passes_without_the_fix(
    sealed: SealedCheckout, provider: LocalProvider
) -> None:
    weak = {HIDDEN: b"from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 2) is not None\n"}
    with pytest.raises(TaskError, match=r"task 'fix-add' failed its selftest: untouched checkout fails"):
        selftest(_task(), sealed, weak, FIX_DIFF, provider, flake_runs=1)


def test_selftest_refuses_hidden_tests_the_agent_can_read(tmp_path: Path, provider: LocalProvider) -> None:
    files = {"calc/__init__.py": "", "calc/ops.py": BUGGY, HIDDEN: HIDDEN_TEST}
    visible = _seal(tmp_path, files, strip=[])
    with pytest.raises(TaskError, match=r"hidden tests absent from the agent's checkout: the agent can read"):
        selftest(_task(), visible, {HIDDEN: HIDDEN_TEST.encode()}, FIX_DIFF, provider, flake_runs=1)


def test_selftest_needs_a_reference(sealed: SealedCheckout, provider: LocalProvider) -> None:
    with pytest.raises(TaskError, match="has no reference solution"):
        selftest(_task(), sealed, {HIDDEN: HIDDEN_TEST.encode()}, None, provider)
