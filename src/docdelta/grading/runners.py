"""Which test runner a change task's validation command starts, and how its evidence is had.

A real project does not run `pytest`; it runs `uv run --frozen pytest`, `poetry run pytest`,
`pnpm exec vitest run`, `go test ./...` or `cargo test -p crate`. The grader needs each
runner's own account of which tests ran (an exit code proves nothing), so the command is
split like a shell would (shlex, no shell runs it), launchers (`env`, `uv run`, `poetry
run`, `hatch run`, `pdm run`, `python -m`, `npx`, `pnpm`, `yarn`, `npm exec`) are skipped
by their own option grammar, and the word that is left names the runner. `RUNNERS` is the
one table of what each runner is and how docdelta gets its report: a JUnit file at a path
docdelta chooses (pytest, vitest, jest through jest-junit, gotestsum, nextest), `go test
-json` events, or libtest's per-test lines for `cargo test`. A command that starts no
runner we know must declare the JUnit `report` it writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import PurePosixPath

from docdelta.tasks.models import RunnerKind


class Evidence(StrEnum):
    """Where a runner's account of the tests that ran comes from."""

    junit = "a JUnit XML report"
    go_json = "`go test -json` events on stdout"
    libtest = "libtest's per-test lines on stdout"


def _no_flags(_report: str) -> tuple[str, ...]:
    return ()


def _nextest_config(report: str) -> str:
    """Where the nextest tool config for `report` is written (beside it, in the tools dir)."""
    return str(PurePosixPath(report).with_suffix(".nextest.toml"))


@dataclass(frozen=True)
class TestRunner:
    """One row of the runner table: where the evidence is, and what docdelta adds to get it."""

    kind: RunnerKind
    evidence: Evidence
    how: str
    """What docdelta adds to the command (for the docs and error messages)."""
    flags: Callable[[str], tuple[str, ...]] = _no_flags
    """Words inserted after the runner's own name (and subcommand), given the report path."""
    env: Callable[[str], dict[str, str]] = lambda _report: {}
    files: Callable[[str], dict[str, str]] = lambda _report: {}
    """Files written in the tools dir before the run (path -> text), given the report path."""

    @property
    def writes_report(self) -> bool:
        """Does docdelta choose the JUnit path (the runner writes it where told)?"""
        return self.evidence is Evidence.junit and self.kind is not RunnerKind.declared


GUARD_PREFIX = "docdelta_guard_"
"""How the trusted pytest plugin's module is named in the tools dir (then the report's token)."""


def guard_module(report: str) -> str:
    """The module name of the pytest guard (grading/pytest_guard.py) for the private `report`:
    unguessable like the report, so the checkout cannot shadow it on `python -m pytest`'s path."""
    return GUARD_PREFIX + re.sub(r"\W", "_", PurePosixPath(report).stem)


def guard_record(report: str) -> str:
    """Where the pytest guard writes its JSON record: beside its module."""
    return str(PurePosixPath(report).with_name(guard_module(report) + ".json"))


GUARD_PATH_SH = (
    'PYTHONPATH="$0${PYTHONPATH:+:$PYTHONPATH}"; export PYTHONPATH; '
    'command -v "$1" >/dev/null || { echo "$1: No such file or directory" >&2; exit 127; }; exec "$@"'
)
"""`sh -c` script that puts its $0 (the tools dir) first on PYTHONPATH, before whatever the
toolchain's environment (or the image) already holds there, and runs the command, whose
words no shell parses; a missing command is named as plainly as without the shell."""


def with_guard_path(argv: Sequence[str], report: str) -> list[str]:
    """`argv` run with the guard's directory (the report's) first on PYTHONPATH."""
    return ["sh", "-c", GUARD_PATH_SH, str(PurePosixPath(report).parent), *argv]


def _guard_files(report: str) -> dict[str, str]:
    source = (resources.files("docdelta.grading") / "pytest_guard.py").read_text(encoding="utf-8")
    return {str(PurePosixPath(report).with_name(guard_module(report) + ".py")): source}


