"""Conditions and sealed checkouts, checked with real git from the agent's side of the wall."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from gitrepo import GitRepo, Link, git

from docdelta.checkout import seal as workspace
from docdelta.checkout.seal import (
    SealedCheckout,
    build_overlays,
    overlay_checkout,
    seal,
    seal_once,
    seal_source,
)
from docdelta.config import ProjectConfig
from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.instructions.detect import InstructionMatcher, Overlay
from docdelta.results.store import checkout_dir
from docdelta.sandbox.base import RECORD_SUFFIX

MATCH = InstructionMatcher()
STRIP = [*ProjectConfig(strip=["hidden/**"]).checkout_strip]
GOLD = "GOLDANSWER-7f3e"


@pytest.fixture
def proj(tmp_path: Path) -> tuple[Repo, str, str]:
    g = GitRepo.init(tmp_path / "proj")
    base = g.commit(
        {
            "README.md": "Readme for humans.\n",
            "run.sh": "#!/bin/sh\necho hi\n",
            "link.txt": Link("README.md"),
            ".gitignore": "*.log\n",
            "build.log": "tracked although ignored\n",
            "AGENTS.md": "Use make test.\n",
            ".docdelta.yml": "strip: ['hidden/**']\n",
            ".docdelta/tasks/t.yaml": f"id: t\nprompt: p\ngold:\n  points: [{GOLD}]\n",
            "hidden/test_secret.py": f"assert '{GOLD}'\n",
        },
        executable=["run.sh"],
    )
    head = g.commit(
        {"AGENTS.md": "Use tox -e py.\n", "CLAUDE.md": Link("AGENTS.md"), ".cursor/rules/a.mdc": "x\n"}
    )
    return Repo(g.path), base, head


def files_of(root: Path) -> dict[str, str]:
    """Everything the agent can read outside .git: path -> content or '-> target'."""
    out = {}
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names + [d for d in dirs if Path(dirpath, d).is_symlink()]:
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            out[rel] = f"-> {os.readlink(p)}" if p.is_symlink() else p.read_text()
    return out


def all_bytes(root: Path) -> bytes:
    """Every byte the agent could reach: files (incl. .git) and every decompressed git object."""
    chunks = [p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    chunks.append(git(root, "cat-file", "--batch-all-objects", "--batch").encode())
    chunks.append("\n".join(str(p.relative_to(root)) for p in root.rglob("*")).encode())
    return b"\n".join(chunks)


def test_overlays_per_condition(proj: tuple[Repo, str, str]) -> None:
    repo, base, head = proj
    o = build_overlays(repo, base, head, ["base", "head", "none"], MATCH, None)
    assert list(o) == ["base", "head", "none"]
    assert o["base"].files == {"AGENTS.md": b"Use make test.\n"} and not o["base"].symlinks
    assert set(o["head"].files) == {"AGENTS.md", ".cursor/rules/a.mdc"}
    assert o["head"].symlinks == {"CLAUDE.md": "AGENTS.md"}
    assert o["none"] == Overlay()


def test_condition_names_are_checked(proj: tuple[Repo, str, str]) -> None:
    repo, base, head = proj
    with pytest.raises(ConfigError, match=r"unknown condition.*bogus") as info:
        build_overlays(repo, base, head, ["head", "bogus"], MATCH, None)
    assert "base, head, none, patched" in info.value.hint
    with pytest.raises(ConfigError, match="needs a patch"):
        build_overlays(repo, base, head, ["patched"], MATCH, None)


def test_patched_applies_a_diff_to_heads_instruction_files(
    proj: tuple[Repo, str, str], tmp_path: Path
) -> None:
    repo, base, head = proj
    patch = tmp_path / "fix.diff"
    patch.write_text(
        "diff --git a/AGENTS.md b/AGENTS.md\n--- a/AGENTS.md\n+++ b/AGENTS.md\n@@ -1 +1,2 @@\n"
        " Use tox -e py.\n+Lint with ruff.\n"
        "diff --git a/GEMINI.md b/GEMINI.md\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/GEMINI.md\n@@ -0,0 +1 @@\n+g\n"
    )
    o = build_overlays(repo, base, head, ["patched"], MATCH, patch)["patched"]
    assert o.files["AGENTS.md"] == b"Use tox -e py.\nLint with ruff.\n"
    assert o.files["GEMINI.md"] == b"g\n" and o.files[".cursor/rules/a.mdc"] == b"x\n"
    assert o.symlinks == {"CLAUDE.md": "AGENTS.md"}


@pytest.mark.parametrize(
    ("diff", "message"),
    [
        (
            "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Readme for humans.\n+x\n",
            r"touches README\.md, which is not an instruction",
        ),
        (
            "--- a/AGENTS.md\n+++ b/AGENTS.md\n@@ -1 +1 @@\n-Not what is there.\n+x\n",
            r"fix\.diff: the patch does not apply",
        ),
        (
            "--- AGENTS.md\t2026-01-01\n+++ AGENTS.md\t2026-01-01\n"
            "@@ -1 +1 @@\n-Use tox -e py.\n+Use tox -e py.\n",
            r"applied, but changed nothing in head's instruction files",
        ),
    ],
)
def test_bad_patches_are_config_errors(
    proj: tuple[Repo, str, str], tmp_path: Path, diff: str, message: str
) -> None:
    repo, base, head = proj
    (tmp_path / "fix.diff").write_text(diff)
    with pytest.raises(ConfigError, match=message):
        build_overlays(repo, base, head, ["patched"], MATCH, tmp_path / "fix.diff")


def sealed(proj: tuple[Repo, str, str], overlay: Overlay, dest: Path) -> SealedCheckout:
    repo, _base, head = proj
    return seal(repo, head, overlay, dest, MATCH, STRIP)


def test_sealed_checkout_holds_source_plus_overlay_and_nothing_of_ours(
    proj: tuple[Repo, str, str], tmp_path: Path
) -> None:
    repo, base, head = proj
    overlays = build_overlays(repo, base, head, ["base", "head"], MATCH, None)
    c = sealed(proj, overlays["base"], tmp_path / "w" / "checkout")
    assert files_of(c.path) == {
        "README.md": "Readme for humans.\n",
        "run.sh": "#!/bin/sh\necho hi\n",
        "link.txt": "-> README.md",
        ".gitignore": "*.log\n",
        "build.log": "tracked although ignored\n",
        "AGENTS.md": "Use make test.\n",  # base's docs on head's source
    }
    assert os.access(c.path / "run.sh", os.X_OK)
    assert GOLD.encode() not in all_bytes(c.path)
    assert git(c.path, "rev-list", "--all", "--count").strip() == "1"
    assert git(c.path, "rev-parse", "HEAD").strip() == c.commit
    assert git(c.path, "branch", "--show-current").strip() == "main"
    assert git(c.path, "remote").strip() == ""
    assert git(c.path, "status", "--porcelain").strip() == ""
    h = sealed(proj, overlays["head"], tmp_path / "w2" / "checkout")
    assert (h.path / "CLAUDE.md").is_symlink() and os.readlink(h.path / "CLAUDE.md") == "AGENTS.md"
    assert h.source_sha256 == c.source_sha256 and h.tree_sha256 != c.tree_sha256
    assert h.overlay_sha256 == overlays["head"].sha256


def test_no_object_of_a_removed_file_remains(proj: tuple[Repo, str, str], tmp_path: Path) -> None:
    repo, _base, head = proj
    removed = {
        e.oid
        for e in repo.tree(head)
        if e.path in {"AGENTS.md", ".docdelta/tasks/t.yaml", "hidden/test_secret.py"}
    }
    c = sealed(proj, Overlay(), tmp_path / "checkout")
    objects = git(c.path, "cat-file", "--batch-all-objects", "--batch-check")
    assert removed and not any(oid in objects for oid in removed)
    assert "AGENTS.md" not in files_of(c.path) and "CLAUDE.md" not in files_of(c.path)


def test_no_enclosing_repository_is_reachable(proj: tuple[Repo, str, str], tmp_path: Path) -> None:
    outer = GitRepo.init(tmp_path / "outer")
    outer.commit({"outer.txt": "o\n"})
    c = sealed(proj, Overlay(), outer.path / "nested" / "checkout")
    (c.path / "sub").mkdir()
    for where in (c.path, c.path / "sub"):
        assert Path(git(where, "rev-parse", "--show-toplevel").strip()) == c.path.resolve()
    assert (
        git(c.path, "log", "--format=%an %ae %ad %s").strip()
        == "docdelta docdelta@localhost Sat Jan 1 00:00:00 2000 +0000 snapshot"
    )


def test_same_tree_same_commit_and_no_trace_of_the_directory_or_condition(
    proj: tuple[Repo, str, str], tmp_path: Path
) -> None:
    repo, base, head = proj
    patch = tmp_path / "p.diff"
    patch.write_text("--- a/AGENTS.md\n+++ b/AGENTS.md\n@@ -1 +1 @@\n-Use tox -e py.\n+Use nox.\n")
    overlays = build_overlays(repo, base, head, ["head", "patched"], MATCH, patch)
    one = sealed(proj, overlays["patched"], tmp_path / "zzmarker-patched")
    two = sealed(proj, overlays["patched"], tmp_path / "other" / "x")
    assert one.commit == two.commit and one.tree_sha256 == two.tree_sha256
    assert sealed(proj, overlays["head"], tmp_path / "h").commit != one.commit
    reachable = all_bytes(one.path)
    assert b"zzmarker" not in reachable and b"patched" not in reachable
    assert b"Use nox." in reachable


def test_copy_to_keeps_links_history_and_a_clean_status(proj: tuple[Repo, str, str], tmp_path: Path) -> None:
    repo, base, head = proj
    c = sealed(proj, build_overlays(repo, base, head, ["head"], MATCH, None)["head"], tmp_path / "sealed")
    copy = c.copy_to(tmp_path / "cells" / "r1")
    assert copy == tmp_path / "cells" / "r1"
    assert files_of(copy) == files_of(c.path)
    assert (copy / "CLAUDE.md").is_symlink()
    assert git(copy, "rev-parse", "HEAD").strip() == c.commit
    assert git(copy, "status", "--porcelain").strip() == ""


def test_seal_refuses_a_used_directory(proj: tuple[Repo, str, str], tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    with pytest.raises(ConfigError, match="busy is not empty"):
        sealed(proj, Overlay(), tmp_path / "busy")


def test_seal_once_reuses_an_unchanged_checkout_and_reseals_a_changed_one(
    proj: tuple[Repo, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun seals nothing, but only a checkout git confirms untouched is reused, and only
    under the same seal key. The real `overlay_checkout` is counted, not replaced: a file's
    inode cannot tell a reuse from a rebuild, since the filesystem hands a deleted file's
    inode to the next one created."""
    repo, base, head = proj
    sealings: list[Path] = []

    def counted(*args: Any, **kwargs: Any) -> SealedCheckout:
        sealings.append(args[2])
        return overlay_checkout(*args, **kwargs)

    monkeypatch.setattr(workspace, "overlay_checkout", counted)
    overlay = build_overlays(repo, base, head, ["head"], MATCH, None)["head"]
    dest = tmp_path / "checkouts" / "head"
    first = seal_once(repo, head, overlay, dest, MATCH, STRIP)
    again = seal_once(repo, head, overlay, dest, MATCH, STRIP)
    assert again == first and len(sealings) == 1, "reused, not rebuilt"
    assert not (dest / RECORD_SUFFIX).exists() and (tmp_path / "checkouts" / f"head{RECORD_SUFFIX}").is_file()

    (dest / "README.md").write_text("edited by hand\n")
    resealed = seal_once(repo, head, overlay, dest, MATCH, STRIP)
    assert resealed == first and (dest / "README.md").read_text() == "Readme for humans.\n"
    assert len(sealings) == 2
    (dest / "stray.txt").write_text("left behind\n")
    seal_once(repo, head, overlay, dest, MATCH, STRIP)
    assert not (dest / "stray.txt").exists(), "an added file is a change too"

    other = seal_once(repo, head, overlay, dest, MATCH, [*STRIP, "/run.sh"])
    assert other.tree_sha256 != first.tree_sha256 and not (dest / "run.sh").exists()


