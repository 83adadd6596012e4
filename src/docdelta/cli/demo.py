"""`docdelta demo`: the bundled example with the fake agent (no key, no Docker), run as `run` runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docdelta.cli.options import (
    at_least,
)
from docdelta.cli.run import execute
from docdelta.git import Repo


def add_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="run the bundled example with the fake agent (no key, no Docker)")
    demo.add_argument("--workdir", type=Path, default=Path("docdelta-demo"))
    demo.add_argument("--repeats", type=at_least(1), default=5)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--sandbox", default="local", choices=("local", "docker"), help="default: local")


def _demo(args: argparse.Namespace) -> int:
    from docdelta.demo import build_demo_repo
    from docdelta.evaluation import RunOptions
    from docdelta.experiment.plan import ExperimentRequest

    demo = build_demo_repo(args.workdir / "pricebook")
    request = ExperimentRequest(
        base=demo.base_sha,
        head=demo.head_sha,
        tasks_dir=demo.path / ".docdelta" / "tasks",
        repeats=args.repeats,
        seed=args.seed,
    )
    options = RunOptions(agent="fake", sandbox=args.sandbox, timeout_s=60.0)
    return execute(Repo(demo.path), request, options, args.workdir / "results")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"demo": _demo}
