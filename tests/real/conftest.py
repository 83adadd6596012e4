"""Real repositories from git bundles (`DOCDELTA_REAL_REPOS`: the directory holding
`minijinja.bundle`, `genai-prices.bundle`, `logfire-js.bundle`).

Without the bundles these tests skip, but they FAIL when DOCDELTA_REQUIRE_REAL=1 or
DOCDELTA_REQUIRE_DOCKER=1 (CI sets both): a missing bundle must not turn them green."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

BUNDLES = ("minijinja", "genai-prices", "logfire-js")


def _missing(why: str) -> None:
    required = (
        os.environ.get("DOCDELTA_REQUIRE_REAL") == "1" or os.environ.get("DOCDELTA_REQUIRE_DOCKER") == "1"
    )
    if required:
        pytest.fail(f"real-repository tests are required here, but {why}", pytrace=False)
    pytest.skip(why)


def bundle(name: str) -> Path:
    """The bundle of `name`, or skip/fail saying why it is not there."""
    where = os.environ.get("DOCDELTA_REAL_REPOS")
    if not where:
        _missing("DOCDELTA_REAL_REPOS is not set (point it at the directory of the .bundle files)")
    path = Path(str(where)) / f"{name}.bundle"
    if not path.is_file():
        _missing(f"{path} does not exist")
    return path


@pytest.fixture(scope="session")
def real_repo(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`real_repo("minijinja")` -> a fresh clone of that bundle (once per session)."""
    clones: dict[str, Path] = {}

    def clone(name: str) -> Path:
        if name not in clones:
            dest = tmp_path_factory.mktemp("real") / name
            subprocess.run(["git", "clone", "-q", str(bundle(name)), str(dest)], check=True, env=_git_env())
            clones[name] = dest
        return clones[name]

    return clone


def _git_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
