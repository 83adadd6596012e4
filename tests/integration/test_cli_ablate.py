"""`docdelta ablate` through the CLI: the demo with the fake agent (the factorial design),
and a command agent under one-at-a-time bullet ablation."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.demo import build_demo_repo
from docdelta.errors import ExitCode
from docdelta.improve.ablation import AblationReport
from docdelta.results.layout import ABLATION_FILE


def _report(workdir: Path) -> AblationReport:
    return AblationReport.model_validate_json((workdir / ABLATION_FILE).read_text())


def test_the_demo_sections_carrying_targets_lower_them_and_the_overview_is_a_cut_candidate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = build_demo_repo(tmp_path / "pricebook")
    workdir = tmp_path / "ablate"
    args = ["ablate", "--repo", str(demo.path), "--file", "AGENTS.md", "--tasks", str(demo.tasks_dir)]
    assert main([*args, "--workdir", str(workdir), "--repeats", "4"]) == 0
    out = capsys.readouterr().out
    report = _report(workdir)
    moved = {s.section.name: (s.lowers, s.raises, s.cut_candidate) for s in report.sections}
    assert moved == {
        "(preamble) Agent notes": ([], [], True),
        "Checks": (["run-tests"], [], False),
        "Code layout": (["currency-sync"], [], False),
        "Git": (["force-push"], [], False),
    }
    # The control task is moved by nothing: its answer is in README.md in every condition.
    assert all(s.tasks["install-dev"].value == 0 for s in report.sections)
    assert report.runs_done == 32 and report.single_runs == 80  # 8 conditions x 4 tasks vs 5 x 4 x 4
    assert report.runs_done <= report.single_runs / 2
    assert "saved 60%" in out and "| Checks | 5-9 | " in out and "candidate to cut" in out

    # A rerun resumes from the saved runs: the same report, nothing run again.
    assert main([*args, "--workdir", str(workdir), "--repeats", "4"]) == 0
    assert "(0 ran, 32 reused)" in capsys.readouterr().err
    assert _report(workdir) == report


AGENT = """\
import json, os, sys
sys.stdin.read()
docs = open("AGENTS.md").read() if os.path.exists("AGENTS.md") else ""
with open(os.environ["DOCDELTA_METRICS"], "w") as f:
    json.dump({"tokens_in": len(docs), "tokens_out": 10, "turns": 1}, f)
print(json.dumps({"answer": "ok", "commands": ["make check"] if "make check" in docs else ["pytest"]}))
"""

TASK = """\
id: tests
prompt: How do I run the tests?
gold:
  commands: ["make check"]
reviewed: true
"""


def test_a_command_agent_one_bullet_at_a_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    bin_dir = tmp_path / "agent-bin"
    bin_dir.mkdir()
    (bin_dir / "agent.py").write_text(textwrap.dedent(AGENT))
    agents = "# Notes\n\n- Run `make check` before you push.\n- Be kind in reviews, always and everywhere.\n"
    repo.commit(
        {
            ".docdelta.yml": sandbox_config(bin_dir),
            "AGENTS.md": agents,
            "README.md": "# proj\n",
            ".docdelta/tasks/tests.yaml": TASK,
        }
    )
    workdir = tmp_path / "ablate"
    base = ["ablate", "--repo", str(repo.path), "--tasks", str(repo.path / ".docdelta/tasks")]
    agent = ["--agent", "command", "--agent-cmd", f"{sys.executable} {bin_dir / 'agent.py'}"]
    args = [*base, "--file", "AGENTS.md", "--workdir", str(workdir), *agent]
    assert main([*args, "--unit", "bullets", "--design", "single", "--repeats", "2"]) == 0
    report = _report(workdir)
    assert report.runs_done == report.single_runs == 6
    rule, kindness = report.sections
    assert rule.lowers == ["tests"] and rule.tasks["tests"].value == -1.0
    assert rule.tokens.value == -len("- Run `make check` before you push.\n")
    assert kindness.lowers == [] and kindness.cut_candidate
    assert kindness.tokens.value == -len("- Be kind in reviews, always and everywhere.\n")
    capsys.readouterr()

    code = main([*base, "--file", "README.md", "--workdir", str(tmp_path / "other"), *agent])
    assert code == ExitCode.BAD_INPUT
    assert "--file README.md is no instruction file at HEAD" in capsys.readouterr().err