NEXTEST_PROFILE = "docdelta-junit"
"""The nextest profile docdelta defines in its tool config (not `default-*`, which nextest
reserves); repository profiles of other names keep their own settings."""

RUNNERS: dict[RunnerKind, TestRunner] = {
    r.kind: r
    for r in (
        TestRunner(
            RunnerKind.pytest,
            Evidence.junit,
            "adds --junitxml=<private path> and -p <docdelta's guard plugin>, with the tools dir "
            "first on PYTHONPATH",
            flags=lambda report: (f"--junitxml={report}", f"-p{guard_module(report)}"),
            files=_guard_files,
        ),
        TestRunner(  # also Vite+'s `vp test`, which is Vitest with its options
            RunnerKind.vitest,
            Evidence.junit,
            "adds --reporter=default --reporter=junit --outputFile.junit=<private path>",
            flags=lambda report: ("--reporter=default", "--reporter=junit", f"--outputFile.junit={report}"),
        ),
        TestRunner(
            RunnerKind.jest,
            Evidence.junit,
            "adds --reporters=default --reporters=jest-junit and JEST_JUNIT_OUTPUT_FILE=<private path> "
            "(jest-junit must be among the project's dev dependencies)",
            flags=lambda _report: ("--reporters=default", "--reporters=jest-junit"),
            env=lambda report: {"JEST_JUNIT_OUTPUT_FILE": report},
        ),
        TestRunner(
            RunnerKind.go_test,
            Evidence.go_json,
            "adds -json after `test` and reads the events",
            flags=lambda _report: ("-json",),
        ),
        TestRunner(
            RunnerKind.gotestsum,
            Evidence.junit,
            "adds --junitfile=<private path>",
            flags=lambda report: (f"--junitfile={report}",),
        ),
        TestRunner(RunnerKind.cargo_test, Evidence.libtest, "reads libtest's `test <name> ... ok` lines"),
        TestRunner(
            RunnerKind.nextest,
            Evidence.junit,
            f"adds a tool config whose profile {NEXTEST_PROFILE} writes JUnit to <private path>, "
            "and --profile",
            flags=lambda report: (
                f"--tool-config-file=docdelta:{_nextest_config(report)}",
                f"--profile={NEXTEST_PROFILE}",
            ),
            files=lambda report: {
                _nextest_config(report): f'[profile.{NEXTEST_PROFILE}.junit]\npath = "{report}"\n'
            },
        ),
        TestRunner(RunnerKind.declared, Evidence.junit, "reads the JUnit file named by `report`"),
    )
}
"""The one table of runners: each kind, where its evidence comes from, what is added."""

_PYTHON_RE = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)*)?$")
_VITEST_SUBCOMMANDS = frozenset({"run", "watch", "dev", "related", "bench"})


