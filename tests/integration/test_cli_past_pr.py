"""A past PR with today's task suite: tasks whose gold quotes stand in no condition (rules
written after the PR) are skipped and listed in the scorecard, not a stop; and `--config FILE`
gives the run a `.docdelta.yml` the PR's base never had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import pr_args
from gitrepo import GitRepo

from docdelta.cli.main import main
from docdelta.results.models import Manifest, RunResult

TASK = """\
id: {id}
prompt: {prompt}
gold:
  commands: ["{command}"]
gold_citations:
  - path: AGENTS.md
    quote: {quote}
reviewed: true
"""

AGENT = """\
import json, os
print(json.dumps({"answer": os.environ.get("PAST_PR_FLAG", "unset"), "commands": ["make check"]}))
"""


def _past_pr(tmp_path: Path, later_rules: int) -> tuple[GitRepo, Path]:
    """A PR that added `make check`; the task suite, written later, also quotes rules the
    repository only gained after it."""
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\n"})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "check.yaml").write_text(
        TASK.format(id="check", prompt="How do I test?", command="make check", quote="Run `make check`")
    )
    for n in range(later_rules):
        (tasks / f"later-{n:02}.yaml").write_text(
            TASK.format(id=f"later-{n:02}", prompt="How do I lint?", command="make lint", quote=f"rule {n}")
        )
    return repo, tasks


def _args(repo: GitRepo, tasks: Path, workdir: Path, *extra: str) -> list[str]:
    return pr_args(repo, tasks, workdir, "--repeats", "1", "--conditions", "base,head", *extra)


def test_tasks_that_cannot_apply_are_skipped_with_a_count_and_a_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, tasks = _past_pr(tmp_path, later_rules=12)
    workdir = tmp_path / "work"
    assert main(_args(repo, tasks, workdir)) == 0
    report = capsys.readouterr().out
    results = [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/**/result.json")]
    assert {r.cell.task for r in results} == {"check"}  # the applicable task ran, in both conditions
    assert len(results) == 2
    assert "⚠ 12 tasks skipped: their gold quotes stand in no condition" in report
    assert "`later-00` (gold_citations[0] quotes AGENTS.md: 'rule 0')" in report
    assert "`later-09`" in report and "`later-10`" not in report  # long lists are cut ...
    assert "and 2 more (`manifest.json` lists all)" in report  # ... with a count
    manifest = Manifest.model_validate_json((workdir / "manifest.json").read_text())
    assert sorted(manifest.skipped) == [f"later-{n:02}" for n in range(12)]
    assert list(manifest.tasks) == ["check"]
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["confounds"]["skipped"]) == 12


def test_a_suite_with_no_applicable_task_still_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, tasks = _past_pr(tmp_path, later_rules=2)
    (tasks / "check.yaml").unlink()
    assert main(_args(repo, tasks, tmp_path / "work")) == 2
    err = capsys.readouterr().err
    assert "task 'later-00'" in err and "stands in no condition (base, head)" in err
    assert "and neither do those of the other 1 task(s)" in err


def test_config_file_on_the_command_line_replaces_the_bases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, tasks = _past_pr(tmp_path, later_rules=0)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    config = tmp_path / "past.docdelta.yml"
    config.write_text("sandbox:\n  env:\n    PAST_PR_FLAG: from-the-file\n")
    workdir = tmp_path / "work"
    cmd = ("--agent", "command", "--agent-cmd", f"python3 {agent}")
    assert main(_args(repo, tasks, workdir, "--config", str(config), *cmd)) == 0
    results = [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/**/result.json")]
    assert {r.outcome.answer.answer if r.outcome.answer else None for r in results} == {"from-the-file"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--config {path}: no such file"),
        ("sandbox:\n  pathz: []\n", "--config {path}"),
    ],
)
def test_a_bad_config_file_is_named_by_its_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    repo, tasks = _past_pr(tmp_path, later_rules=0)
    config = tmp_path / "past.yml"
    if content is not None:
        config.write_text(content)
    assert main(_args(repo, tasks, tmp_path / "work", "--config", str(config))) == 2
    err = capsys.readouterr().err
    assert message.format(path=config) in err and "Traceback" not in err
    if content is not None:
        assert "pathz" in err
