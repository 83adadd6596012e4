"""`docdelta run --allow-unreviewed`: tasks whose gold nobody has reviewed run, and every
scorecard says so. The header (the comment's and so the check summary's first line) and the
verdict line name them; a holdout task is counted, never named. Fake agent on the demo."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from gitrepo import GitRepo

from docdelta.cli.main import main
from docdelta.demo import examples_dir
from docdelta.errors import ExitCode
from docdelta.report import render_comment_markdown
from docdelta.scorecard.models import Summary

NOTE = "the suite included 2 unreviewed tasks (force-push, 1 holdout task)"


def _project(tmp_path: Path) -> tuple[GitRepo, Path]:
    demo = examples_dir()
    repo = GitRepo.init(tmp_path / "proj")
    shutil.copytree(demo / "repo", repo.path, dirs_exist_ok=True)
    repo.commit({}, message="base")
    repo.commit({"AGENTS.md": (demo / "head" / "AGENTS.md").read_text()}, message="head")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    source = demo / "repo" / ".docdelta" / "tasks"
    (tasks / "run-tests.yaml").write_text((source / "run-tests.yaml").read_text())
    (tasks / "force-push.yaml").write_text(
        (source / "force-push.yaml").read_text().replace("reviewed: true", "reviewed: false")
    )
    (tasks / "install-dev.yaml").write_text(
        (source / "install-dev.yaml").read_text().replace("reviewed: true", "reviewed: false\nholdout: true")
    )
    return repo, tasks


def test_tasks_run_with_unreviewed_gold_are_named_in_the_header_and_the_verdict_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, tasks = _project(tmp_path)
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--tasks", str(tasks),
        "--workdir", str(workdir), "--conditions", "base,head", "--repeats", "2",
    ]  # fmt: skip
    assert main(args) == ExitCode.BAD_INPUT  # refused without the flag
    assert "unreviewed gold in 2 task(s)" in capsys.readouterr().err
    assert main([*args, "--allow-unreviewed"]) == 0
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir)]) == 0
    card = capsys.readouterr().out
    header = card.splitlines()[0]
    assert header.startswith("## docdelta scorecard: ") and header.endswith(f" · ⚠ {NOTE}")
    verdict = next(line for line in card.splitlines() if line.startswith("**Verdict: "))
    assert f"⚠ Unreviewed gold: {NOTE}, run with `--allow-unreviewed`" in verdict
    assert "install-dev" not in card  # the holdout task is counted, not named
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate(json.loads(capsys.readouterr().out))
    assert (summary.unreviewed, summary.unreviewed_holdout) == (["force-push"], 1)
    assert NOTE in render_comment_markdown(summary).splitlines()[0]


def test_a_reviewed_suite_says_nothing_about_review(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, tasks = _project(tmp_path)
    for path in tasks.glob("*.yaml"):
        path.write_text(path.read_text().replace("reviewed: false", "reviewed: true"))
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--tasks", str(tasks),
        "--workdir", str(workdir), "--conditions", "base,head", "--repeats", "1",
    ]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir)]) == 0
    assert "unreviewed" not in capsys.readouterr().out
