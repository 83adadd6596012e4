"""The suite's own rules (tests/conftest.py), on a throwaway copy of the tests tree: each
folder marks its tests with its tier, a test outside the tier folders is refused, and under
DOCDELTA_NO_SKIPS=1 (CI) a skipped test fails the run while an expected failure does not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
INI = f"""\
[pytest]
pythonpath = {TESTS}
markers =
    unit: u
    integration: i
    docker: d
    act: a
    real: r
    llm: l
    browser: b
"""


def pytest_in(root: Path, *args: str, no_skips: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DOCDELTA_NO_SKIPS"}
    if no_skips:
        env["DOCDELTA_NO_SKIPS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def tree(root: Path, files: dict[str, str]) -> Path:
    (root / "tests").mkdir()
    shutil.copy(TESTS / "conftest.py", root / "tests" / "conftest.py")
    (root / "pytest.ini").write_text(INI)
    for name, text in files.items():
        (root / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "tests" / name).write_text(text)
    return root


SKIPS = (
    "import pytest\n\n"
    "def test_skips():\n    pytest.skip('no engine here')\n\n"
    "@pytest.mark.xfail(reason='known')\ndef test_xfails():\n    raise AssertionError\n"
)


def test_a_folder_is_its_tier_and_under_no_skips_a_skip_fails_but_an_expected_failure_does_not(
    tmp_path: Path,
) -> None:
    files = {"unit/test_a.py": "def test_a(): pass\n", "unit/test_s.py": SKIPS}
    root = tree(tmp_path, {**files, "integration/test_b.py": "def test_b(): pass\n"})
    done = pytest_in(root, "-m", "unit", no_skips=True)
    assert "PASSED tests/unit/test_a.py::test_a" in done.stdout and "test_b" not in done.stdout, done.stdout
    assert "DOCDELTA_NO_SKIPS=1 but this test skipped: Skipped: no engine here" in done.stdout, done.stdout
    assert "1 failed, 1 passed, 1 deselected, 1 xfailed" in done.stdout
    assert done.returncode == 1


def test_a_test_outside_the_tier_folders_is_refused(tmp_path: Path) -> None:
    root = tree(
        tmp_path, {"unit/test_a.py": "def test_a(): pass\n", "elsewhere/test_c.py": "def test_c(): pass\n"}
    )
    refused = pytest_in(root)
    assert refused.returncode != 0
    assert "tests/elsewhere/test_c.py::test_c: tests live in one of the tier folders" in refused.stderr, (
        refused
    )
