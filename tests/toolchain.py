"""Names the tests share, in a plain module: several folders have a `conftest.py`, and
which one `import conftest` finds depends on what pytest collected first."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import yaml

CheckoutFactory = Callable[..., Path]
"""The `tmp_checkout` fixture's type: files committed once in a git repo -> its path."""

PYTHON_TOOLCHAIN: tuple[str, ...] = tuple(sorted({sys.prefix, sys.base_prefix}))
"""This interpreter's venv and installation. The sandbox shows nothing of the host that is
not named, so tests whose sandboxed commands run `sys.executable` (pytest for hidden tests)
name these read-only, as a project names its toolchain in `.docdelta.yml`."""

MAKE_CHECK_TASK = """\
id: test-cmd
prompt: How do I run the tests?
gold:
  commands: ["make check"]
reviewed: true
"""
"""The task file of the tests that run a command agent end to end: one question whose gold
answer is `make check`."""


def sandbox_config(*paths: Path) -> str:
    """`.docdelta.yml` text showing the sandbox this interpreter plus `paths`, read-only."""
    return yaml.safe_dump({"sandbox": {"paths": [*PYTHON_TOOLCHAIN, *map(str, paths)]}})
