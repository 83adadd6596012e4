"""git.py against real repositories: refs, trees, blobs, diffs, and a hostile environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import GitRepo, Link

from docdelta.errors import ConfigError
from docdelta.git import Repo


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(
        {"README.md": "hello\n", "run.sh": "#!/bin/sh\n", "AGENTS.md": "x\n" * 50}, executable=["run.sh"]
    )
    repo.commit({"AGENTS.md": None, "docs/AGENTS.md": "x\n" * 50, "CLAUDE.md": Link("docs/AGENTS.md"),
                 "logo.bin": b"\x00\x01\x02"})  # fmt: skip
    return repo


def test_not_a_repository_is_a_config_error_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"plain is not a git repository") as info:
        Repo(tmp_path / "plain")
    assert info.value.hint
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match=r"plain is not a git repository"):
        Repo(tmp_path / "plain")


def test_resolve_gives_full_sha_and_names_an_unknown_ref(project: GitRepo) -> None:
    repo = Repo(project.path)
    head = project.git("rev-parse", "HEAD").strip()
    assert repo.resolve("main") == head
    assert repo.resolve(head[:7]) == head
    assert repo.resolve("HEAD~1") == project.git("rev-parse", "HEAD~1").strip()
    assert repo.name == "proj"
    with pytest.raises(ConfigError, match=r"unknown ref 'feature/nope'"):
        repo.resolve("feature/nope")


def test_a_ref_that_looks_like_an_option_is_not_run_as_one(project: GitRepo, tmp_path: Path) -> None:
    out = tmp_path / "written"
    with pytest.raises(ConfigError, match="unknown ref"):
        Repo(project.path).resolve(f"--output={out}")
    assert not out.exists()


def test_tree_lists_modes_sizes_and_links_and_blobs_read_back(project: GitRepo) -> None:
    repo = Repo(project.path)
    entries = {e.path: e for e in repo.tree(repo.resolve("HEAD"))}
    assert set(entries) == {"README.md", "run.sh", "docs/AGENTS.md", "CLAUDE.md", "logo.bin"}
    assert entries["run.sh"].mode == "100755"
    assert entries["CLAUDE.md"].is_symlink
    assert repo.read_blob(entries["CLAUDE.md"].oid) == b"docs/AGENTS.md"
    assert entries["docs/AGENTS.md"].size == 100
    oids = [entries[p].oid for p in ("README.md", "logo.bin", "README.md")]
    assert list(repo.read_blobs(oids)) == [
        (oids[0], b"hello\n"),
        (oids[1], b"\x00\x01\x02"),
        (oids[2], b"hello\n"),
    ]
    only = repo.tree(repo.resolve("HEAD"), ["docs/AGENTS.md"])
    assert [e.path for e in only] == ["docs/AGENTS.md"]


def test_diff_detects_renames_marks_binaries_and_ignores_user_and_repo_config(
    project: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil = tmp_path / "evil.gitconfig"
    evil.write_text("[diff]\n\tnoprefix = true\n[color]\n\tui = always\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(evil))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    project.git("config", "diff.noprefix", "true")
    project.git("config", "diff.external", "false")
    project.git("config", "color.diff", "always")
    repo = Repo(project.path)
    text = repo.diff(repo.resolve("HEAD~1"), repo.resolve("HEAD"))
    assert "rename from AGENTS.md\nrename to docs/AGENTS.md" in text
    assert "Binary files /dev/null and b/logo.bin differ" in text
    assert "\x1b[" not in text
    assert "+++ b/CLAUDE.md" in text
