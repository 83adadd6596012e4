"""`docdelta tasks audit` through the CLI: labels from where the gold stands, leaks, saturated
tasks from past runs of a real command agent, and holdout tasks kept out of the scorecard."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from clirun import run_args
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.demo import build_demo_repo
from docdelta.improve.task_audit import GoldLabel, SuiteAudit
from docdelta.scorecard.models import Summary


def _audit(capsys: pytest.CaptureFixture[str], *args: str) -> SuiteAudit:
    capsys.readouterr()
    assert main(["tasks", "audit", "--json", *args]) == 0
    return SuiteAudit.model_validate_json(capsys.readouterr().out)


def test_the_demo_control_and_targets_are_labelled_by_evidence_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = build_demo_repo(tmp_path / "pricebook")
    audit = _audit(capsys, "--repo", str(demo.path), "--tasks", str(demo.tasks_dir))
    labels = {t.task: t.label for t in audit.tasks}
    assert labels == {
        "install-dev": GoldLabel.control,
        "currency-sync": GoldLabel.target,
        "force-push": GoldLabel.target,
        "run-tests": GoldLabel.target,
    }
    # The prompt of currency-sync names currencies.py, one of its gold files: a leak, not counted.
    leaks = [(t.task, i.expected) for t in audit.tasks for i in t.items if i.leaked]
    assert leaks == [("currency-sync", "pricebook/currencies.py")]
    # At the base commit the rules are not written down anywhere: the targets are unattainable.
    at_base = _audit(capsys, "--repo", str(demo.path), "--tasks", str(demo.tasks_dir), "--ref", demo.base_sha)
    assert {t.task: t.label for t in at_base.tasks}["run-tests"] is GoldLabel.unattainable
    assert {t.task: t.label for t in at_base.tasks}["install-dev"] is GoldLabel.control


TASK = """\
id: {id}
prompt: {prompt}
holdout: {holdout}
gold:
  commands: ["{command}"]
reviewed: true
"""

AGENT = """\
import json, sys
prompt = sys.stdin.read()
# Always right about installing (the README says so); right about tests only when AGENTS.md says.
if "install" in prompt:
    commands = ["pip install -e ."]
else:
    agents = open("AGENTS.md").read() if __import__("os").path.exists("AGENTS.md") else ""
    commands = ["make check"] if "make check" in agents else ["pytest"]
print(json.dumps({"answer": "done", "commands": commands}))
"""


def test_past_runs_show_a_saturated_task_and_holdout_tasks_stay_out_of_the_scorecard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    bin_dir = tmp_path / "agent-bin"
    bin_dir.mkdir()
    (bin_dir / "agent.py").write_text(textwrap.dedent(AGENT))
    tasks = {
        ".docdelta/tasks/install.yaml": TASK.format(
            id="install", prompt="How do I install it?", holdout="false", command="pip install -e ."
        ),
        ".docdelta/tasks/tests.yaml": TASK.format(
            id="tests", prompt="How do I run the tests?", holdout="true", command="make check"
        ),
    }
    repo.commit(
        {
            ".docdelta.yml": sandbox_config(bin_dir),
            "README.md": "Install with `pip install -e .`\n",
            "AGENTS.md": "be nice\n",
            **tasks,
        }
    )
    repo.commit({"AGENTS.md": "Run `make check` before you push.\n"})
    workdir = tmp_path / "results"
    agent = f"{sys.executable} {bin_dir / 'agent.py'}"
    assert main(run_args(repo, workdir, agent, "--repeats", "2")) == 0
    scorecard = capsys.readouterr().out
    assert "| tests" not in scorecard and "| install" in scorecard
    assert "counts 1 holdout task whose own results are not shown" in scorecard

    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert [t.task for t in summary.tasks] == ["install"] and summary.holdout_tasks == 1
    # The holdout task still counts: head fixes it, so the aggregate head-base is positive.
    assert (summary.head_vs_base.value or 0) > 0.4
    assert all(m.task == "install" for items in summary.missed.values() for m in items)

    tasks_dir = repo.path / ".docdelta/tasks"
    audit = _audit(capsys, "--repo", str(repo.path), "--tasks", str(tasks_dir), "--results", str(workdir))
    by_task = {t.task: t for t in audit.tasks}
    saturated = by_task["install"].saturated
    assert saturated is not None and saturated.level == 1.0
    assert saturated.arms == ["base", "head", "none"] and saturated.runs == 6
    assert by_task["tests"].saturated is None and by_task["tests"].holdout
    assert audit.results_read == 12

    # A changed task file makes its past runs stale: they are no evidence about the new version.
    (tasks_dir / "install.yaml").write_text(
        TASK.format(id="install", prompt="How do I set it up?", holdout="false", command="pip install -e .")
    )
    audit = _audit(capsys, "--repo", str(repo.path), "--tasks", str(tasks_dir), "--results", str(workdir))
    assert {t.task: t.saturated for t in audit.tasks}["install"] is None and audit.stale_runs == 6
    assert main(["tasks", "audit", "--repo", str(repo.path), "--tasks", str(tasks_dir)]) == 0
    text = capsys.readouterr().out
    assert "holdout tasks (run, shown only in aggregate): 1\n  tests" in text


def test_a_gold_item_found_in_many_files_names_ten_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    files = {f"scripts/s{n:03}.sh": "make check\n" for n in range(150)}
    repo.commit({"AGENTS.md": "Run `make check`.\n", **files})
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "t.yaml").write_text(
        TASK.format(id="t", prompt="How to test?", holdout="false", command="make check")
    )
    assert main(["tasks", "audit", "--repo", str(repo.path), "--tasks", str(tasks)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "`make check` in" in x]
    assert "scripts/s009.sh and 140 more" in line and "scripts/s010.sh" not in line


def test_a_gold_file_no_file_names_says_so_and_that_it_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gold file the rules describe only by module name (`pkg.config`) is unattainable by
    the audit's count, which the line says in words, and it says the file is there all the same."""
    repo = GitRepo.init(tmp_path / "proj")
    task = (
        "id: config\nprompt: Where do config models go?\n"
        "gold:\n  files: [src/pkg/config.py, src/pkg/gone.py]\nreviewed: true\n"
    )
    repo.commit(
        {
            "AGENTS.md": "# Agents\n\n- `pkg.config` owns config models.\n",
            "src/pkg/config.py": "MODELS = []\n",
            ".docdelta/tasks/config.yaml": task,
        }
    )
    capsys.readouterr()
    assert (
        main(["tasks", "audit", "--repo", str(repo.path), "--tasks", str(repo.path / ".docdelta/tasks")]) == 0
    )
    out = capsys.readouterr().out
    assert "file `src/pkg/config.py` named in no file (the file exists: an agent may still find it" in out
    assert "file `src/pkg/gone.py` stated in no file" in out
    assert "nowhere" not in out
