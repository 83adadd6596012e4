"""Grade a change task: the hidden tests run on the trusted original plus the agent's edits.

Why the grading checkout is rebuilt rather than reused: anything the agent could
write is a way to manufacture a pass. So the grader starts again from the sealed
checkout, applies only the agent's edits to ordinary source files, drops every
edit to a test or build file (a `conftest.py` that skips everything, an edited
hidden test, a `pytest.py` that shadows pytest, a changed `[tool.pytest]` table,
CI files, ...), writes the trusted hidden tests over whatever is there, and runs
the validation command in a NEW sandbox with no network.

Why the grading checkout is changes, not a copy: the sandbox shows the tree every
condition shares (the sealed source) copy-on-write, as it shows a run its checkout, and
only what the agent's permitted edits and the hidden tests change is written into that
view, by trusted tools, before anything else runs there (`grading_tree`). What the
command under test writes lands in the grading sandbox's own layer, never in the shared
tree; a provider without views copies the tree as before.

Why the exit code is not trusted on its own: code under test can print
"1 passed" and `os._exit(0)`. A pass needs the expected exit code AND the runner's
own evidence (grading/runners.py: a JUnit report at an unguessable path for pytest,
vitest, jest, gotestsum and nextest, `go test -json` events, libtest's lines) whose
test cases ran, passed, include the hidden Python test files and agree with the
runner's printed summary where it prints one.

Failures of the grader itself (no sandbox, a checkout that cannot be built) are
`infra_error`: the run is retried, never scored as the agent's failure.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
import secrets
import shlex
import shutil
import tempfile
import time
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

from docdelta.checkout.seal import SealedCheckout
from docdelta.errors import ConfigError, DocdeltaError, InfraError, SandboxError, TaskError
from docdelta.git import Repo, apply_patch
from docdelta.grading.checks import FileDiff, parse_diff
from docdelta.grading.junit import (
    ReportError,
    file_ran,
    parse_go_json,
    parse_junit,
    parse_libtest,
    parse_pytest_summary,
)
from docdelta.grading.runners import RUNNERS, Evidence, guard_record, invocation, recognise
from docdelta.instructions.globs import GlobSet
from docdelta.results.grades import TAIL_NOTE, DroppedEdit, HiddenTestResult, TestCounts
from docdelta.sandbox.base import ExecResult, FileContent, Sandbox, SandboxProvider, SandboxSpec
from docdelta.tasks.models import RunnerKind, Task, Validation
from docdelta.vocabulary import CONFIG_PATH

TEST_FILES = (
    "test_*.py", "*_test.py", "conftest.py", "**/tests/**", "**/test/**", "**/testing/**",
    "*_test.go", "*.test.[cm][jt]s", "*.test.[jt]s", "*.test.[jt]sx", "*.spec.[cm][jt]s", "*.spec.[jt]s",
    "*.spec.[jt]sx", "**/__tests__/**", "**/__snapshots__/**", "*.snap",
)  # fmt: skip
"""Test files in any language we know: the agent's edits to them never reach grading."""

BUILD_FILES = (
    "Makefile", "GNUmakefile", "makefile", "*.mk", "justfile", "Justfile", "Taskfile.yml",
    "setup.cfg", "tox.ini", "pytest.ini", ".coveragerc", "noxfile.py",
    "sitecustomize.py", "usercustomize.py", "*.pth", "/pytest.py", "/pytest/**", "/_pytest/**",
    "/.github/**", "/.gitlab-ci.yml", "/.circleci/**", "/.pre-commit-config.yaml", "/.docdelta/**",
    "**/__pycache__/**", "*.pyc",
    "package.json", "jest.config.*", "jest.setup.*", "vitest.config.*", "vitest.workspace.*",
    "vitest.setup.*", ".mocharc*", "karma.conf.*", "/.cargo/**", "/.config/nextest.toml",
    "**/node_modules/**",
)  # fmt: skip
"""Files that steer how tests run, shadow the runner on `python -m pytest`'s sys.path or a
reporter docdelta names (`node_modules/jest-junit`), or are bytecode that could stand in
for the source it claims to be compiled from."""

_PYPROJECT_TEST_KEYS = (
    ("tool", "pytest"), ("tool", "coverage"), ("tool", "tox"), ("tool", "hatch", "envs"),
    ("project", "entry-points", "pytest11"), ("tool", "poetry", "plugins", "pytest11"),
)  # fmt: skip
_TAIL_CHARS = 4000


