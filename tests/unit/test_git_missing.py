"""A repository without some of its objects (a partial or shallow clone, a damaged one) is
input to fix: the CLI names the object and how to fetch it, exits 2, and shows no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import GitRepo

from docdelta.cli.main import main


def _without_blob(tmp_path: Path, path: str) -> tuple[GitRepo, str]:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "Run `make test`.\n"})
    repo.commit({"AGENTS.md": "Run `make check`.\n"})
    oid = repo.git("rev-parse", f"HEAD:{path}").strip()
    (repo.path / ".git/objects" / oid[:2] / oid[2:]).unlink()
    return repo, oid


@pytest.mark.parametrize("command", ["detect", "run"])
def test_a_missing_blob_is_named_with_the_fetch_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    repo, oid = _without_blob(tmp_path, "AGENTS.md")
    args = [command, "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD"]
    if command == "run":
        (tmp_path / "tasks").mkdir()
        (tmp_path / "tasks/t.yaml").write_text("id: t\nprompt: How?\ngold: {answer: make}\nreviewed: true\n")
        args += ["--tasks", str(tmp_path / "tasks"), "--workdir", str(tmp_path / "work"), "--sandbox", "none"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"does not have git object {oid} (AGENTS.md at " in err
    assert "git fetch --refetch" in err and "fetch-depth: 0" in err
    assert "Traceback" not in err and "ValueError" not in err
