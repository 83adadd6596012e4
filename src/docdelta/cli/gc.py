"""`docdelta gc`: remove the Docker leftovers of runs whose docdelta process is gone."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from docdelta.errors import ExitCode


def add_parser(sub: Any) -> None:
    g = sub.add_parser(
        "gc", help="remove Docker containers, networks and volumes of runs whose docdelta process is gone"
    )
    g.add_argument("--dry-run", action="store_true", help="only list what would be removed")


def _gc(args: argparse.Namespace) -> int:
    """Live runs and other hosts' runs are never touched, so this needs no confirmation."""
    from docdelta.sandbox import docker as docker_sandbox  # Docker only when asked
    from docdelta.wiring import docker_engine

    names = docker_sandbox.gc(docker_engine(), dry_run=args.dry_run)
    for name in names:
        print(name)
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {len(names)} container(s), network(s) and volume(s) of finished docdelta processes")
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"gc": _gc}
