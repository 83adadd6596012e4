"""`docdelta action`: the GitHub Action's entry point (`docdelta.action.main`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_parser(sub: Any) -> None:
    sub.add_parser("action", help="the GitHub Action entry point (reads INPUT_* and GITHUB_* variables)")


def _action(args: argparse.Namespace) -> int:
    from docdelta.action import main  # PyGithub only for the Action

    return main.main()


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"action": _action}