def test_conditions_share_one_sealed_source_and_none_reaches_another_conditions_files(
    proj: tuple[Repo, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stripped source is sealed once for every condition, yet each checkout (files and
    every git object, loose or packed) holds its own instruction files and no other's, and is
    the same commit a checkout sealed on its own would be."""
    repo, base, head = proj
    sources: list[Path] = []

    def counted(*args: Any, **kwargs: Any) -> workspace.SealedSource:
        sources.append(args[2])
        return seal_source(*args, **kwargs)

    monkeypatch.setattr(workspace, "seal_source", counted)
    overlays = build_overlays(repo, base, head, ["base", "head", "none"], MATCH, None)
    made = {
        n: seal_once(repo, head, o, tmp_path / "checkouts" / n, MATCH, STRIP) for n, o in overlays.items()
    }
    assert len(sources) == 1, "one sealed source for three conditions"
    own = {"base": b"Use make test.", "head": b"Use tox -e py.", "none": None}
    for name, checkout in made.items():
        reachable = all_bytes(checkout.path)
        for other, text in own.items():
            if text is not None:
                assert (text in reachable) == (other == name), f"{name}'s checkout and {other}'s files"
        assert git(checkout.path, "fsck", "--strict", "--no-dangling").strip() == ""
        assert git(checkout.path, "status", "--porcelain", "--ignored").strip() == ""
        assert git(checkout.path, "rev-list", "--all", "--count").strip() == "1"
        alone = seal(repo, head, overlays[name], tmp_path / "alone" / name, MATCH, STRIP)
        assert (alone.commit, alone.tree_sha256) == (checkout.commit, checkout.tree_sha256)
        assert checkout.source_sha256 == made["none"].source_sha256
    assert made["none"].tree_sha256 == made["none"].source_sha256
    assert "AGENTS.md" not in files_of(made["none"].path)
    assert files_of(made["head"].path)["CLAUDE.md"] == "-> AGENTS.md"


def test_an_edit_through_one_checkout_never_reaches_the_next_one_made(
    proj: tuple[Repo, str, str], tmp_path: Path
) -> None:
    """Checkouts share the source's files by hard link: a file written in place in one
    (by hand; runs never do) changes the source too, which is then sealed again."""
    repo, base, head = proj
    overlays = build_overlays(repo, base, head, ["base", "head"], MATCH, None)
    one = seal_once(repo, head, overlays["base"], tmp_path / "checkouts" / "a", MATCH, STRIP)
    with (one.path / "README.md").open("r+") as f:
        f.write("EDITED")
    two = seal_once(repo, head, overlays["head"], tmp_path / "checkouts" / "b", MATCH, STRIP)
    assert (two.path / "README.md").read_text() == "Readme for humans.\n"
    assert git(two.path, "status", "--porcelain").strip() == ""
    again = seal_once(repo, head, overlays["base"], tmp_path / "checkouts" / "a", MATCH, STRIP)
    assert again == one and (one.path / "README.md").read_text() == "Readme for humans.\n"


def test_an_overlay_file_is_never_written_through_a_link_of_the_source(
    proj: tuple[Repo, str, str], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"AGENTS\.md .* would be written through link\.txt") as info:
        sealed(proj, Overlay(files={"link.txt/AGENTS.md": b"x\n"}), tmp_path / "c")
    assert "disagree about which paths are directories" in info.value.hint
    assert (proj[0].root / "README.md").read_text() == "Readme for humans.\n"


def test_checkout_names_are_stable_in_a_workdir_and_say_nothing_elsewhere(tmp_path: Path) -> None:
    """`none`'s overlay hash is a constant anyone can compute: a checkout's name, which a run
    may read in /proc/mounts, must not be it, yet a rerun must find the same checkout."""
    none = Overlay().sha256
    one, again = checkout_dir(tmp_path / "w1", none), checkout_dir(tmp_path / "w1", none)
    other = checkout_dir(tmp_path / "w2", none)
    assert one == again and one.name != other.name
    assert none[:8] not in one.name and none[:8] not in other.name
    assert checkout_dir(tmp_path / "w1", none, "a" * 40) != one
    assert oct((tmp_path / "w1" / "checkouts" / ".key").stat().st_mode & 0o777) == "0o600"
