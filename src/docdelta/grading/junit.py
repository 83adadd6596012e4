"""Parse what a test run says about itself: JUnit XML reports and pytest's summary line.

An exit code alone proves nothing (an edit that calls `os._exit(0)` on import
"passes" every suite), so the grader counts tests from the run's own output and
cross-checks the two. Counts come from the `<testcase>` elements, never from a
suite's `tests=`/`failures=` attributes, which a forged report can set freely
without listing a single test.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from docdelta.models import TestCounts

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
