"""A past PR of a real repository evaluated with today's task suite: minijinja's second
CLAUDE.md edit (2025-06-28), with the tasks written against its 2026 AGENTS.md. The tasks
that quote AGENTS.md (written a year later) cannot apply and are skipped, listed in the
scorecard; the README task runs. The agent is a script file named on the command line,
shown to the sandbox by docdelta (no inline `-c` needed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from docdelta.cli.main import main
from docdelta.results.models import Manifest, RunResult

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "real"
AGENT = Path(__file__).with_name("answer_agent.py")
PAST_PR = ("9a2b13027f36", "0898101a986e")


def test_a_past_pr_runs_the_tasks_that_apply_and_lists_the_rest(
    real_repo: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = real_repo("minijinja")
    workdir = tmp_path / "w"
    args = [
        "run", "--repo", str(repo), "--base", PAST_PR[0], "--head", PAST_PR[1],
        "--tasks", str(EXAMPLES / "minijinja" / "tasks"), "--workdir", str(workdir), "--repeats", "1",
        "--agent", "command", "--agent-cmd", f"/usr/bin/python3 {AGENT}",
    ]  # fmt: skip
    assert main(args) == 0
    report = capsys.readouterr().out
    manifest = Manifest.model_validate_json((workdir / "manifest.json").read_text())
    assert sorted(manifest.skipped) == ["accept-snapshots", "core-tests", "msrv", "v2-branch"]
    assert "⚠ 4 tasks skipped: their gold quotes stand in no condition" in report
    assert "`msrv` (gold_citations[0] quotes AGENTS.md: 'The Rust MSRV is 1.70.')" in report
    results = [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/**/result.json")]
    assert {r.cell.task for r in results} == {"cli-install"}
    assert {r.score.value if r.score else None for r in results} == {
        1.0
    }  # README's install line, in every condition