# ------------------------------------------------------------- task assets
@dataclass(frozen=True)
class ChangeAssets:
    """A change task's trusted files: hidden tests (repo path -> bytes) and the reference patch."""

    hidden: dict[str, bytes]
    reference: bytes | None


def task_folder(task_file: Path, task: Task) -> Path:
    """`<tasks dir>/<task id>/`: where a task keeps `hidden/<repo path>` and its reference patch."""
    return task_file.parent / task.id


def _validation(task: Task) -> Validation:
    if task.kind != "change" or task.gold.validation is None:
        raise TaskError(
            f"task {task.id!r} is not a change task with gold.validation",
            hint="set `kind: change` and gold.validation (hidden, command) in the task file",
        )
    return task.gold.validation


def load_assets(task: Task, task_file: Path, repo: Repo, source_sha: str) -> ChangeAssets:
    """Hidden tests from the task folder, else from the source commit; the reference if present."""
    validation = _validation(task)
    _check_runner(task, task_file, validation)
    folder = task_folder(task_file, task)
    blobs = {e.path: e.oid for e in repo.tree(source_sha) if e.is_blob and not e.is_symlink}
    hidden: dict[str, bytes] = {}
    for path in validation.hidden:
        local = folder / "hidden" / _safe_rel(path, task)
        if local.is_file():
            hidden[path] = local.read_bytes()
        elif path in blobs:
            hidden[path] = repo.read_blob(blobs[path])
        else:
            raise TaskError(
                f"task {task.id!r} ({task_file}): hidden test {path} is neither in {local.parent} "
                f"nor in the source commit {source_sha[:12]}",
                hint=f"put the file at {local} or fix gold.validation.hidden",
            )
    ref = folder / validation.reference
    reference = ref.read_bytes() if ref.is_file() else None
    if reference is not None and not parse_diff(reference):
        # The grader applies a diff file by file from its `diff --git` headers; a plain
        # `diff -u` has none, so it would apply nothing and the selftest would blame the tests.
        raise TaskError(
            f"task {task.id!r}: the reference {ref} holds no `diff --git` file section, so it "
            "would apply nothing",
            hint="write it with `git diff` (e.g. `git diff > reference.patch` in a checkout with the "
            "solution), not plain `diff -u`",
        )
    return ChangeAssets(hidden=hidden, reference=reference)


def _check_runner(task: Task, task_file: Path, validation: Validation) -> None:
    """Refuse up front a command whose tests docdelta could never count: it starts no
    runner of `RUNNERS` and declares no JUnit report, so every run would be a "fail"."""
    try:
        argv = shlex.split(validation.command)
    except ValueError as exc:
        raise TaskError(
            f"task {task.id!r} ({task_file}): gold.validation.command cannot be split into words: {exc}",
            hint="quote it as a POSIX shell would; it runs without a shell",
        ) from exc
    if validation.report is None and recognise(argv).kind is RunnerKind.declared:
        known = ", ".join(k.value for k in RunnerKind if k is not RunnerKind.declared)
        raise TaskError(
            f"task {task.id!r} ({task_file}): gold.validation.command {validation.command!r} starts "
            f"no test runner docdelta recognises ({known}; also behind uv run, poetry run, hatch "
            "run, python -m, npx, pnpm, yarn, npm exec), so no test it runs could be counted",
            hint="name the runner directly (e.g. `uv run pytest`, `pnpm exec vitest run`), or set "
            "gold.validation.report to the JUnit XML file the command writes",
        )


def _safe_rel(path: str, task: Task) -> str:
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or any(p in ("..", ".git") for p in parts):
        raise TaskError(
            f"task {task.id!r}: hidden path {path!r} is not a plain repository-relative path",
            hint="list hidden tests as paths like tests/test_feature.py",
        )
    return path


