"""`docdelta tasks draft --triggers`: trigger tasks from skills' descriptions, through the CLI
on a real git repository: the examples the description quotes and its "Use when" situation
load the skill, what it rules out and a sibling skill's prompts are near misses, every draft
is unreviewed, a rerun drafts nothing twice, and a file that cannot be drafted from is
refused with the file and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import GitRepo

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.improve.trigger_draft import prompts
from docdelta.tasks.load import load_tasks

RELEASE = ".claude/skills/release/SKILL.md"
DOCS = ".claude/skills/docs/SKILL.md"
SKILLS = {
    RELEASE: "---\nname: release\ndescription: >-\n"
    "  Cut a release of the package. Use when asked to tag or publish\n"
    '  a version, e.g. "release 1.2.0", "publish the wheel". Not for bumping a dependency.\n---\n\n'
    "# Releasing\nBump the version, write the changelog, then tag.\n",
    DOCS: "---\nname: docs\ndescription: Use when asked to build the documentation site.\n---\n\n"
    "Run `make docs`.\n",
    "AGENTS.md": "# Agents\nRun `make check`.\n",
}


def _draft(repo: GitRepo, out: Path, capsys: pytest.CaptureFixture[str], *files: str) -> tuple[int, str]:
    args = ["tasks", "draft", "--triggers", "--repo", str(repo.path), "--out", str(out)]
    code = main([*args, *(a for f in files for a in ("--from", f))])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_should_load_prompts_and_near_misses_from_descriptions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(SKILLS)
    out = tmp_path / "drafts"
    code, printed = _draft(repo, out, capsys, RELEASE, DOCS)
    assert code == ExitCode.OK
    drafted = {
        (t.task.trigger.file, t.task.prompt, t.task.trigger.should_load)
        for t in load_tasks(out)
        if t.task.trigger
    }
    assert drafted == {
        (RELEASE, "Release 1.2.0", True),
        (RELEASE, "Publish the wheel", True),
        (RELEASE, "Tag or publish a version", True),
        (RELEASE, "Bumping a dependency", False),  # what the description rules out
        (RELEASE, "Build the documentation site", False),  # the sibling skill's prompt
        (DOCS, "Build the documentation site", True),
        (DOCS, "Release 1.2.0", False),
        (DOCS, "Publish the wheel", False),
        (DOCS, "Tag or publish a version", False),
    }
    assert all(not t.task.reviewed and t.task.kind == "trigger" for t in load_tasks(out))
    assert "does not load .claude/skills/docs/SKILL.md" in printed
    text = next(out.glob("trigger-release-release-1-2-0*.yaml")).read_text()
    assert text.startswith(
        "# Drafted by `docdelta tasks draft --triggers` from the description of " + RELEASE
    )

    code, again = _draft(repo, out, capsys, RELEASE, DOCS)
    assert code == ExitCode.OK and "drafted 0 task(s)" in again and "already cover" in again
    assert "every draft is `reviewed: false`" in printed
    assert "reviewed: false" not in again, "no draft written, no review to advise"


def test_a_lone_skill_without_a_ruled_out_case_says_no_near_miss_was_drafted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(SKILLS)
    code, printed = _draft(repo, tmp_path / "drafts", capsys, DOCS)
    assert code == ExitCode.OK
    assert f"no near miss drafted for {DOCS}" in printed


@pytest.mark.parametrize(
    ("path", "says"),
    [("AGENTS.md", "not an on-demand instruction file"), (".claude/skills/gone/SKILL.md", "no such file")],
)
def test_a_file_that_cannot_be_drafted_from_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, says: str
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({**SKILLS, ".claude/skills/bare/SKILL.md": "# no front matter\n"})
    code, printed = _draft(repo, tmp_path / "drafts", capsys, path)
    assert code == ExitCode.BAD_INPUT
    assert f"--from {path}: {says}" in printed
    code, printed = _draft(repo, tmp_path / "drafts", capsys, ".claude/skills/bare/SKILL.md")
    assert code == ExitCode.BAD_INPUT and "no `description` in its front matter" in printed


def test_a_dot_inside_a_file_name_does_not_end_the_situation() -> None:
    should, near = prompts(
        "Drive the build scripts offline. Use when verifying changes to scripts/download_cli.py or "
        "scripts/build_wheel.py. Not for editing docs/index.md by hand."
    )
    situation = "Verifying changes to scripts/download_cli.py or scripts/build_wheel.py"
    assert [p for p, _ in should] == [situation]
    assert [p for p, _ in near] == ["Editing docs/index.md by hand"]
