"""`SandboxProvider.environment()`: the part of a saved selftest's key that says what the
hidden tests ran with besides the checkout. It must change when the toolchain a sandbox
shows changes (or a pass from before it broke is reused, and the runs end `no_test_ran`),
and must not change otherwise (or every rerun pays for the selftest again)."""

from __future__ import annotations

import shutil
from pathlib import Path

from docdelta.sandbox.base import toolchain_identity
from docdelta.sandbox.local import LocalProvider, NoneProvider
from docdelta.sandbox.pool import PerThreadProvider

ENV = {"PATH": "/venv/bin:/usr/bin:/bin"}


def _venv(root: Path) -> Path:
    """A toolchain laid out like a virtualenv: `bin/` with the test runner, `lib/`."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "pytest").write_text("#!/bin/sh\n")
    (root / "lib" / "site-packages").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


def test_the_identity_is_the_same_while_nothing_changes(tmp_path: Path) -> None:
    venv = str(_venv(tmp_path / "venv"))
    assert toolchain_identity("local", [venv], ENV) == toolchain_identity("local", [venv], dict(ENV))


def test_the_identity_changes_with_the_env_the_paths_or_the_kind(tmp_path: Path) -> None:
    venv, other = str(_venv(tmp_path / "venv")), str(_venv(tmp_path / "other"))
    before = toolchain_identity("local", [venv], ENV)
    assert toolchain_identity("local", [venv], {"PATH": "/usr/bin:/bin"}) != before
    assert toolchain_identity("local", [venv, other], ENV) != before
    assert toolchain_identity("local", [other], ENV) != before
    assert toolchain_identity("docker img sha256:1", [venv], ENV) != before


def test_a_tool_uninstalled_from_a_directory_below_a_path_changes_it(tmp_path: Path) -> None:
    """`pip uninstall pytest` takes `bin/pytest` out of the virtualenv named in sandbox.paths."""
    venv = _venv(tmp_path / "venv")
    before = toolchain_identity("local", [str(venv)], ENV)
    (venv / "bin" / "pytest").unlink()
    assert toolchain_identity("local", [str(venv)], ENV) != before


def test_a_file_rewritten_or_a_path_recreated_or_gone_changes_it(tmp_path: Path) -> None:
    venv = _venv(tmp_path / "venv")
    before = toolchain_identity("local", [str(venv)], ENV)
    (venv / "pyvenv.cfg").write_text("home = /opt/python3.9/bin\n")  # another size and time
    rewritten = toolchain_identity("local", [str(venv)], ENV)
    assert rewritten != before
    shutil.rmtree(venv)
    gone = toolchain_identity("local", [str(venv)], ENV)
    assert gone not in (before, rewritten)
    _venv(venv)  # recreated with the same names: new inodes
    assert toolchain_identity("local", [str(venv)], ENV) not in (before, rewritten, gone)


def test_local_providers_give_their_toolchain_and_a_pool_gives_its_slots(tmp_path: Path) -> None:
    venv = str(_venv(tmp_path / "venv"))
    local = LocalProvider(root=tmp_path / "a", ro_paths=[venv], env=ENV)
    pool = PerThreadProvider(lambda slot: LocalProvider(root=tmp_path / f"p{slot}", ro_paths=[venv], env=ENV))
    bare = LocalProvider(root=tmp_path / "b", env=ENV)
    unsandboxed = NoneProvider(root=tmp_path / "c", ro_paths=[venv], env=ENV)
    try:
        assert local.environment() == toolchain_identity("local", [venv], ENV)
        assert pool.environment() == local.environment()
        assert bare.environment() != local.environment()
        assert unsandboxed.environment() != local.environment()  # other sandbox, other key
    finally:
        for provider in (local, pool, bare, unsandboxed):
            provider.close()
