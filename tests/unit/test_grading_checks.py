"""Hard checks and mistake rules on diffs that real git wrote (renames, binary files, odd names)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import Content, GitRepo
from pydantic import ValidationError

from docdelta.agents.models import AgentMetrics, CommandRun
from docdelta.grading.checks import parse_diff, run_checks
from docdelta.tasks.models import HardChecks, MistakeRule

BEFORE: dict[str, Content] = {
    "src/app.py": "def main():\n    return 1\n",
    "old name.txt": "x\n",
    "logo.bin": b"\x00\x01",
}


@pytest.fixture
def diff(tmp_path: Path) -> bytes:
    """A real `git diff --binary` of an agent-like edit: modify, add, rename, binary, delete."""
    repo = GitRepo.init(tmp_path / "r")
    base = repo.commit(BEFORE)
    repo.commit(
        {
            "src/app.py": "import subprocess\n\n\ndef main():\n    print('debug')\n    return 2\n",
            "tests/test_app.py": "def test_x():\n    pass\n",
            "old name.txt": None,
            "new näme.txt": "x\n",
            "logo.bin": b"\x00\x02\x03",
            "docs/gone.md": None,
        }
    )
    return repo.git("diff", "--binary", "-M", base, "HEAD").encode()


def test_parse_diff_sees_every_file_with_its_lines(diff: bytes) -> None:
    files = {f.path: f for f in parse_diff(diff)}
    assert set(files) == {"src/app.py", "tests/test_app.py", "new näme.txt", "logo.bin"}
    assert files["new näme.txt"].old == "old name.txt"  # a rename, unquoted from git's C-style quoting
    assert files["logo.bin"].binary
    assert files["tests/test_app.py"].old is None
    assert files["src/app.py"].added == ["import subprocess", "", "", "    print('debug')", "    return 2"]
    assert files["src/app.py"].removed == ["    return 1"]


def test_hard_checks_pass_and_fail_with_notes(diff: bytes) -> None:
    checks = HardChecks(
        require_changed=["src/*.py", "docs/**"],
        forbid_changed=["tests/**"],
        expect_added=["return 2"],
        forbid_added=["print("],
        min_files=1,
        max_files=3,
        max_lines=100,
    )
    result = run_checks(checks, [], diff)
    outcome = {c.name: (c.passed, c.note) for c in result.checks}
    assert outcome == {
        "require_changed src/*.py": (True, "changed src/app.py"),
        "require_changed docs/**": (False, "no changed path matches 'docs/**'"),
        "forbid_changed tests/**": (False, "changed forbidden tests/test_app.py"),
        "expect_added 'return 2'": (True, "added in src/app.py"),
        "forbid_added 'print('": (False, "added in src/app.py"),
        "min_files 1": (True, "5 file(s) changed"),
        "max_files 3": (False, "5 file(s) changed"),
        "max_lines 100": (True, "8 line(s) added or removed"),
    }
    assert not result.passed


def test_mistake_rules_count_each_hit_in_lines_and_commands(diff: bytes) -> None:
    rules = [
        MistakeRule(id="no-print", pattern=r"\bprint\(", scope="added", paths=["src/**"]),
        MistakeRule(id="no-subprocess", pattern=r"^import subprocess", scope="both"),
        MistakeRule(id="no-force-push", pattern=r"git push .*--force", scope="commands"),
        MistakeRule(id="no-pass-in-src", pattern=r"pass$", scope="added", paths=["src/**"]),
    ]
    metrics = AgentMetrics(
        commands=[
            CommandRun(command="git push origin main --force"),
            CommandRun(command="pytest -q"),
            CommandRun(command="git push --force-with-lease x --force"),
        ]
    )
    result = run_checks(HardChecks(), rules, diff, metrics)
    assert result.checks == [] and result.passed
    hits = {m.rule: (m.count, m.examples) for m in result.mistakes}
    assert hits["no-print"] == (1, ["src/app.py: print('debug')"])
    assert hits["no-subprocess"] == (1, ["src/app.py: import subprocess"])
    assert hits["no-force-push"][0] == 2
    assert hits["no-pass-in-src"] == (0, [])  # tests/test_app.py's `pass` is outside the rule's paths
    assert result.mistake_count == 4


def test_an_empty_diff_changes_nothing() -> None:
    result = run_checks(HardChecks(require_changed=["*.py"], max_files=0), [], b"")
    assert [(c.name, c.passed) for c in result.checks] == [
        ("require_changed *.py", False),
        ("max_files 0", True),
    ]


def test_a_bad_rule_regex_is_refused_when_the_task_loads() -> None:
    with pytest.raises(ValueError, match="invalid regex"):
        MistakeRule(id="bad", pattern="(unclosed")


@pytest.mark.timeout(60)
def test_a_catastrophically_backtracking_mistake_pattern_cannot_hang_grading() -> None:
    """`(a+)+$` against a long run of a's and a b takes Python's `re` longer than the age of
    the universe; RE2 matches in linear time."""
    rule = MistakeRule(id="evil", pattern=r"(a+)+$", scope="added")
    diff = (
        "diff --git a/x.txt b/x.txt\n--- a/x.txt\n+++ b/x.txt\n@@ -0,0 +1 @@\n+" + "a" * 50_000 + "b\n"
    ).encode()
    result = run_checks(HardChecks(), [rule], diff)
    assert [(m.rule, m.count) for m in result.mistakes] == [("evil", 0)]


def test_a_pattern_re2_cannot_run_is_refused_at_load_with_the_reason() -> None:
    with pytest.raises(ValidationError, match=r"invalid regex.*RE2 syntax: no lookaround"):
        MistakeRule(id="look", pattern=r"(?<=a)b")
