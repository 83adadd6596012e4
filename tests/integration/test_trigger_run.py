"""`docdelta run` with trigger tasks on a small real repository, the fake agent and the local
sandbox: head's new description makes the skill load for the prompt it is for and no longer
for a near miss, and the scorecard's table says so. A trigger task naming a file that is no
instruction file is refused before anything runs, naming the task file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gitrepo import GitRepo

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.scorecard.models import Summary

SKILL = ".claude/skills/release/SKILL.md"
BODY = "\n# Releasing\nBump the version in pyproject.toml, write the changelog entry, then tag and push.\n"


def _skill(description: str) -> str:
    return f"---\nname: release\ndescription: {description}\n---\n{BODY}"


def _tasks(directory: Path, tasks: dict[str, tuple[str, str, bool]]) -> Path:
    directory.mkdir()
    for task_id, (prompt, file, should) in tasks.items():
        data = {"id": task_id, "kind": "trigger", "prompt": prompt, "reviewed": True}
        data["trigger"] = {"file": file, "should_load": should}
        (directory / f"{task_id}.yaml").write_text(yaml.safe_dump(data))
    return directory


def _repo(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo.init(tmp_path / "proj")
    files = {"README.md": "# proj\n", "AGENTS.md": "# Agents\nRun `make check` before you push.\n"}
    base = repo.commit({**files, SKILL: _skill("Steps for the changelog and the version file of a release.")})
    head = repo.commit({SKILL: _skill("Use when asked to cut, tag or publish a new release of the package.")})
    return repo, base, head


def test_the_scorecard_shows_the_new_description_picked_up_and_the_near_miss_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, base, head = _repo(tmp_path)
    tasks = _tasks(
        tmp_path / "tasks",
        {
            "publish": ("Tag and publish the new release of the package", SKILL, True),
            "version-file": ("Which file holds the version of this release?", SKILL, False),
        },
    )
    workdir = tmp_path / "w"
    args = ["run", "--repo", str(repo.path), "--base", base, "--head", head, "--tasks", str(tasks)]
    assert (
        main([*args, "--workdir", str(workdir), "--repeats", "2", "--agent", "fake", "--sandbox", "local"])
        == 0
    )
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    got = {r.should_load: {c: (a.loaded, a.runs) for c, a in r.arms.items()} for r in summary.triggers}
    assert got == {
        True: {"base": (0, 2), "head": (2, 2), "none": (0, 2)},
        False: {"base": (2, 2), "head": (0, 2), "none": (0, 2)},
    }
    assert {t.task: t.conditions["head"].mean_score for t in summary.tasks} == {
        "publish": 1.0,
        "version-file": 1.0,
    }
    assert main(["report", "--workdir", str(workdir), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert "| 1 that should load it | 0/2 (0%) | 2/2 (100%) | 0/2 (0%) | +1.00 |" in markdown


def test_a_trigger_on_a_file_no_condition_holds_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, base, head = _repo(tmp_path)
    tasks = _tasks(tmp_path / "tasks", {"typo": ("Cut a release", ".claude/skills/relase/SKILL.md", True)})
    args = ["run", "--repo", str(repo.path), "--base", base, "--head", head, "--tasks", str(tasks)]
    code = main([*args, "--workdir", str(tmp_path / "w"), "--agent", "fake", "--sandbox", "local"])
    assert code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "typo.yaml: trigger.file '.claude/skills/relase/SKILL.md' is no instruction file" in err
    assert "Traceback" not in err
