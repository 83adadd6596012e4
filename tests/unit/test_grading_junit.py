"""The exit code cross-checked against parsed test output: every way to fake a pass fails."""

from __future__ import annotations

import pytest

from docdelta.grading.hidden import judge_run
from docdelta.grading.junit import ReportError, file_ran, parse_junit, parse_pytest_summary
from docdelta.results.grades import TestCounts
from docdelta.sandbox.base import ExecResult
from docdelta.tasks.models import Validation

HIDDEN = ["tests/test_ops.py"]
GOOD = b"""<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.test_ops" name="test_a"/>
<testcase classname="tests.test_ops.TestB" name="test_b"/>
<testcase classname="tests.test_ops" name="test_c"><skipped message="later"/></testcase>
</testsuite></testsuites>"""
VALIDATION = Validation(hidden=HIDDEN, command="pytest")


def _run(exit_code: int | None = 0, stdout: str = "", timed_out: bool = False) -> ExecResult:
    return ExecResult(exit_code, stdout.encode(), b"", 0.1, timed_out=timed_out)


def test_parse_junit_counts_test_cases_not_suite_attributes() -> None:
    counts, names = parse_junit(GOOD)
    assert counts == TestCounts(passed=2, skipped=1)
    assert names == ["tests.test_ops", "tests.test_ops.TestB", "tests.test_ops"]
    forged = b'<testsuite tests="10" failures="0"></testsuite>'
    assert parse_junit(forged)[0].total == 0
    failing = (
        b'<testsuite><testcase classname="a"><failure/></testcase><testcase><error/></testcase></testsuite>'
    )
    assert parse_junit(failing)[0] == TestCounts(failed=1, errors=1)


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"PASSED", "not XML"), (b"<html/>", "not <testsuites>"), (b"<a>" * 10, "not XML")],
)
def test_parse_junit_refuses_what_is_not_a_report(data: bytes, why: str) -> None:
    with pytest.raises(ReportError, match=why):
        parse_junit(data)


def test_entity_bombs_are_refused() -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">'.encode() for i in range(8))
        + b"]><testsuite>&i;</testsuite>"
    )
    with pytest.raises(ReportError):
        parse_junit(bomb)


def test_pytest_summary_lines() -> None:
    assert parse_pytest_summary("x\n=== 2 passed, 1 failed, 3 warnings in 1.20s ===\n") == TestCounts(
        passed=2, failed=1
    )
    assert parse_pytest_summary("1 passed, 1 xfailed, 2 errors in 2.00s (0:00:02)") == TestCounts(
        passed=1, skipped=1, errors=2
    )
    assert parse_pytest_summary("==== no tests ran in 0.01s ====") == TestCounts()
    assert parse_pytest_summary("all tests PASSED") is None
    # The last summary wins: a fake line printed before pytest's own is overridden.
    assert parse_pytest_summary("9 passed in 0.1s\n1 failed in 0.2s\n") == TestCounts(failed=1)


def test_file_ran_matches_pytest_classnames_under_any_rootdir() -> None:
    assert file_ran("tests/test_ops.py", ["tests.test_ops"])
    assert file_ran("tests/test_ops.py", ["tests.test_ops.TestB"])
    assert file_ran("pkg/tests/test_ops.py", ["tests.test_ops"])  # rootdir was pkg/
    assert not file_ran("tests/test_ops.py", ["tests.test_other", "test_ops_extra"])


def test_a_clean_run_passes() -> None:
    passed, counts, summary, notes = judge_run(
        VALIDATION, _run(0, "2 passed, 1 skipped in 0.1s"), GOOD, HIDDEN
    )
    assert (passed, notes) == (True, [])
    assert counts == summary == TestCounts(passed=2, skipped=1)


@pytest.mark.parametrize(
    ("run", "report", "note"),
    [
        (_run(0, "1 passed in 0.01s"), None, "no JUnit report was written: no evidence that any test ran"),
        (_run(0), b"<testsuite/>", "the report lists no test case: no test ran"),
        (_run(1), GOOD, "exit code 1, expected 0"),
        (_run(None, timed_out=True), GOOD, "the validation command timed out after 300s"),
        (_run(0), b"<testsuite><testcase classname='tests.test_ops'><skipped/></testcase></testsuite>",
         "no test case passed (all skipped)"),
        (_run(0), b"<testsuite><testcase classname='tests.test_ops'><failure/></testcase></testsuite>",
         "1 failed and 0 errored test case(s) in the report"),
        (_run(0, "5 passed in 0.1s"), GOOD,
         "the printed summary (5 passed, 0 failed, 0 errors) disagrees with the report (2, 0, 0)"),
        (_run(0), b"<testsuite><testcase classname='tests.test_other'/></testsuite>",
         "no test case from the hidden test tests/test_ops.py ran"),
        (_run(0), b"<junk", "unreadable JUnit report: the report is not XML"),
    ],
)  # fmt: skip
def test_every_fake_or_empty_pass_fails(run: ExecResult, report: bytes | None, note: str) -> None:
    passed, _counts, _summary, notes = judge_run(VALIDATION, run, report, HIDDEN)
    assert not passed
    assert any(n.startswith(note) for n in notes), notes


@pytest.mark.parametrize(
    ("stderr", "program"),
    [
        ("setpriv: failed to execute uv: No such file or directory", "uv"),  # the Docker sandbox
        ("bwrap: execvp pnpm: No such file or directory", "pnpm"),  # the local sandbox
        ("sh: 1: .venv/bin/pytest: not found", ".venv/bin/pytest"),
        ("bash: line 1: tox: command not found", "tox"),
        ("pytest: No such file or directory", "pytest"),  # the pytest guard's launcher
    ],
)
def test_a_program_missing_from_the_sandbox_names_the_settings_to_change(stderr: str, program: str) -> None:
    run = ExecResult(exit_code=127, stdout=b"", stderr=stderr.encode(), duration_s=0.1)
    passed, _counts, _summary, notes = judge_run(VALIDATION, run, None, HIDDEN)
    assert not passed
    (note,) = [n for n in notes if "is not in the sandbox" in n]
    assert note.startswith(
        f"`{program}` is not in the sandbox: name the folder that holds it in `sandbox.paths`"
    )
    assert "sandbox.env.PATH" in note and ".docdelta.yml" in note


def test_a_program_name_with_markdown_in_it_is_not_quoted_into_the_note() -> None:
    run = ExecResult(exit_code=127, stdout=b"sh: 1: a`b: not found", stderr=b"", duration_s=0.1)
    assert not [n for n in judge_run(VALIDATION, run, None, HIDDEN)[3] if "is not in the sandbox" in n]
