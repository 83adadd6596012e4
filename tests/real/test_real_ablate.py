"""`docdelta ablate` on a real repository: genai-prices' AGENTS.md at its head commit, with
the examples/real task set and the deterministic command agent (answer_agent.py)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from docdelta.cli.main import main
from docdelta.improve.ablation import AblationReport
from docdelta.results.layout import ABLATION_FILE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "real"
AGENT = Path(__file__).with_name("answer_agent.py")


def test_the_sections_holding_the_rules_lower_their_tasks_and_the_overview_moves_nothing(
    real_repo: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = f"/usr/bin/python3 -c {shlex.quote(AGENT.read_text())}"
    workdir = tmp_path / "ablate"
    args = [
        "ablate", "--repo", str(real_repo("genai-prices")), "--ref", "47df840a5ab1", "--file", "AGENTS.md",
        "--tasks", str(EXAMPLES / "genai-prices" / "tasks"), "--workdir", str(workdir), "--repeats", "4",
        "--agent", "command", "--agent-cmd", agent,
    ]  # fmt: skip
    assert main(args) == 0
    report = AblationReport.model_validate_json((workdir / ABLATION_FILE).read_text())
    lowers = {s.section.name: s.lowers for s in report.sections}
    assert lowers == {
        "(preamble) AGENTS.md": [],
        "Repository Overview": [],
        "Architecture": [],
        "Development Commands": ["build-target"],
        "Important Notes": ["kcount", "price-history", "usages-json"],
        "Pull Requests": [],
    }
    # The README control is moved by no section; the overview is a candidate to cut.
    assert all(not s.tasks["slim-schema"].value for s in report.sections)
    assert {s.section.name for s in report.sections if s.cut_candidate} == {
        "(preamble) AGENTS.md", "Repository Overview", "Architecture", "Pull Requests",
    }  # fmt: skip
    assert report.runs_done == 80 and report.runs_done <= report.single_runs / 2
    assert "saved 71%" in capsys.readouterr().out