# --------------------------------------------------------- the agent's diff
def capture_agent_diff(sandbox: Sandbox, base_commit: str, *, timeout: float = 120.0) -> bytes:
    """Everything the agent changed in `sandbox`'s workspace since `base_commit` (the sealed commit).

    Untracked files count (staged into a throw-away index, so the agent's own index
    and commits do not matter), ignored files do not; repository config the agent
    may have written cannot reshape the output (hooks, external diff, prefixes,
    textconv are all overridden). Raises InfraError when git cannot produce it.
    """
    index = f"{sandbox.tools_dir}/grading-index-{secrets.token_hex(8)}"
    git = [
        "git", "-c", "core.hooksPath=/dev/null", "-c", "core.quotePath=false", "-c", "diff.noprefix=false",
        "-c", "diff.mnemonicPrefix=false", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
    ]  # fmt: skip
    env = {"GIT_INDEX_FILE": index, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    steps = (
        [*git, "read-tree", base_commit],
        [*git, "add", "--all", "."],
        [*git, "diff", "--cached", "--binary", "--no-renames", "--no-ext-diff", "--no-textconv",
         "--no-color", "--src-prefix=a/", "--dst-prefix=b/", base_commit, "--"],
    )  # fmt: skip
    result: ExecResult | None = None
    for argv in steps:
        result = sandbox.exec(argv, env=env, timeout=timeout)
        if result.exit_code != 0 or result.truncated:
            err = result.stderr.decode(errors="replace").strip()
            raise InfraError(
                f"cannot take the agent's diff ({argv[len(git)]}): {err or 'output truncated'}",
                hint="the run's workspace must still be the sealed git repository",
            )
    assert result is not None
    return result.stdout


# --------------------------------------------------------------- filtering
def _pyproject_tests(data: bytes | None) -> Any:
    """The pyproject tables that steer test runs (an absent file has none); raises on invalid TOML."""
    doc: Any = tomllib.loads(data.decode()) if data is not None else {}
    found = []
    for keys in _PYPROJECT_TEST_KEYS:
        node = doc
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        found.append(node)
    return found


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() and not path.is_symlink() else None


def _changes_test_config(original: bytes | None, edited: bytes | None) -> bool:
    """Does an agent's edit of a pyproject.toml change its test configuration?"""
    try:
        return bool(_pyproject_tests(original) != _pyproject_tests(edited))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return True


def _reason(edit: FileDiff, protect: GlobSet, instructions: frozenset[str] = frozenset()) -> str | None:
    if edit.symlink:
        return "symlinks are not applied"
    if instructions.intersection(edit.paths):
        return "an instruction file: the grader's tree holds none, in every condition"
    hit = next((p for p in edit.paths if protect.matches(p)), None)
    return f"{hit} is a test or build file" if hit else None


@dataclass(frozen=True)
class GradingTree:
    """The grading checkout as changes to `base`, a tree no run ever writes: the sealed
    source every condition shares (`SealedCheckout.shared`), else the sealed checkout.
    The sandbox shows `base` copy-on-write (or copies it) and `Sandbox.change_files` makes
    the changes there, so a cell costs what the agent changed, not the size of the tree."""

    base: Path
    write: dict[str, FileContent]
    """Files as grading sees them: the agent's permitted edits and the hidden tests."""
    remove: list[str]
    """Paths of `base` that grading does not see: `.git`, instruction files, the agent's
    deletions (with the folders they leave empty) and the declared report."""
    applied: list[str]
    dropped: list[DroppedEdit]


def grading_tree(
    sealed: SealedCheckout,
    agent_diff: bytes,
    hidden: Mapping[str, bytes],
    scratch: Path,
    *,
    protect: Sequence[str] = (),
    remove: Sequence[str] = (),
    instructions: Sequence[str] = (),
) -> GradingTree:
    """The grading checkout: sealed original + permitted agent edits + hidden files.

    `remove` lists workspace paths deleted afterwards (a declared report path, so a
    committed fake report cannot count). `instructions`: every condition's instruction
    files, which the grading tree never holds (nor `.git`, whose commit holds them), so
    code under test sees the same tree in every condition and cannot grade one arm
    differently; the agent's edits to them are dropped. `scratch` (empty or absent) holds
    the files the edits touch while `git apply` works them out. Raises InfraError when the
    permitted edits do not apply (they were taken against this very commit, so that is the
    grader's fault, not the agent's).
    """
    base = sealed.shared if sealed.shared is not None and sealed.shared.is_dir() else sealed.path
    stripped = [".git", *(rel for rel in instructions if (base / rel).is_symlink() or (base / rel).is_file())]
    globs = GlobSet([*TEST_FILES, *BUILD_FILES, *protect, *(f"/{p}" for p in hidden)])
    kept: list[FileDiff] = []
    dropped: list[DroppedEdit] = []
    for edit in parse_diff(agent_diff):
        why = _reason(edit, globs, frozenset(instructions))
        if why:
            dropped.append(DroppedEdit(path=edit.path, reason=why))
        else:
            kept.append(edit)
    after = _patched(base, kept, scratch) if kept else {}
    write = {rel: content for rel, content in after.items() if content is not None}
    deleted = [rel for rel, content in after.items() if content is None]
    deleted += _emptied(base, deleted, stripped, write)
    for rel in (e.path for e in kept if PurePosixPath(e.path).name == "pyproject.toml"):
        original = _read(base / rel)
        edited = write[rel].data if rel in write else None
        if _changes_test_config(original, edited):
            dropped.append(DroppedEdit(path=rel, reason="changes pyproject's test configuration"))
            write.pop(rel, None)
            if original is not None:
                write[rel] = FileContent(original, (base / rel).stat().st_mode & 0o777)
    applied = [e.path for e in kept if e.path not in {d.path for d in dropped}]
    for rel, data in hidden.items():
        write[_within(base, rel)] = FileContent(data)
    for rel in remove:
        write.pop(rel, None)
    gone = sorted({*stripped, *deleted, *remove} - set(write))
    return GradingTree(base=base, write=write, remove=gone, applied=applied, dropped=dropped)


def _patched(base: Path, kept: Sequence[FileDiff], scratch: Path) -> dict[str, FileContent | None]:
    """Each path the kept edits touch as they leave it (None: deleted), from `git apply` in
    `scratch` holding only what of `base` those paths meet: their files, and any file or
    link on their way, so it refuses there what it would refuse in the whole tree."""
    touched = list(dict.fromkeys(p for e in kept for p in e.paths))
    scratch.mkdir(parents=True, exist_ok=True)
    for rel in touched:
        _stage(base, rel, scratch)
    try:
        apply_patch(scratch, b"".join(e.raw for e in kept))
    except ConfigError as exc:
        raise InfraError(
            f"the agent's diff does not apply to the sealed checkout: {exc.message}",
            hint="the diff must be taken against the sealed commit (use capture_agent_diff)",
        ) from exc
    after: dict[str, FileContent | None] = {}
    for rel in touched:
        path = scratch / rel
        if path.is_symlink() or path.is_dir():
            continue  # git apply took it as it was (it never makes either from a kept edit)
        exists = path.is_file()
        after[rel] = FileContent(path.read_bytes(), path.stat().st_mode & 0o777) if exists else None
    return after


def _stage(base: Path, rel: str, scratch: Path) -> None:
    """Put into `scratch` what `base` has at `rel` and on the way to it: folders, and the
    first file or link met (a link is recreated, never followed)."""
    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or any(p in (".", "..") or p.lower() == ".git" for p in parts):
        raise InfraError(
            f"the agent's diff touches {rel!r}, which is not a plain path inside the checkout",
            hint="the diff must be taken against the sealed commit (use capture_agent_diff)",
        )
    for depth in range(1, len(parts) + 1):
        src, dst = base.joinpath(*parts[:depth]), scratch.joinpath(*parts[:depth])
        if src.is_symlink():
            if not dst.is_symlink():
                dst.symlink_to(os.readlink(src))
            return
        if not src.is_dir():
            if src.exists() and not dst.exists():
                shutil.copy2(src, dst)
            return
        dst.mkdir(exist_ok=True)


def _emptied(
    base: Path, deleted: Sequence[str], stripped: Sequence[str], written: Collection[str]
) -> list[str]:
    """The folders `git apply` removes with the files it deletes: those it leaves empty
    (what the grading tree no longer holds counts as gone)."""
    gone = {*deleted, *stripped}
    emptied: list[str] = []
    for rel in sorted(deleted, key=lambda p: p.count("/"), reverse=True):
        parent = posixpath.dirname(rel)
        while parent and parent not in gone:
            folder = base / parent
            if folder.is_symlink() or not folder.is_dir():
                break
            left = {f"{parent}/{name}" for name in os.listdir(folder)} - gone
            if left or any(w.startswith(f"{parent}/") for w in written):
                break
            gone.add(parent)
            emptied.append(parent)
            parent = posixpath.dirname(parent)
    return emptied


def _within(base: Path, rel: str) -> str:
    """Where a trusted file at `rel` lands in `base` once the links on its way are followed
    (they stay as they are), refusing a place outside it."""
    top = base.resolve()
    parent = (base / rel).parent.resolve()
    if not parent.is_relative_to(top):
        raise InfraError(f"hidden file {rel} would be written outside the checkout", hint="")
    return (parent.relative_to(top) / PurePosixPath(rel).name).as_posix()


# ----------------------------------------------------------------- running
TAIL_LINES = 15
"""Lines of the command's output a failed grading quotes in its notes: enough to show
`No module named pytest` or `uv: not found`, short enough for a selftest line."""


def output_tail(result: ExecResult, lines: int = TAIL_LINES) -> str:
    """The last `lines` non-empty lines of stdout then stderr (where tools say why they failed)."""
    text = (result.stdout + b"\n" + result.stderr).decode(errors="replace")
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _evidence(
    kind: RunnerKind, result: ExecResult, report: bytes | None
) -> tuple[TestCounts | None, TestCounts | None, list[str], list[str]]:
    """(counts, the runner's own printed counts, case names, notes) from `kind`'s evidence."""
    evidence = Evidence.junit if report is not None else RUNNERS[kind].evidence
    output = (result.stdout + b"\n" + result.stderr).decode(errors="replace")
    summary = parse_pytest_summary(output) if kind is RunnerKind.pytest else None
    try:
        if evidence is Evidence.go_json:
            counts, names = parse_go_json(result.stdout)
            return (counts if counts.total else None), None, names, [] if counts.total else [_NO_TESTS]
        if evidence is Evidence.libtest:
            found, printed, names = parse_libtest(result.stdout, result.stderr)
            return found, printed, names, [] if found is not None else [_NO_TESTS]
        if report is None:
            return None, summary, [], ["no JUnit report was written: no evidence that any test ran"]
        counts, names = parse_junit(report)
    except ReportError as exc:
        what = "JUnit report" if evidence is Evidence.junit else evidence.value
        return None, summary, [], [f"unreadable {what}: {exc}"]
    return counts, summary, names, []


_NO_TESTS = "the output shows no test that ran: no evidence that any test ran"


def guard_problems(record: bytes | None, counts: TestCounts | None, hidden: Sequence[str]) -> list[str]:
    """What the trusted pytest plugin's record (grading/pytest_guard.py) says against a pass:
    it is missing (the plugin never finished), pytest's own test-running code was replaced
    during the run, a test the JUnit report counts as passed is not one it saw pass, or no
    test of a hidden test file passed by its account."""
    if record is None:
        return ["docdelta's pytest guard left no record: the run did not load it or did not finish"]
    try:
        data = json.loads(record)
        tampered: dict[str, str] = dict(data["tampered"])
        outcomes: dict[str, str] = dict(data["outcomes"])
    except (ValueError, KeyError, TypeError) as exc:
        return [f"docdelta's pytest guard left an unreadable record: {exc}"]
    notes = [
        f"pytest's own {what} was replaced during the run (seen at {where}): the tests' outcomes "
        "cannot be trusted"
        for what, where in sorted(tampered.items())
    ]
    passed = sorted(n for n, outcome in outcomes.items() if outcome == "passed")
    if counts is not None and counts.passed != len(passed):
        notes.append(
            f"the JUnit report counts {counts.passed} passed test case(s), docdelta's pytest guard saw "
            f"{len(passed)} pass"
        )
    for path in hidden:
        name = PurePosixPath(path).name
        ran = any(n == path or n.startswith(f"{path}::") for n in passed)
        if GlobSet(["test_*.py", "*_test.py"]).matches(name) and not ran:
            notes.append(f"docdelta's pytest guard saw no test of the hidden test {path} pass")
    return notes


def judge_run(
    validation: Validation,
    result: ExecResult,
    report: bytes | None,
    hidden: Sequence[str],
    kind: RunnerKind = RunnerKind.pytest,
    guard: bytes | None = None,
    *,
    guarded: bool = False,
) -> tuple[bool, TestCounts | None, TestCounts | None, list[str]]:
    """(passed, counts, the runner's printed counts, notes): the exit code cross-checked
    with the runner's evidence (see grading/runners.py).

    A pure function so every way of faking a pass can be tested without a sandbox.
    A failure's notes end with the command's last lines of output: the reason a run
    shows no test (`No module named pytest`, `uv: not found`) is there, not in the counts.
    """
    notes: list[str] = []
    if result.timed_out:
        notes.append(f"the validation command timed out after {validation.timeout_s:g}s")
    elif result.exit_code != validation.exit_code:
        notes.append(f"exit code {result.exit_code}, expected {validation.exit_code}")
    counts, summary, names, problems = _evidence(kind, result, report)
    notes += problems
    if counts is not None:
        python = kind is RunnerKind.pytest
        notes += _count_problems(validation, counts, summary, names, hidden if python else ())
    if guarded and validation.exit_code == 0:  # docdelta loaded its pytest guard
        notes += guard_problems(guard, counts, hidden)
    if notes:
        tail = output_tail(result)
        notes += [missing_program_note(program) for program in missing_programs(tail)]
        notes.append(f"{TAIL_NOTE}\n{tail}" if tail else f"{TAIL_NOTE} (none: the command printed nothing)")
    return not notes, counts, summary, notes


_MISSING_PROGRAM = re.compile(
    r"setpriv: failed to execute (?P<a>[\w.+/-]+)"  # the Docker sandbox's exec
    r"|bwrap: execvp (?P<b>[\w.+/-]+)"  # the local sandbox's exec
    r"|\b(?:sh|bash|dash|exec)(?:: line \d+| \d+)?:(?: \d+:)? (?P<c>[\w.+/-]+): (?:command )?not found"
    r"|^(?P<d>[\w.+/-]+): No such file or directory$",  # the pytest guard's launcher (runners.py)
    re.MULTILINE,
)
"""How a program that is not on the sandbox's PATH shows in the output of the command that ran it."""


def missing_programs(output: str) -> list[str]:
    """The programs `output` says could not be started, once each, in order."""
    found = (next(g for g in m.groups() if g) for m in _MISSING_PROGRAM.finditer(output))
    return list(dict.fromkeys(found))


def missing_program_note(program: str) -> str:
    """The fix for a program the sandbox cannot find: the sandbox shows only its read-only
    system root and what `.docdelta.yml` names, so a project tool (uv, pnpm, a virtualenv's
    pytest) needs its folder named there; the error alone (`setpriv: failed to execute uv`)
    does not say so."""
    return (
        f"`{program}` is not in the sandbox: name the folder that holds it in `sandbox.paths` and put "
        f"that folder on `sandbox.env.PATH` in {CONFIG_PATH} (e.g. paths: [/opt/uv/bin], env: "
        "{PATH: /opt/uv/bin:/usr/bin:/bin}), or install the project's dependencies with "
        "`sandbox.workspace`; docs/sandboxes.md shows each"
    )


def _count_problems(
    validation: Validation,
    counts: TestCounts,
    summary: TestCounts | None,
    classnames: Sequence[str],
    hidden: Sequence[str],
) -> list[str]:
    notes = []
    if counts.total == 0:
        notes.append("the report lists no test case: no test ran")
    elif validation.exit_code == 0 and counts.failed + counts.errors:
        notes.append(f"{counts.failed} failed and {counts.errors} errored test case(s) in the report")
    elif validation.exit_code == 0 and not counts.passed:
        notes.append("no test case passed (all skipped)")
    if summary is not None and (summary.passed, summary.failed, summary.errors) != (
        counts.passed,
        counts.failed,
        counts.errors,
    ):
        notes.append(
            f"the printed summary ({summary.passed} passed, {summary.failed} failed, {summary.errors} "
            f"errors) disagrees with the report ({counts.passed}, {counts.failed}, {counts.errors})"
        )
    for path in hidden:
        name = PurePosixPath(path).name
        if GlobSet(["test_*.py", "*_test.py"]).matches(name) and not file_ran(path, classnames):
            notes.append(f"no test case from the hidden test {path} ran")
    return notes


def _infra(notes: str, validation: Validation, **kw: Any) -> HiddenTestResult:
    """The grader's own failure (never the agent's): retried, not scored."""
    return HiddenTestResult(
        status="infra_error", expected_exit_code=validation.exit_code, notes=[notes], **kw
    )


class GradingPhase(StrEnum):
    """The parts of one hidden-test grading, in order (`grade_change`'s `phases`)."""

    tree = "tree"
    """the grading tree's changes worked out on the host (`grading_tree`)"""
    sandbox = "sandbox"
    """the offline sandbox made on the tree's base"""
    files = "files"
    """the tree's changes and the runner's own files written into it"""
    run = "run"
    """the validation command"""
    reports = "reports"
    """the runner's report and the pytest guard's record read back"""
    teardown = "teardown"
    """the sandbox closed and removed"""
    verdict = "verdict"
    """the evidence parsed and judged (`judge_run`)"""


class _Laps:
    """Wall seconds since the previous lap, into `into` under each phase's name (if given)."""

    def __init__(self, into: dict[str, float] | None) -> None:
        self._into = into
        self._at = time.perf_counter()

    def lap(self, phase: GradingPhase) -> None:
        now = time.perf_counter()
        if self._into is not None:
            self._into[phase.value] = now - self._at
        self._at = now


def grade_change(
    task: Task,
    sealed: SealedCheckout,
    agent_diff: bytes,
    hidden: Mapping[str, bytes],
    provider: SandboxProvider,
    *,
    spec: SandboxSpec | None = None,
    workdir: Path | None = None,
    instructions: Sequence[str] = (),
    phases: dict[str, float] | None = None,
) -> HiddenTestResult:
    """Run `task`'s hidden tests on `sealed` + the agent's permitted edits, in a new offline sandbox.

    `provider` must be free to create a sandbox (for the local provider: a slot no
    live sandbox holds). `spec` supplies limits and env (e.g. PATH to an interpreter);
    its network is always forced to "none". `workdir` holds the scratch files of the
    edits. `instructions`: every condition's instruction files, kept out of the grading
    tree (`grading_tree`). `phases`, if given, receives the wall seconds of each
    `GradingPhase` (bench/bench_grading.py prints them).
    """
    validation = _validation(task)
    argv = shlex.split(validation.command)
    kind = recognise(argv).kind
    remove = [validation.report] if validation.report else []
    run_spec = dataclasses.replace(spec or SandboxSpec(), network="none")
    laps = _Laps(phases)
    with tempfile.TemporaryDirectory(prefix="docdelta-grade-", dir=workdir) as tmp:
        try:
            tree = grading_tree(
                sealed,
                agent_diff,
                hidden,
                Path(tmp),
                protect=validation.protect,
                remove=remove,
                instructions=instructions,
            )
        except (InfraError, OSError) as exc:
            return _infra(f"could not build the grading checkout: {exc}", validation)
    laps.lap(GradingPhase.tree)
    edits: dict[str, Any] = {"applied": tree.applied, "dropped": tree.dropped}
    try:
        with provider.create(tree.base, run_spec) as sandbox:
            laps.lap(GradingPhase.sandbox)
            sandbox.change_files(tree.write, tree.remove)
            private = f"{sandbox.tools_dir}/junit-{secrets.token_hex(12)}.xml"
            run = invocation(argv, private_report=private, declared=validation.report)
            for path, text in run.files.items():
                sandbox.write_file(path, text.encode())
            laps.lap(GradingPhase.files)
            result = sandbox.exec(run.argv, env=run.env or None, timeout=validation.timeout_s)
            laps.lap(GradingPhase.run)
            report = _read_report(sandbox, run.report) if run.report else None
            guarded = run.kind is RunnerKind.pytest and validation.report is None
            guard = _read_report(sandbox, guard_record(private)) if guarded else None
            isolation = sandbox.isolation
            laps.lap(GradingPhase.reports)
        laps.lap(GradingPhase.teardown)
    except (DocdeltaError, OSError) as exc:
        return _infra(f"the grading sandbox failed: {exc}", validation, runner=kind, **edits)
    passed, counts, summary, notes = judge_run(
        validation, result, report, list(hidden), run.kind, guard, guarded=guarded
    )
    tail = (result.stdout + result.stderr).decode(errors="replace")[-_TAIL_CHARS:]
    laps.lap(GradingPhase.verdict)
    return HiddenTestResult(
        status="pass" if passed else "fail",
        exit_code=result.exit_code,
        expected_exit_code=validation.exit_code,
        timed_out=result.timed_out,
        counts=counts,
        summary=summary,
        notes=notes or [f"{counts.passed if counts else 0} test case(s) passed"],
        isolation=isolation,
        duration_s=result.duration_s,
        output_tail=tail,
        runner=run.kind,
        guarded=guarded,
        **edits,
    )


def _read_report(sandbox: Sandbox, path: str) -> bytes | None:
    """The report's bytes, or None when the run wrote none (read_file fails on a missing file)."""
    try:
        return sandbox.read_file(path)
    except SandboxError:
        return None
