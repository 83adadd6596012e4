"""A workspace install runs on the host from the source commit (`docdelta.checkout.envs`), usually the
pull request's head, so its tree is hostile: its root package's lifecycle scripts and its
`.pnpmfile.cjs` are code the PR chose. Each attack here must fail: no script or pnpmfile runs,
and what pnpm itself runs sees none of the host's secrets (the model key, the GitHub token)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo
from realenvs import node_toolchain

from docdelta.checkout import envs
from docdelta.config import SandboxConfig
from docdelta.errors import ConfigError
from docdelta.git import Repo

SECRET = "sk-ant-api03-planted-secret-for-the-install-test"
HOOKS = ("preinstall", "install", "postinstall", "prepare")


def _writer(path: Path) -> str:
    """A node one-liner writing the environment it sees to `path`."""
    return f"node -e \"require('fs').writeFileSync('{path}', JSON.stringify(process.env))\""


def _hostile_repo(tmp_path: Path, config: SandboxConfig, *, pnpmfile: bool) -> tuple[Repo, str, Path]:
    """A workspace whose every install hook writes the environment it sees into `marks`, with a
    lockfile pnpm made for it (so a frozen install of it is up to date, as an attacker's is)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    files = {
        "package.json": json.dumps(
            {"name": "ws", "private": True, "scripts": {h: _writer(marks / h) for h in HOOKS}}
        )
    }
    if pnpmfile:  # written where MARK says, so making the lockfile below records no mark
        files[envs.PNPMFILE] = (
            f"const mark = process.env.MARK || '{marks / 'pnpmfile'}';\n"
            "require('fs').writeFileSync(mark, JSON.stringify(process.env));\n"
            "module.exports = {hooks: {}};\n"
        )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for name, text in files.items():
        (scratch / name).write_text(text)
    env = {**envs.install_env(config), "MARK": str(tmp_path / "lock-mark")}
    pnpm = [
        str(Path(config.env["PATH"].split(":")[0]) / "pnpm"),
        "install",
        "--lockfile-only",
        "--ignore-scripts",
    ]
    subprocess.run(pnpm, cwd=scratch, env=env, check=True, capture_output=True)
    files["pnpm-lock.yaml"] = (scratch / "pnpm-lock.yaml").read_text()
    repo = GitRepo.init(tmp_path / "src")
    return Repo(repo.path), repo.commit(files), marks


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SandboxConfig:
    """The Node toolchain (cached) and a host environment holding secrets."""
    made = SandboxConfig.model_validate({**node_toolchain().sandbox(), "workspace": {"manager": "pnpm"}})
    monkeypatch.setenv(envs.ENV_CACHE, str(tmp_path / "envs"))  # after the toolchain, which stays cached
    for name in ("ANTHROPIC_API_KEY", "DOCDELTA_API_KEY", "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN"):
        monkeypatch.setenv(name, SECRET)
    return made


def test_a_pull_requests_install_scripts_never_run_on_the_host(tmp_path: Path, config: SandboxConfig) -> None:
    repo, sha, marks = _hostile_repo(tmp_path, config, pnpmfile=False)
    root = envs.install(repo, sha, config)
    assert root is not None and (root / envs.COMPLETE).is_file()  # the install itself went through
    assert sorted(p.name for p in marks.iterdir()) == []  # no hook of the PR's ran


def test_a_pull_requests_pnpmfile_is_refused_by_name_and_never_runs(
    tmp_path: Path, config: SandboxConfig
) -> None:
    repo, sha, marks = _hostile_repo(tmp_path, config, pnpmfile=True)
    with pytest.raises(ConfigError) as raised:
        envs.install(repo, sha, config)
    assert "sandbox.workspace" in raised.value.message and envs.PNPMFILE in raised.value.message
    assert sorted(p.name for p in marks.iterdir()) == []


def test_the_install_sees_no_secret_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "DOCDELTA_API_KEY", "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN"):
        monkeypatch.setenv(name, SECRET)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    config = SandboxConfig.model_validate(
        {"env": {"PATH": "/opt/node/bin:/usr/bin"}, "workspace": {"manager": "pnpm"}}
    )
    env = envs.install_env(config)
    assert SECRET not in json.dumps(env) and set(env) - {"PATH"} <= envs.PASSED_ENV
    assert env["PATH"] == "/opt/node/bin:/usr/bin"
    assert env["HTTPS_PROXY"] == "http://proxy.invalid:3128"  # a corporate proxy still reaches the registry