@dataclass(frozen=True)
class _Launcher:
    """A program that runs another: one of `subcommands` leads to the command, whose own
    options (`value_options` take the next word as their value) come first."""

    subcommands: frozenset[str] = frozenset()
    value_options: frozenset[str] = frozenset()
    global_options: frozenset[str] = frozenset()
    """Options before the subcommand that take a value."""
    direct: bool = False
    """Also runs a package binary named directly (`pnpm vitest`, `yarn jest`)."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_UV_VALUES = _words(
    "--with --with-editable --with-requirements --python -p --extra --group --only-group --no-group "
    "--package --env-file --directory --project --index --default-index -i --index-url "
    "--extra-index-url -f --find-links --config-file --cache-dir --color --exclude-newer "
    "-P --upgrade-package --reinstall-package --refresh-package --no-binary-package "
    "--no-build-package --index-strategy --keyring-provider --resolution --prerelease --link-mode "
    "-C --config-setting --python-platform --no-extra --allow-insecure-host"
)
_PNPM_VALUES = _words("-C --dir --filter -F --workspace-dir --reporter --loglevel")
_POETRY_VALUES = _words("-C --directory -P --project")
_HATCH_GLOBALS = _words("-e --env -p --project --data-dir --cache-dir --config")
_LAUNCHERS: dict[str, _Launcher] = {
    "uv": _Launcher(_words("run"), _UV_VALUES, _UV_VALUES),
    "poetry": _Launcher(_words("run"), _POETRY_VALUES, _POETRY_VALUES),
    "hatch": _Launcher(_words("run"), frozenset(), _HATCH_GLOBALS),
    "pdm": _Launcher(_words("run"), _words("-p --project --venv"), _words("-p --project")),
    "npx": _Launcher(frozenset(), _words("-p --package -c --call"), direct=True),
    "bunx": _Launcher(frozenset(), _words("-p --package"), direct=True),
    "pnpm": _Launcher(_words("exec dlx"), _PNPM_VALUES, _PNPM_VALUES, direct=True),
    "yarn": _Launcher(_words("exec dlx run"), _words("--cwd"), _words("--cwd"), direct=True),
    "npm": _Launcher(_words("exec x"), _words("-w --workspace -p --package --prefix"), _words("--prefix")),
}  # fmt: skip


@dataclass(frozen=True)
class Recognised:
    """The runner a command starts and where to add its flags: after `argv[:at]`."""

    kind: RunnerKind
    at: int


def _name(word: str) -> str:
    return PurePosixPath(word).name


def _skip_options(argv: Sequence[str], i: int, values: frozenset[str]) -> int:
    """The index of the first word at or after `i` that is no option (a `--` ends them)."""
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--":
            return i + 1
        i += 2 if argv[i] in values else 1
    return i


def _skip_env(argv: Sequence[str], i: int) -> int:
    """`env [-i] [-u NAME] [NAME=value ...] command`: the command's index."""
    i += 1
    while i < len(argv) and (argv[i].startswith("-") or "=" in argv[i]):
        i += 2 if argv[i] in ("-u", "--unset", "-C", "--chdir") else 1
    return i


def _skip_launcher(argv: Sequence[str], i: int, launcher: _Launcher) -> int | None:
    """The index of the command a launcher at `i` runs, or None if it runs no command."""
    j = _skip_options(argv, i + 1, launcher.global_options)
    if j < len(argv) and argv[j] in launcher.subcommands:
        return _skip_options(argv, j + 1, launcher.value_options)
    if launcher.direct and j < len(argv):
        return j
    return None


def _python_module(argv: Sequence[str], i: int) -> str | None:
    """`python [options] -m module`: the module; None for a script or `-c`."""
    j = i + 1
    while j < len(argv) and argv[j].startswith("-"):
        word = argv[j]
        if word == "-m":
            return argv[j + 1] if j + 1 < len(argv) else None
        if word.startswith("-m"):
            return word[2:]
        if word.startswith("-c") or word == "-":
            return None
        j += 2 if word in ("-X", "-W") else 1
    return None


def recognise(argv: Sequence[str]) -> Recognised:
    """The runner `argv` starts, through any launchers; `declared` when it is none we know."""
    i = 0
    words = list(argv)
    while i < len(words):
        name = _name(words[i])
        if name == "env":
            i = _skip_env(words, i)
            continue
        if name in _LAUNCHERS:
            j = _skip_launcher(words, i, _LAUNCHERS[name])
            if j is None or j >= len(words):
                break
            if name == "hatch" and ":" in words[j]:
                words[j] = words[j].split(":", 1)[1]  # `hatch run test:pytest`: env `test`
            i = j
            continue
        return _runner_at(words, i, name)
    return _declared()


def _declared() -> Recognised:
    return Recognised(RunnerKind.declared, 0)


_PLAIN = {"pytest": RunnerKind.pytest, "py.test": RunnerKind.pytest, "jest": RunnerKind.jest}
_PLAIN |= {"gotestsum": RunnerKind.gotestsum}


