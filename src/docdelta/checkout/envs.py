"""Workspace environments (`.docdelta.yml` `sandbox.workspace`): a project's dependencies,
installed once per lockfile hash and shown in every checkout.

A pnpm monorepo's tests resolve packages from `node_modules` beside the importing file, so the
dependencies must appear inside the checkout; installing them per run would take minutes and
need the network the sandbox does not have. So the install happens once, on the host, from the
source commit (`git archive`, never an agent's tree), into a directory named by the hash of
everything it depends on (the lock, the workspace file, every package.json, the filter, the
manager's version, INSTALL_RECIPE) under `cache_root()`; an interrupted build is never used (a
`.complete` marker, a lock per name). Every sandbox shows that directory read-only at the same
path.

The source commit is usually the pull request's head, so its tree is hostile: lifecycle scripts
(its own and its dependencies') and a `.pnpmfile.cjs` are code the PR chose, and they would run
on the host beside the key. So the install runs none of them (`--ignore-scripts`,
`--ignore-pnpmfile`) and sees only `install_env`: the toolchain's PATH, the locale, the proxy
and CA settings a registry behind a corporate proxy needs, and `sandbox.env` from the trusted
config, never the host's secrets. A workspace that needs a build step gets it in the task's own
command, inside the sandbox.

Each sealed checkout then gets, for every `node_modules` of the install, a real directory of
links into it (`links`): real, so a tool may write beside the links (Vite's `.vite-temp`);
links, so nothing is copied and nothing an agent does reaches the install. A workspace package's
own link (`../../packages/x`) stays relative, so it is the checkout's package, with the agent's
edits. The links are part of the seal (its key and tree hash), so a checkout is rebuilt when the
install changes, and the grader's copy holds the sealed links, never the agent's
(`grading/hidden.py` drops every edit under `node_modules`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath

from docdelta.config import SandboxConfig, WorkspaceConfig
from docdelta.errors import ConfigError
from docdelta.git import Repo

INSTALL_RECIPE = "v2 ignore-scripts ignore-pnpmfile"
"""Part of every install's hash: an install made by an earlier recipe (v1 ran scripts) is
never reused."""
PASSED_ENV = frozenset(
    {"HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS"}
    | {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}
)
"""The host variables an install sees (besides PATH and `sandbox.env`): what reaching a
registry needs, nothing that could hold a secret."""
PNPMFILE = ".pnpmfile.cjs"
LOCK_FILES = {"pnpm": ("pnpm-lock.yaml", "pnpm-workspace.yaml", ".npmrc", PNPMFILE)}
"""The files besides every package.json that decide what an install holds, per manager."""
COMPLETE = ".complete"
MODULES = "node_modules"
ENV_CACHE = "DOCDELTA_REAL_ENVS"
"""Overrides where environments are built (shared with tests/realenvs.py's own)."""


def cache_root() -> Path:
    """Where environments are built. As root not under `$HOME`: the sandboxes show them at the
    same path, and a container's `/root` (0700) hides anything bind-mounted below it."""
    home = Path.home() / ".cache" / "docdelta" / "real-envs"
    default = Path("/var/cache/docdelta/real-envs") if os.geteuid() == 0 else home
    return Path(os.environ.get(ENV_CACHE, default))


def toolchain_paths(config: SandboxConfig) -> list[Path]:
    """The read-only paths a workspace needs in the sandbox beyond `sandbox.paths`."""
    return [cache_root()] if config.workspace is not None else []


SANDBOX_ENV = {
    "pnpm": {"pnpm_config_verify_deps_before_run": "false", "npm_config_verify_deps_before_run": "false"}
}
"""Set in the sandbox for each manager (`sandbox.env` wins): the install is sealed, so pnpm's
`exec`/`run` must not check it and start `pnpm install`, which offline can only fail
(pnpm 11 reads the `pnpm_config_` spelling, earlier ones the `npm_config_`)."""


def sandbox_env(config: SandboxConfig) -> dict[str, str]:
    """`sandbox.env` plus what the workspace's manager needs in the sandbox (SANDBOX_ENV)."""
    extra = SANDBOX_ENV[config.workspace.manager.value] if config.workspace is not None else {}
    return {**extra, **config.env}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _search_path(config: SandboxConfig) -> str:
    return config.env.get("PATH") or os.environ.get("PATH", os.defpath)


def _manager(config: SandboxConfig, workspace: WorkspaceConfig) -> tuple[str, str]:
    """(the manager's executable on the sandbox's PATH, its version)."""
    name = workspace.manager.value
    exe = shutil.which(name, path=_search_path(config))
    if exe is None:
        raise ConfigError(
            f".docdelta.yml: field 'sandbox.workspace.manager' is {name}, but no {name} is on "
            f"sandbox.env.PATH ({_search_path(config)})",
            hint=f"name the directory holding {name} (and its runtime) in sandbox.paths and put it "
            "on sandbox.env.PATH",
        )
    version = _run([exe, "--version"], install_env(config), None, what=f"{name} --version")
    return exe, version.strip()


def install_env(config: SandboxConfig) -> dict[str, str]:
    """The environment of the manager's install: PASSED_ENV from the host, then `sandbox.env`."""
    passed = {k: v for k, v in os.environ.items() if k in PASSED_ENV}
    return {**passed, **config.env, "PATH": _search_path(config)}


def _run(argv: list[str], env: Mapping[str, str], cwd: Path | None, *, what: str) -> str:
    proc = subprocess.run(argv, check=False, env=dict(env), cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + "\n" + proc.stderr).strip().splitlines()[-15:])
        raise ConfigError(
            f"{what} failed (exit {proc.returncode}) while installing the workspace "
            f"(.docdelta.yml sandbox.workspace); last lines of output:\n{tail}",
            hint="run the same install in a clean clone of the source commit and fix what it says",
        )
    return proc.stdout


