"""A workspace install shown in each checkout (`docdelta.checkout.envs`): which links a checkout gets,
that they are part of the seal, and that an agent's edits to them never reach grading.

The install here is laid out by hand in the shape pnpm writes (a `.pnpm` virtual store, links
from each `node_modules` into it, a scope directory, a workspace package linked relatively);
a real `pnpm install` of logfire-js runs through the same code in tests/real/."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo

from docdelta.checkout import envs
from docdelta.checkout.seal import SealedCheckout, seal, seal_key
from docdelta.config import SandboxConfig
from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.grading.hidden import grading_tree
from docdelta.instructions.detect import InstructionMatcher, Overlay

STORE = "node_modules/.pnpm/vitest@4.1.9/node_modules/vitest"


def _install(root: Path) -> Path:
    tree = root / "tree"
    (tree / STORE).mkdir(parents=True)
    (tree / STORE / "package.json").write_text('{"name": "vitest"}\n')
    (tree / "node_modules/.pnpm/x@1/node_modules/@scope/x").mkdir(parents=True)
    (tree / "node_modules/vitest").symlink_to(".pnpm/vitest@4.1.9/node_modules/vitest")
    (tree / "node_modules/@scope").mkdir()
    (tree / "node_modules/@scope/x").symlink_to("../.pnpm/x@1/node_modules/@scope/x")
    (tree / "node_modules/.modules.yaml").write_text("layoutVersion: 5\n")
    pkg = tree / "packages/a/node_modules"
    pkg.mkdir(parents=True)
    (pkg / "b").symlink_to("../../b")  # `b: workspace:*`
    (pkg / "vitest").symlink_to(f"../../../{STORE}")
    (tree / "packages/b").mkdir()
    return root


def test_every_node_modules_entry_links_into_the_install_but_workspace_packages_stay_the_checkouts(
    tmp_path: Path,
) -> None:
    root = _install(tmp_path / "env")
    tree = root / "tree"
    assert envs.links(root) == {
        "node_modules/.modules.yaml": str(tree / "node_modules/.modules.yaml"),
        "node_modules/.pnpm": str(tree / "node_modules/.pnpm"),
        "node_modules/@scope/x": str(tree / "node_modules/@scope/x"),
        "node_modules/vitest": str(tree / "node_modules/vitest"),
        "packages/a/node_modules/b": "../../b",
        "packages/a/node_modules/vitest": str(tree / "packages/a/node_modules/vitest"),
    }
    assert envs.links(None) == {}


def _sealed(tmp_path: Path, links: dict[str, str]) -> tuple[Repo, str, Path]:
    repo = GitRepo.init(tmp_path / "src")
    sha = repo.commit(
        {"package.json": "{}\n", "packages/a/index.js": "export {}\n", "packages/b/index.js": ""}
    )
    dest = tmp_path / f"sealed-{len(links)}"
    sealed = seal(Repo(repo.path), sha, Overlay(), dest, InstructionMatcher(), [], links)
    return Repo(repo.path), sealed.tree_sha256, dest


def test_the_links_are_sealed_into_the_checkout_and_its_hashes(tmp_path: Path) -> None:
    root = _install(tmp_path / "env")
    links = envs.links(root)
    repo, with_env, dest = _sealed(tmp_path, links)
    _, without, _ = _sealed(tmp_path, {})
    assert with_env != without  # a changed install is a changed checkout (and a new selftest)
    assert (dest / "node_modules/vitest/package.json").read_text() == '{"name": "vitest"}\n'
    assert (dest / "packages/a/node_modules/b").resolve() == (dest / "packages/b").resolve()
    assert (dest / "node_modules").is_dir() and not (dest / "node_modules").is_symlink()  # tools write here
    sha = repo.resolve("HEAD")
    assert seal_key(sha, Overlay(), InstructionMatcher(), [], links) != seal_key(
        sha, Overlay(), InstructionMatcher(), []
    )


def test_an_agents_replaced_node_module_never_reaches_grading(tmp_path: Path) -> None:
    """The agent swaps the sealed link for its own package (say, a reporter that writes a
    passing report): the grader's checkout holds the sealed link again."""
    root = _install(tmp_path / "env")
    _, _, dest = _sealed(tmp_path, envs.links(root))
    work = tmp_path / "agent"
    subprocess.run(["cp", "-a", str(dest), str(work)], check=True)
    (work / "node_modules/vitest").unlink()
    (work / "node_modules/vitest").mkdir()
    (work / "node_modules/vitest/package.json").write_text('{"name": "vitest", "main": "fake.js"}\n')
    git = ["git", "-C", str(work), "-c", "safe.directory=*"]
    subprocess.run([*git, "add", "--all", "--force", "."], check=True)
    diff = subprocess.run(
        [*git, "diff", "--cached", "--binary", "HEAD"], check=True, capture_output=True
    ).stdout
    assert b"node_modules/vitest" in diff
    sealed = SealedCheckout(dest, "", "", "", "")
    tree = grading_tree(sealed, diff, {}, tmp_path / "scratch")
    assert tree.applied == []
    assert {d.path for d in tree.dropped} == {"node_modules/vitest", "node_modules/vitest/package.json"}
    assert not any(p.startswith("node_modules") for p in [*tree.write, *tree.remove])
    link = tree.base / "node_modules/vitest"
    assert link.is_symlink() and os.readlink(link) == str(root / "tree/node_modules/vitest")


def test_a_workspace_manager_missing_from_the_sandbox_path_is_a_clear_error(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "src")
    sha = repo.commit({"package.json": "{}\n"})
    config = SandboxConfig.model_validate({"env": {"PATH": str(tmp_path)}, "workspace": {"manager": "pnpm"}})
    with pytest.raises(ConfigError, match=r"sandbox\.workspace\.manager' is pnpm, but no pnpm is on"):
        envs.install(Repo(repo.path), sha, config)
