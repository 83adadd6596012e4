"""Code says what and why, never which internal issue asked for it: an issue number means
nothing to a reader of the code and goes stale when the tracker moves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"\b[Ii]ssues? #?" + r"\d+")


def test_no_python_file_cites_an_internal_issue_number() -> None:
    cited = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("src", "tests", "bench", "scripts")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if CITATION.search(line)
    ]
    assert cited == []