def _runner_at(argv: Sequence[str], i: int, name: str) -> Recognised:
    if name in _PLAIN:
        return Recognised(_PLAIN[name], i + 1)
    if _PYTHON_RE.match(name):
        if _python_module(argv, i) != "pytest":
            return _declared()
        at = next(k for k in range(i + 1, len(argv)) if argv[k] in ("pytest", "-mpytest"))
        return Recognised(RunnerKind.pytest, at + 1)
    if name == "vitest" or (name == "vp" and argv[i + 1 : i + 2] == ["test"]):
        i += name == "vp"  # Vite+'s `vp test` is Vitest, with Vitest's options
        sub = i + 1 < len(argv) and argv[i + 1] in _VITEST_SUBCOMMANDS
        return Recognised(RunnerKind.vitest, i + 2 if sub else i + 1)
    if name == "go":
        j = _skip_options(argv, i + 1, _words("-C"))
        return Recognised(RunnerKind.go_test, j + 1) if argv[j : j + 1] == ["test"] else _declared()
    if name in ("cargo", "cargo-nextest"):
        return _cargo(argv, i)
    if name == "coverage":
        return _coverage(argv, i)
    return _declared()


_COVERAGE_VALUES = _words("--rcfile --source --include --omit --data-file --context --concurrency --debug")


def _coverage(argv: Sequence[str], i: int) -> Recognised:
    """`coverage run [options] -m pytest ...`: pytest under coverage.py, as a project's
    `make test` often runs it (genai-prices' does); a script under coverage is no runner."""
    if argv[i + 1 : i + 2] != ["run"]:
        return _declared()
    k = i + 2
    while k < len(argv) and argv[k].startswith("-"):
        if argv[k] == "-m":
            return Recognised(RunnerKind.pytest, k + 2) if argv[k + 1 : k + 2] == ["pytest"] else _declared()
        k += 2 if argv[k] in _COVERAGE_VALUES else 1
    return _declared()


def _cargo(argv: Sequence[str], i: int) -> Recognised:
    """`cargo [+toolchain] [options] test|nextest run` (or the `cargo-nextest nextest run` binary)."""
    j = i + 1
    if argv[j : j + 1] and argv[j].startswith("+"):
        j += 1  # rustup's `cargo +nightly`
    j = _skip_options(argv, j, _words("-C -Z --config --color"))
    if argv[j : j + 1] == ["test"] and _name(argv[i]) == "cargo":
        return Recognised(RunnerKind.cargo_test, j + 1)
    if list(argv[j : j + 2]) == ["nextest", "run"]:
        return Recognised(RunnerKind.nextest, j + 2)
    return _declared()


@dataclass(frozen=True)
class TestInvocation:
    """What the grader runs: the command with docdelta's report flags, extra environment,
    the JUnit path to read afterwards (None when the evidence is on stdout), and files to
    write in the tools dir before the run (path -> text)."""

    kind: RunnerKind
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    report: str | None = None
    files: dict[str, str] = field(default_factory=dict)

    @property
    def runner(self) -> TestRunner:
        return RUNNERS[self.kind]


def invocation(argv: Sequence[str], *, private_report: str, declared: str | None) -> TestInvocation:
    """The command instrumented for its runner's evidence (see `RUNNERS`).

    `private_report` is an unguessable path in the sandbox's tools dir (code under test
    cannot plant a report there ahead of time); `declared` is the task's own `report`,
    which takes precedence: the command writes it and docdelta adds nothing.
    """
    found = recognise(argv)
    words = list(argv)
    if declared is not None:
        return TestInvocation(found.kind, words, report=declared)
    runner = RUNNERS[found.kind]
    flags = [f for f in runner.flags(private_report) if f not in words]  # `go test -json` stays one
    words = [*words[: found.at], *flags, *words[found.at :]]
    return TestInvocation(
        found.kind,
        with_guard_path(words, private_report) if found.kind is RunnerKind.pytest else words,
        env=runner.env(private_report),
        report=private_report if runner.writes_report else None,
        files=runner.files(private_report),
    )
