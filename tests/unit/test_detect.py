"""Instruction-file table, near misses, change detection from refs and from diffs, reading overlays."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import GitRepo, Link

from docdelta.cli.main import main
from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.instructions.detect import (
    MAX_INSTRUCTION_BYTES,
    DiffFile,
    InstructionMatcher,
    Overlay,
    changed_files,
    detect_diff,
    detect_refs,
    diff_files,
    instruction_files,
)
from docdelta.instructions.models import FileStatus


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("AGENTS.md", {"codex", "opencode", "zed"}),
        ("pkg/sub/AGENTS.md", {"codex", "opencode"}),
        ("CLAUDE.md", {"claude_code", "opencode", "zed"}),
        ("pkg/CLAUDE.local.md", {"claude_code"}),
        (".claude/rules/style.md", {"claude_code"}),
        (".claude/skills/deploy/SKILL.md", {"claude_code", "opencode"}),
        (".cursorrules", {"cursor"}),
        (".cursor/rules/python.mdc", {"cursor"}),
        (".github/copilot-instructions.md", {"copilot"}),
        (".github/instructions/py.instructions.md", {"copilot"}),
        (".clinerules", {"cline"}),
        (".clinerules/01-style.md", {"cline"}),
        (".windsurf/rules/a.md", {"windsurf"}),
        ("GEMINI.md", {"gemini"}),
        ("CONVENTIONS.md", {"aider"}),
        (".junie/guidelines.md", {"junie"}),
        (".rules", {"zed"}),
        (".kiro/steering/product.md", {"kiro"}),
        (".amazonq/rules/a.md", {"amazon_q"}),
        (".roo/rules/a.md", {"roo"}),
    ],
)
def test_builtin_table_names_the_families_that_read_a_file(path: str, expected: set[str]) -> None:
    assert expected <= set(InstructionMatcher().families(path))


def test_families_are_faithful_not_generous() -> None:
    m = InstructionMatcher()
    assert "claude_code" not in m.families("AGENTS.md")  # Claude Code does not read AGENTS.md
    assert "gemini" not in m.families("AGENTS.md")
    assert "codex" not in m.families("CLAUDE.md")
    for human_doc in ("README.md", "CONTRIBUTING.md", "docs/guide.md", "src/.cursorrules", "x.mdc"):
        assert m.families(human_doc) == [], human_doc


def test_config_globs_extend_and_exclude() -> None:
    m = InstructionMatcher(include_globs=["docs/ai/*.md"], exclude_globs=["vendor/**"])
    assert m.families("docs/ai/rules.md") == ["custom"]
    assert m.families("docs/ai/deeper/rules.md") == []  # `*` stays within one directory
    assert m.families("vendor/lib/AGENTS.md") == []
    assert (
        m.near_miss("vendor/lib/AGENTS.md")
        == "excluded by the project config, but read by codex, copilot, cursor, opencode"
    )


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("agents.md", "differs only in case from AGENTS.md"),
        ("docs/agents.md", "differs only in case from AGENTS.md"),
        # Which agent would load it, and where: a case-insensitive file system's lookup.
        (
            "docs/agents.md",
            "(macOS, Windows) codex, copilot, cursor, opencode would load it as its folder's AGENTS.md",
        ),
        (
            "Claude.md",
            "(macOS, Windows) claude_code, copilot, opencode, zed would load it as its folder's CLAUDE.md",
        ),
        ("docs/copilot-instructions.md", "outside where agents look"),
    ],
)
def test_near_misses_are_reported(path: str, needle: str) -> None:
    reason = InstructionMatcher().near_miss(path)
    assert reason is not None and needle in reason


def test_plain_files_and_instruction_files_are_no_near_miss() -> None:
    m = InstructionMatcher()
    assert m.near_miss("README.md") is None
    assert m.near_miss("AGENTS.md") is None
    assert m.near_miss("docs/guidelines.md") is None


@pytest.fixture
def changes(tmp_path: Path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({
        "README.md": "r\n", "AGENTS.md": "a\n" * 20, "GEMINI.md": "g\n", "CONVENTIONS.md": "c\n" * 20,
        ".cursorrules": "old\n",
    })  # fmt: skip
    repo.commit({
        "README.md": "r2\n",
        "AGENTS.md": None, "pkg/AGENTS.md": "a\n" * 20,  # renamed within the set
        "CONVENTIONS.md": None, "notes/conventions-old.txt": "c\n" * 20,  # renamed out of the set
        "GEMINI.md": "g2\n",
        "CLAUDE.md": Link("pkg/AGENTS.md"),
        ".cursorrules": None,
        "docs/agents.md": "near\n",
    })  # fmt: skip
    return repo


def test_the_raw_diff_names_the_files_the_patch_does(tmp_path: Path) -> None:
    """detect_refs reads `git diff --raw` (names and modes, no hunks: a real range's patch
    is megabytes); it must list what the patch lists, typechanges split in two as there."""
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({
        "AGENTS.md": "a\n" * 20, "CLAUDE.md": Link("AGENTS.md"), "GEMINI.md": Link("AGENTS.md"),
        "run.sh": "echo\n", "old.txt": "o\n" * 20, "gone.md": "g\n", ".cursorrules": "c\n",
    })  # fmt: skip
    repo.commit(
        {
            "AGENTS.md": "b\n" * 20,  # modified
            "CLAUDE.md": "now a file\n",  # link -> file
            ".cursorrules": Link("AGENTS.md"),  # file -> link
            "GEMINI.md": None, ".gemini/GEMINI.md": Link("../AGENTS.md"),  # a link moved
            "old.txt": None, "new dir/renamed é.txt": "o\n" * 20,  # renamed, unusual name
            "gone.md": None, "added.md": "x\n",
        },
        executable=["run.sh"],  # mode change only
    )  # fmt: skip
    git = Repo(repo.path)
    base, head = git.resolve("HEAD~1"), git.resolve("HEAD")
    patch = diff_files(git.diff(base, head))
    assert changed_files(git, base, head) == patch
    assert DiffFile("CLAUDE.md", None, True) in patch and DiffFile(None, "CLAUDE.md", False) in patch
    assert DiffFile("old.txt", "new dir/renamed é.txt", False) in patch
    assert DiffFile("run.sh", "run.sh", False) in patch


def test_detect_refs_reports_each_status_and_the_near_miss(changes: GitRepo) -> None:
    repo = Repo(changes.path)
    d = detect_refs(repo, "HEAD~1", "HEAD", InstructionMatcher())
    assert d.base == repo.resolve("HEAD~1") and d.head == repo.resolve("HEAD")
    got = {c.path: c for c in d.changed}
    assert got["pkg/AGENTS.md"].status is FileStatus.renamed and got["pkg/AGENTS.md"].old_path == "AGENTS.md"
    assert got["CONVENTIONS.md"].status is FileStatus.deleted  # renamed out: gone for the agent
    # Zed reads only the first of its root files: .cursorrules at base, CLAUDE.md at head.
    assert got["GEMINI.md"].status is FileStatus.modified and got["GEMINI.md"].families == [
        "copilot",
        "gemini",
    ]
    assert got["CLAUDE.md"].status is FileStatus.added and got["CLAUDE.md"].symlink
    assert got[".cursorrules"].status is FileStatus.deleted
    assert set(got) == {"pkg/AGENTS.md", "CONVENTIONS.md", "GEMINI.md", "CLAUDE.md", ".cursorrules"}
    assert [n.path for n in d.near_misses] == ["docs/agents.md"]
    assert not d.empty


def test_detect_diff_on_the_same_text_gives_the_same_answer(changes: GitRepo) -> None:
    repo = Repo(changes.path)
    base, head = repo.resolve("HEAD~1"), repo.resolve("HEAD")
    from_text = detect_diff(repo.diff(base, head), InstructionMatcher(), base=base, head=head)
    from_refs = detect_refs(repo, base, head, InstructionMatcher())
    assert [(f.path, f.status) for f in from_text.changed] == [(f.path, f.status) for f in from_refs.changed]


def test_no_instruction_change_is_empty(changes: GitRepo) -> None:
    head = changes.commit({"README.md": "only docs for humans\n"})
    d = detect_refs(Repo(changes.path), "HEAD~1", head, InstructionMatcher())
    assert d.empty and d.changed == []


def test_instruction_files_keep_links_as_links(changes: GitRepo) -> None:
    repo = Repo(changes.path)
    overlay = instruction_files(repo, repo.resolve("HEAD"), InstructionMatcher())
    assert overlay.symlinks == {"CLAUDE.md": "pkg/AGENTS.md"}
    assert set(overlay.files) == {"pkg/AGENTS.md", "GEMINI.md"}
    assert overlay.files["GEMINI.md"] == b"g2\n"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"CLAUDE.md": Link("../../etc/passwd")}, r"CLAUDE.md .* symlink to '../../etc/passwd', outside"),
        ({"CLAUDE.md": Link("/etc/passwd")}, r"CLAUDE.md .* outside the repository"),
        ({"AGENTS.md": "x" * (MAX_INSTRUCTION_BYTES + 1)}, r"AGENTS.md .* over the 1 MiB limit"),
        ({".cursor/rules/a.mdc": b"ok\x00no"}, r"\.cursor/rules/a\.mdc .* binary"),
    ],
)
def test_unsafe_instruction_files_are_refused_by_name(
    tmp_path: Path, files: dict[str, object], message: str
) -> None:
    g = GitRepo.init(tmp_path / "p")
    sha = g.commit({"README.md": "r\n", **files})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=message) as info:
        instruction_files(Repo(g.path), sha, InstructionMatcher())
    assert info.value.hint


def test_overlay_hash_is_stable_and_sees_links_and_contents() -> None:
    a = Overlay(files={"AGENTS.md": b"x", "GEMINI.md": b"y"}, symlinks={"CLAUDE.md": "AGENTS.md"})
    b = Overlay(files={"GEMINI.md": b"y", "AGENTS.md": b"x"}, symlinks={"CLAUDE.md": "AGENTS.md"})
    assert a.sha256 == b.sha256
    assert a.sha256 != Overlay(files=dict(a.files), symlinks={"CLAUDE.md": "GEMINI.md"}).sha256
    assert a.sha256 != Overlay(files={"AGENTS.md": b"x", "GEMINI.md": b"z"}, symlinks=dict(a.symlinks)).sha256
    assert Overlay().sha256 != a.sha256
    spec = a.spec("head")
    assert spec.name == "head" and spec.overlay_sha256 == a.sha256
    assert list(spec.files) == ["AGENTS.md", "CLAUDE.md", "GEMINI.md"]


def test_detect_prints_near_misses_with_one_reason_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g = GitRepo.init(tmp_path / "proj")
    g.commit(
        {f"docs/{lang}/agents.md": "# API: agents\n" for lang in ("en", "ja", "ko")} | {"AGENTS.md": "a\n"}
    )
    g.commit({"AGENTS.md": "b\n"})
    assert main(["detect", "--repo", str(g.path), "--base", "HEAD~1", "--head", "HEAD"]) == 0
    notes = [x for x in capsys.readouterr().out.splitlines() if x.startswith("note")]
    assert notes == [
        "note      3 files (docs/en/agents.md, docs/ja/agents.md, docs/ko/agents.md): "
        "differs only in case from AGENTS.md: where file names are case-insensitive (macOS, Windows) "
        "codex, copilot, cursor, opencode would load it as its folder's AGENTS.md"
    ]
