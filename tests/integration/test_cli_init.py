"""`docdelta init` adopts docdelta in a repository: it writes the config, the workflow and
drafted tasks, keeps what exists, and the three commands it prints run as printed."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from gitrepo import GitRepo

from docdelta.cli.main import main
from docdelta.config import load_config_file
from docdelta.demo import examples_dir

AGENTS = "# Agents\n\n- Run `make check` before you push.\n- Use `uv sync` to install dependencies.\n"


def _repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\n"})
    repo.commit({"AGENTS.md": AGENTS})
    repo.commit({"README.md": "# proj\nA later commit that changes no instruction file.\n"})
    return repo


def test_init_writes_the_files_and_its_next_commands_run_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    monkeypatch.chdir(repo.path)
    assert main(["init"]) == 0
    out = capsys.readouterr().out
    assert "wrote     .docdelta.yml" in out and "wrote     .github/workflows/docdelta.yml" in out
    load_config_file(repo.path / ".docdelta.yml")  # a valid config, not just text
    workflow = (repo.path / ".github/workflows/docdelta.yml").read_text()
    assert workflow == (examples_dir("workflows") / "docdelta-pr.yml").read_text()
    drafts = sorted((repo.path / ".docdelta/tasks").glob("*.yaml"))
    assert drafts and all("reviewed: false" in d.read_text() for d in drafts)
    commands = [
        line.split(". ", 1)[1] for line in out.splitlines() if line.startswith(("  1.", "  2.", "  3."))
    ]
    assert [c.split()[1] for c in commands] == ["tasks", "agent-check", "run"]
    # the work tree's config, which the past commit's base does not hold
    assert "--config .docdelta.yml --workdir .docdelta-results" in commands[2]
    assert "added     /.docdelta-results/ to .gitignore" in out
    # the copied workflow keeps results on a data branch whose base arms only the push workflow writes
    assert "note      the workflow records each evaluation on the docdelta-results branch" in out
    assert "only once docdelta-push.yml (examples/workflows) runs beside it" in out
    assert (repo.path / ".gitignore").read_text() == "/.docdelta-results/\n"
    for draft in drafts:  # the review the first command asks for
        draft.write_text(draft.read_text().replace("reviewed: false", "reviewed: true"))
    for command in commands:
        argv = shlex.split(command, comments=True)
        assert argv[0] == "docdelta"
        assert main(argv[1:]) == 0, command
    report = capsys.readouterr().out
    assert "docdelta scorecard" in report  # the run evaluated the commit that changed AGENTS.md


def test_init_again_keeps_every_file_and_never_brings_back_a_deleted_draft(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    (repo.path / ".docdelta.yml").write_text("tasks: my/tasks\n")
    assert main(["init", "--repo", str(repo.path)]) == 0
    assert "kept      .docdelta.yml (exists; not overwritten)" in capsys.readouterr().out
    assert (repo.path / ".docdelta.yml").read_text() == "tasks: my/tasks\n"
    drafts = {p: p.read_text() + "# edited\n" for p in (repo.path / ".docdelta/tasks").glob("*.yaml")}
    for path, text in drafts.items():
        path.write_text(text)
    deleted = next(iter(drafts))
    deleted.unlink()  # a draft the user judged not worth a task
    (repo.path / ".gitignore").write_text("build/\n.docdelta-results\n")
    assert main(["init", "--repo", str(repo.path)]) == 0
    out = capsys.readouterr().out
    assert "wrote" not in out and "added" not in out
    assert "drafted nothing: .docdelta/tasks exists" in out
    assert not deleted.exists()
    assert {p: p.read_text() for p in drafts if p != deleted} == {
        p: t for p, t in drafts.items() if p != deleted
    }
    assert (repo.path / ".gitignore").read_text() == "build/\n.docdelta-results\n"  # named once already


def test_init_help_says_what_it_writes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["init", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for written in (".docdelta.yml", ".github/workflows/docdelta.yml", ".docdelta/tasks/", ".gitignore"):
        assert written in out


def test_init_without_an_instruction_file_says_what_to_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "# proj\n"})
    assert main(["init", "--repo", str(repo.path)]) == 2
    err = capsys.readouterr().err
    assert "no instruction file at HEAD" in err and "commit an AGENTS.md" in err
    assert not (repo.path / ".docdelta.yml").exists()


def test_init_that_finds_no_rule_does_not_ask_to_review_drafts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\n\nThis project is a library.\n"})
    monkeypatch.chdir(repo.path)
    assert main(["init"]) == 0
    out = capsys.readouterr().out
    assert "drafted 0 task(s) from AGENTS.md: no concrete rule found" in out
    assert "reviewed: false" not in out


def test_init_warns_when_the_workflow_agent_cannot_read_the_instruction_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped workflow runs Claude Code, which does not load AGENTS.md: on a repository
    with only AGENTS.md every evaluation would tie, so init says so and names who reads it."""
    repo = _repo(tmp_path)
    assert main(["init", "--repo", str(repo.path)]) == 0
    warning = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("warning"))
    assert "the workflow's agent claude_code does not read AGENTS.md" in warning
    assert "in .github/workflows/docdelta.yml set `agent:`" in warning
    assert "codex (secret OPENAI_API_KEY)" in warning and "opencode (secret OPENAI_API_KEY)" in warning

    workflow = repo.path / ".github/workflows/docdelta.yml"
    workflow.write_text(workflow.read_text().replace("agent: claude_code", "agent: codex"))
    assert main(["init", "--repo", str(repo.path)]) == 0  # the user's workflow, kept and checked
    assert "warning" not in capsys.readouterr().out


def test_init_does_not_warn_when_claude_code_loads_the_rules_through_claude_md(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "# proj\n", "AGENTS.md": AGENTS, "CLAUDE.md": "@AGENTS.md\n"})
    assert main(["init", "--repo", str(repo.path)]) == 0
    assert "warning" not in capsys.readouterr().out
