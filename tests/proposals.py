"""The project the gold.execute CLI tests share (bubblewrap and Docker): a unittest suite whose
base AGENTS.md names a renamed test module, and what the fake agent's run on it must show."""

from __future__ import annotations

from pathlib import Path

from clirun import saved_results
from gitrepo import GitRepo

from docdelta.redaction import REDACTED
from docdelta.report.render import text

TASK = """\
id: run-tests
prompt: How do I run the tests?
gold:
  commands: ["python3 -m unittest"]
  execute: {timeout_s: 30}
reviewed: true
"""
TEST_CALC = "import unittest\n\n\nclass Calc(unittest.TestCase):\n    def test_add(self):\n        pass\n"


def execute_project(root: Path, config: str = "", extra: dict[str, str] | None = None) -> GitRepo:
    """A unittest project whose base AGENTS.md names a test module renamed since (test_ops ->
    test_calc), and whose head names the right one; both match the gold `python3 -m unittest`."""
    repo = GitRepo.init(root)
    files = {
        "tests/__init__.py": "",
        "tests/test_calc.py": TEST_CALC,
        ".docdelta/tasks/run-tests.yaml": TASK,
        "AGENTS.md": "# Agents\n\nRun the tests with `python3 -m unittest tests.test_ops`.\n",
    }
    repo.commit(files | ({".docdelta.yml": config} if config else {}) | (extra or {}))
    repo.commit({"AGENTS.md": "# Agents\n\nRun the tests with `python3 -m unittest tests.test_calc`.\n"})
    return repo


def check_fake_run(workdir: Path, out: str) -> None:
    """What both sandboxes must show for `execute_project` under the fake agent."""
    results = {r.cell.condition: r for r in saved_results(workdir)}
    head, base = results["head"], results["base"]
    assert head.executed is not None and base.executed is not None
    [ran] = head.executed.commands
    assert (ran.command, ran.exit_code) == ("python3 -m unittest tests.test_calc", 0)
    assert head.score is not None and head.score.value == 1.0
    [stale] = base.executed.commands
    assert (stale.command, stale.exit_code) == ("python3 -m unittest tests.test_ops", 1)
    assert stale.first_error == "ImportError: Failed to import test module: test_ops"
    assert base.score is not None and base.score.value == 0.0
    note = base.score.items[0].note
    assert note.startswith("given, but it failed in a fresh offline sandbox of the checkout:")
    assert "run-tests · command `python3 -m unittest` missed in 1/1 runs — given, but it failed" in out
    # notes are plain text, escaped where the scorecard renders them (report/render.py `text`)
    assert text("ImportError: Failed to import test module: test_ops") in out


SNOOP_AGENT = """\
import json
print(json.dumps({"answer": "run them", "commands": [
    "python3 -m unittest tests.test_calc; cat .env >&2; exit 3",
]}))
"""


def check_redacted(workdir: Path, secret: str, isolation: str) -> None:
    """What `SNOOP_AGENT`'s run on `execute_project` with a planted `.env` must show: the
    proposal ran (and failed), and the key is redacted from everything docdelta wrote."""
    results = saved_results(workdir)
    assert len(results) == 3
    for result in results:
        assert result.executed is not None
        [ran] = result.executed.commands
        assert ran.exit_code == 3
        assert f"OPENAI_API_KEY={REDACTED}" in ran.output_tail
        assert result.score is not None and result.score.value == 0.0  # it ran, then exited 3
    assert {r.executed.isolation for r in results if r.executed} == {isolation}
    # nothing docdelta wrote holds it (the sealed checkouts hold the project's own .env)
    written = [
        p for p in workdir.rglob("*") if p.is_file() and "checkouts" not in p.relative_to(workdir).parts
    ]
    assert [p for p in written if secret.encode() in p.read_bytes()] == []
    assert any(p.name == "result.json" for p in written)
