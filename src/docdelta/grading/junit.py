"""Parse what a test run says about itself: JUnit XML reports, pytest's summary line,
`go test -json` events and libtest's (`cargo test`) per-test and summary lines.

An exit code alone proves nothing (an edit that calls `os._exit(0)` on import
"passes" every suite), so the grader counts tests from the run's own output and
cross-checks the two. Counts come from the `<testcase>` elements, never from a
suite's `tests=`/`failures=` attributes, which a forged report can set freely
without listing a single test.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from docdelta.results.grades import TestCounts

MAX_REPORT_BYTES = 16 * 1024 * 1024

_SUMMARY_RE = re.compile(
    r"^(?:=+ )?(?P<body>no tests ran|\d+ \w+(?:, \d+ \w+)*) in [\d.]+s(?: \([^)]*\))?(?: =+)?\s*$",
    re.MULTILINE,
)
_ITEM_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


class ReportError(ValueError):
    """The report exists but is not a JUnit XML document we can count."""


def parse_junit(data: bytes) -> tuple[TestCounts, list[str]]:
    """Counts and the `classname`s of every test case in a JUnit XML report.

    The report is written by code under test, so it is untrusted: it is size-capped,
    and expat (>= 2.4.1, bundled with Python 3.11) refuses entity-expansion bombs;
    external entities are never fetched by ElementTree.
    """
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError(f"the report is larger than {MAX_REPORT_BYTES} bytes")
    try:
        root = ET.fromstring(data)  # noqa: S314 - size-capped; expat refuses entity bombs
    except ET.ParseError as exc:
        raise ReportError(f"the report is not XML: {exc}") from exc
    if _local(root.tag) not in ("testsuites", "testsuite"):
        raise ReportError(f"the report's root is <{_local(root.tag)}>, not <testsuites> or <testsuite>")
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    classnames: list[str] = []
    for case in root.iter():
        if _local(case.tag) != "testcase":
            continue
        classnames.append(case.get("classname", ""))
        kinds = {_local(child.tag) for child in case}
        if "error" in kinds:
            counts["errors"] += 1
        elif "failure" in kinds:
            counts["failed"] += 1
        elif "skipped" in kinds:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return TestCounts(**counts), classnames


def parse_pytest_summary(output: str) -> TestCounts | None:
    """Counts from pytest's last `=== 3 passed, 1 failed in 0.12s ===` line, or None.

    xpassed counts as passed and xfailed as skipped: they are what pytest reports
    as not failing. "no tests ran" gives all zeros.
    """
    matches = list(_SUMMARY_RE.finditer(output))
    if not matches:
        return None
    body = matches[-1].group("body")
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    names = {"xpassed": "passed", "xfailed": "skipped", "error": "errors"}
    for number, word in _ITEM_RE.findall(body):
        key = names.get(word, word)
        counts[key] += int(number)
    return TestCounts(**counts)


def file_ran(path: str, classnames: Iterable[str]) -> bool:
    """Did any test case come from the Python file `path`?

    pytest names a case's `classname` after its file's dotted path relative to the
    rootdir (plus the class, if any); the rootdir may sit below the repository root,
    so any dotted tail of the path that ends in the file's module counts.
    """
    parts = path.removesuffix(".py").split("/")
    tails = {".".join(parts[i:]) for i in range(len(parts))}
    return any(name in tails or name.rsplit(".", 1)[0] in tails for name in classnames)


def _counts(outcomes: Iterable[str]) -> TestCounts:
    """TestCounts from one outcome word per test case ("passed", "failed", "errors", "skipped")."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for outcome in outcomes:
        counts[outcome] += 1
    return TestCounts(**counts)


_GO_OUTCOMES = {"pass": "passed", "fail": "failed", "skip": "skipped"}
_GO_BUILD_FAILED_RE = re.compile(r"^FAIL\t(?P<package>\S+) \[build failed\]\s*$")