def install(repo: Repo, sha: str, config: SandboxConfig) -> Path | None:
    """The workspace install for commit `sha` (built now unless one of its hash exists): the
    directory holding the installed tree (`<root>/tree`), or None without `sandbox.workspace`."""
    workspace = config.workspace
    if workspace is None:
        return None
    exe, version = _manager(config, workspace)
    wanted = LOCK_FILES[workspace.manager.value]
    inputs = sorted(
        f"{e.path}:{e.oid}"
        for e in repo.tree(sha)
        if e.is_blob and (e.path in wanted or PurePosixPath(e.path).name == "package.json")
    )
    if any(i.startswith(f"{PNPMFILE}:") for i in inputs):
        raise ConfigError(
            f".docdelta.yml: field 'sandbox.workspace' installs commit {sha[:12]}, which has a "
            f"{PNPMFILE}: that is code the commit chose, and the install runs on the host beside "
            "the key, so docdelta never runs it",
            hint=f"evaluate on a source commit without {PNPMFILE}, or drop sandbox.workspace and "
            "install the dependencies in the task's command, inside the sandbox",
        )
    parts = [INSTALL_RECIPE, workspace.manager.value, version, *workspace.filter, "\0", *inputs]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    root = cache_root() / f"{workspace.manager.value}-{digest}"
    if (root / COMPLETE).is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent / f".{root.name}.lock"):
        if not (root / COMPLETE).is_file():
            shutil.rmtree(root, ignore_errors=True)
            _build(repo, sha, root, exe, config, workspace)
    return root


def _build(repo: Repo, sha: str, root: Path, exe: str, config: SandboxConfig, ws: WorkspaceConfig) -> None:
    """pnpm writes absolute paths into its bin shims, so it installs at the final path."""
    tree = root / "tree"
    tree.mkdir(parents=True)
    root.chmod(0o755)
    archive = subprocess.run(["git", "archive", sha], cwd=repo.root, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    store = str(root.parent / f"{ws.manager.value}-store")
    env = {**install_env(config), "npm_config_store_dir": store, "pnpm_config_store_dir": store}
    # append-only, not silent: a refused install's cause (a lock out of date) must reach the error
    argv = [exe, "install", "--frozen-lockfile", "--ignore-scripts", "--ignore-pnpmfile"]
    argv += ["--reporter", "append-only"]
    for selector in ws.filter:
        argv += ["--filter", selector]
    _run(argv, env, tree, what=" ".join(argv[:3]))
    (root / COMPLETE).write_text("")


def links(root: Path | None) -> dict[str, str]:
    """Checkout path -> link target for every entry of every `node_modules` of the install at
    `root` (see the module docstring); {} without one."""
    if root is None:
        return {}
    tree = root / "tree"
    found: dict[str, str] = {}
    for where, dirs, _files in os.walk(tree):
        here = Path(where)
        if MODULES in dirs:
            _farm(tree, here / MODULES, found)
        dirs[:] = [d for d in dirs if d not in (MODULES, ".git")]
    return found


def _farm(tree: Path, modules: Path, found: dict[str, str]) -> None:
    for entry in sorted(modules.iterdir()):
        rel = entry.relative_to(tree).as_posix()
        if entry.name.startswith("@") and entry.is_dir() and not entry.is_symlink():
            _farm(tree, entry, found)  # a scope: a real directory of links in pnpm's layout
            continue
        target = os.readlink(entry) if entry.is_symlink() else None
        if target is not None and not os.path.isabs(target):
            resolved = PurePosixPath(os.path.normpath(entry.parent / target))
            inside = resolved.is_relative_to(tree)
            if inside and MODULES not in resolved.relative_to(tree).parts:
                found[rel] = target  # a workspace package: the checkout's own, as the agent left it
                continue
        found[rel] = str(entry)
