"""Which runner a validation command starts, what docdelta adds for its evidence, and the
parsers of the evidence that is not JUnit (recorded from real `go test -json` and
`cargo test` runs here: tests/fixtures/runners/)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from docdelta.grading.hidden import judge_run
from docdelta.grading.junit import parse_go_json, parse_libtest
from docdelta.grading.runners import GUARD_PATH_SH, NEXTEST_PROFILE, RUNNERS, invocation, recognise
from docdelta.results.grades import TAIL_NOTE, TestCounts
from docdelta.sandbox.base import ExecResult
from docdelta.tasks.models import RunnerKind, Validation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runners"
REPORT = "/workspace/tools/junit-0123.xml"
JX = f"--junitxml={REPORT} -pdocdelta_guard_junit_0123"
"""What the grader adds to pytest: its private JUnit report and its guard plugin (pytest_guard.py)."""


@pytest.mark.parametrize(
    ("command", "kind", "instrumented"),
    [
        # genai-prices' AGENTS.md, and other launchers of pytest
        ("uv run --frozen pytest", RunnerKind.pytest, f"uv run --frozen pytest {JX}"),
        # genai-prices' `make test` recipe: pytest under coverage.py
        ("uv run coverage run -m pytest tests/test_usage.py",
         RunnerKind.pytest, f"uv run coverage run -m pytest {JX} tests/test_usage.py"),
        ("coverage run --rcfile .coveragerc -p -m pytest",
         RunnerKind.pytest, f"coverage run --rcfile .coveragerc -p -m pytest {JX}"),
        ("uv run --with pytest-xdist --python 3.12 pytest -n 2 tests",
         RunnerKind.pytest, f"uv run --with pytest-xdist --python 3.12 pytest {JX} -n 2 tests"),
        ("uv --directory pkg run -m pytest",
         RunnerKind.pytest, f"uv --directory pkg run -m pytest {JX}"),
        ("poetry run pytest -q", RunnerKind.pytest, f"poetry run pytest {JX} -q"),
        ("hatch run test:pytest -x", RunnerKind.pytest, f"hatch run test:pytest {JX} -x"),
        ("python -m pytest tests/", RunnerKind.pytest, f"python -m pytest {JX} tests/"),
        ("python3 -X dev -m pytest", RunnerKind.pytest, f"python3 -X dev -m pytest {JX}"),
        ("/opt/venv/bin/python3.11 -m pytest -- -k x",
         RunnerKind.pytest, f"/opt/venv/bin/python3.11 -m pytest {JX} -- -k x"),
        ("env PYTHONHASHSEED=0 pytest", RunnerKind.pytest, f"env PYTHONHASHSEED=0 pytest {JX}"),
        # logfire-js-like: vitest through pnpm
        ("pnpm exec vitest run", RunnerKind.vitest,
         f"pnpm exec vitest run --reporter=default --reporter=junit --outputFile.junit={REPORT}"),
        ("pnpm --filter @pydantic/logfire-api vitest run src",
         RunnerKind.vitest, "pnpm --filter @pydantic/logfire-api vitest run --reporter=default "
         f"--reporter=junit --outputFile.junit={REPORT} src"),
        ("npx vitest", RunnerKind.vitest,
         f"npx vitest --reporter=default --reporter=junit --outputFile.junit={REPORT}"),
        ("pnpm exec vp test run -t name", RunnerKind.vitest,  # logfire-js: Vite+ runs Vitest
         f"pnpm exec vp test run --reporter=default --reporter=junit --outputFile.junit={REPORT} -t name"),
        ("yarn jest --ci", RunnerKind.jest, "yarn jest --reporters=default --reporters=jest-junit --ci"),
        ("npm exec -- jest", RunnerKind.jest, "npm exec -- jest --reporters=default --reporters=jest-junit"),
        ("go test ./...", RunnerKind.go_test, "go test -json ./..."),
        ("go test -json -run TestX ./pkg", RunnerKind.go_test, "go test -json -run TestX ./pkg"),
        ("gotestsum -- ./...", RunnerKind.gotestsum, f"gotestsum --junitfile={REPORT} -- ./..."),
        ("cargo test -p minijinja --all-features",
         RunnerKind.cargo_test, "cargo test -p minijinja --all-features"),
        ("cargo +nightly test", RunnerKind.cargo_test, "cargo +nightly test"),
        ("cargo nextest run -p x", RunnerKind.nextest,
         "cargo nextest run --tool-config-file=docdelta:/workspace/tools/junit-0123.nextest.toml "
         f"--profile={NEXTEST_PROFILE} -p x"),
    ],
)  # fmt: skip
def test_real_commands_are_recognised_and_instrumented(
    command: str, kind: RunnerKind, instrumented: str
) -> None:
    run = invocation(shlex.split(command), private_report=REPORT, declared=None)
    assert run.kind is kind
    guard = ["sh", "-c", GUARD_PATH_SH, "/workspace/tools"] if kind is RunnerKind.pytest else []
    assert run.argv == [*guard, *shlex.split(instrumented)]
    assert run.report == (REPORT if RUNNERS[kind].writes_report else None)


@pytest.mark.parametrize(
    "command",
    [
        "make test",  # a Makefile target: what it runs is not ours to guess
        "pnpm test",  # a package script
        "vp run logfire#test",  # a Vite+ task, whatever it runs
        "uv run python script.py",
        "python3 -c 'import pytest; pytest.main()'",
        "sh -c 'pytest'",
        "cargo build",
        "go vet ./...",
        "echo pytest",  # the word alone is not the runner
        "uv run --with pytest python tests.py",  # pytest is an option's value here
        "coverage run tests.py",  # a script under coverage.py
        "coverage report -m",
    ],
)
def test_commands_that_start_no_known_runner_need_a_declared_report(command: str) -> None:
    assert recognise(shlex.split(command)).kind is RunnerKind.declared
    run = invocation(shlex.split(command), private_report=REPORT, declared=None)
    assert (run.argv, run.report) == (shlex.split(command), None)


def test_a_declared_report_wins_and_nothing_is_added() -> None:
    run = invocation(["uv", "run", "pytest"], private_report=REPORT, declared="out/junit.xml")
    assert (run.kind, run.argv, run.report) == (RunnerKind.pytest, ["uv", "run", "pytest"], "out/junit.xml")


def test_jest_and_nextest_get_their_report_path_out_of_band() -> None:
    jest = invocation(["jest"], private_report=REPORT, declared=None)
    assert jest.env == {"JEST_JUNIT_OUTPUT_FILE": REPORT}
    nextest = invocation(["cargo", "nextest", "run"], private_report=REPORT, declared=None)
    assert nextest.files == {
        "/workspace/tools/junit-0123.nextest.toml": f'[profile.{NEXTEST_PROFILE}.junit]\npath = "{REPORT}"\n'
    }


# ------------------------------------------------------------ evidence parsers
def test_go_json_counts_top_level_tests_and_build_failures() -> None:
    counts, names = parse_go_json((FIXTURES / "go-test-json-1-failed.out").read_bytes())
    assert counts == TestCounts(passed=1, failed=1, skipped=1)  # TestZero/sub is part of TestZero
    assert names == ["example.com/calc.TestAdd", "example.com/calc.TestZero", "example.com/calc.TestSkip"]
    # go 1.19 reports a build failure in a plain line, not an event: one errored case
    broken = parse_go_json((FIXTURES / "go-test-json-build-failed.out").read_bytes())
    assert broken == (TestCounts(errors=1), ["example.com/calc"])
    assert parse_go_json(b"FAIL\texample.com/calc [setup failed]\nnot json\n") == (TestCounts(), [])


def test_libtest_lines_and_summaries() -> None:
    out, err = (
        (FIXTURES / "cargo-test-1-failed.out").read_bytes(),
        (FIXTURES / "cargo-test-1-failed.err").read_bytes(),
    )
    assert parse_libtest(out, err) == (
        TestCounts(passed=1, failed=1),
        TestCounts(passed=1, failed=1),
        ["zero", "adds"],
    )
    quiet = parse_libtest((FIXTURES / "cargo-test-q-1-failed.out").read_bytes(), b"")
    assert quiet == (TestCounts(passed=1, failed=1), TestCounts(passed=1, failed=1), [])  # -q: summaries only
    build = parse_libtest(
        (FIXTURES / "cargo-test-build-failed.out").read_bytes(),
        (FIXTURES / "cargo-test-build-failed.err").read_bytes(),
    )
    assert build == (TestCounts(errors=1), None, ["calc"])
    assert parse_libtest(b"", b"error: no such command: `nextest`\n") == (None, None, [])


def _result(code: int, stdout: bytes = b"", stderr: bytes = b"") -> ExecResult:
    return ExecResult(exit_code=code, stdout=stdout, stderr=stderr, duration_s=0.1)


def test_a_forged_libtest_line_disagrees_with_the_summary() -> None:
    validation = Validation(hidden=["tests/hidden.rs"], command="cargo test")
    out = (
        (FIXTURES / "cargo-test-1-failed.out")
        .read_bytes()
        .replace(b"test adds ... FAILED", b"test adds ... ok")
    )
    passed, _, _, notes = judge_run(
        validation, _result(0, out), None, ["tests/hidden.rs"], RunnerKind.cargo_test
    )
    assert not passed
    assert any("disagrees with the report (2, 0, 0)" in n for n in notes), notes


def test_a_failure_quotes_the_commands_last_lines() -> None:
    """`No module named pytest` was captured but never shown: the note now carries it."""
    validation = Validation(hidden=["tests/test_ops.py"], command="python3 -m pytest")
    run = _result(1, stderr=b"/usr/bin/python3: No module named pytest\n")
    passed, _, _, notes = judge_run(validation, run, None, ["tests/test_ops.py"])
    assert not passed
    assert notes[-1] == f"{TAIL_NOTE}\n/usr/bin/python3: No module named pytest"
    quiet = judge_run(validation, _result(127), None, ["tests/test_ops.py"])[3]
    assert quiet[-1] == f"{TAIL_NOTE} (none: the command printed nothing)"