def parse_go_json(stdout: bytes) -> tuple[TestCounts, list[str]]:
    """Counts and `package.Test` names from `go test -json` events (test2json's stream on stdout).

    A top-level test's last pass/fail/skip event is its outcome (subtests are part of
    their parent, as in go's own summary). A package that failed with no test event (it
    panicked before any test, or did not build: go before 1.24 says so only in a plain
    `FAIL\t<package> [build failed]` line) counts as one errored case, the analogue of
    pytest's collection error. `[setup failed]` (go could not load the packages: the
    environment's fault) counts as nothing. Other lines that are not JSON are ignored.
    """
    if len(stdout) > MAX_REPORT_BYTES:
        raise ReportError(f"the event stream is larger than {MAX_REPORT_BYTES} bytes")
    tests: dict[tuple[str, str], str] = {}
    failed_packages: list[str] = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            if found := _GO_BUILD_FAILED_RE.match(line.decode(errors="replace")):
                failed_packages.append(found["package"])
            continue
        if not isinstance(event, dict) or event.get("Action") not in _GO_OUTCOMES:
            continue
        package, test = str(event.get("Package", "")), event.get("Test")
        if test is None:
            if event["Action"] == "fail":
                failed_packages.append(package)
        elif "/" not in str(test):
            tests[(package, str(test))] = _GO_OUTCOMES[event["Action"]]
    ran = {package for package, _ in tests}
    broken = [p for p in dict.fromkeys(failed_packages) if p not in ran]
    outcomes = [*tests.values(), *("errors" for _ in broken)]
    return _counts(outcomes), [*(f"{p}.{t}" for p, t in tests), *broken]


_LIBTEST_CASE_RE = re.compile(r"^test (?P<name>\S.*?) \.\.\. (?P<outcome>ok|FAILED|ignored)\b", re.MULTILINE)
_LIBTEST_SUMMARY_RE = re.compile(
    r"^test result: (?:ok|FAILED)\. (?P<passed>\d+) passed; (?P<failed>\d+) failed; "
    r"(?P<ignored>\d+) ignored;",
    re.MULTILINE,
)
_CARGO_BUILD_FAILED_RE = re.compile(r"^error: could not compile `(?P<crate>[^`]+)`", re.MULTILINE)
_LIBTEST_OUTCOMES = {"ok": "passed", "FAILED": "failed", "ignored": "skipped"}


def parse_libtest(stdout: bytes, stderr: bytes) -> tuple[TestCounts | None, TestCounts | None, list[str]]:
    """(per-test counts, summed `test result:` counts, test names) from a `cargo test` run.

    libtest prints `test <name> ... ok|FAILED|ignored` for every test (unless `-q`, when
    only the summaries are there: then they are the counts) and one `test result:` line
    per test binary; the two are cross-checked like pytest's report and summary. A crate
    that failed to compile (cargo's `error: could not compile` on stderr) counts as one
    errored case. (None, None, []) when the output shows no test binary ran at all.
    """
    out = stdout.decode(errors="replace")
    cases = [(m["name"], _LIBTEST_OUTCOMES[m["outcome"]]) for m in _LIBTEST_CASE_RE.finditer(out)]
    sums = [m.groupdict() for m in _LIBTEST_SUMMARY_RE.finditer(out)]
    broken = [m["crate"] for m in _CARGO_BUILD_FAILED_RE.finditer(stderr.decode(errors="replace"))]
    summary = (
        TestCounts(
            passed=sum(int(s["passed"]) for s in sums),
            failed=sum(int(s["failed"]) for s in sums),
            errors=len(broken),
            skipped=sum(int(s["ignored"]) for s in sums),
        )
        if sums
        else None
    )
    if cases or broken:
        counts = _counts([*(o for _, o in cases), *("errors" for _ in broken)])
        return counts, summary, [*(n for n, _ in cases), *broken]
    return summary, summary, []
