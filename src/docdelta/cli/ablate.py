"""`docdelta ablate`: which sections of an instruction file move which tasks
(`docdelta.improve.ablation`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docdelta import validate
from docdelta.cli.options import (
    add_agent_options,
    add_band,
    at_least,
    plan_too_large,
    run_options,
)
from docdelta.errors import ExitCode
from docdelta.git import Repo


def add_parser(sub: Any) -> None:
    Unit, Design = validate.AblationUnit, validate.AblationDesign

    ab = sub.add_parser("ablate", help="which sections of an instruction file move which tasks")
    ab.add_argument("--repo", type=Path, default=Path())
    ab.add_argument("--ref", default="HEAD", help="the commit whose instruction files are ablated")
    ab.add_argument("--file", required=True, help="the instruction file to split, e.g. AGENTS.md")
    ab.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    ab.add_argument("--workdir", type=Path, required=True)
    ab.add_argument("--unit", choices=[u.value for u in Unit], default=Unit.heading.value)
    ab.add_argument(
        "--design",
        choices=[d.value for d in Design],
        default=Design.factorial.value,
        help="factorial (default): each condition removes about half the sections; single: one each",
    )
    ab.add_argument(
        "--repeats", type=at_least(1), default=4, help="runs per side one at a time would give (default 4)"
    )
    ab.add_argument("--seed", type=int, default=0)
    ab.add_argument("--yes", action="store_true", help="run a plan of more than 1,000 runs")
    add_band(ab)
    add_agent_options(ab)


def _ablate(args: argparse.Namespace) -> int:
    from docdelta.evaluation import Deps
    from docdelta.experiment.plan import PlanTooLarge
    from docdelta.improve.ablation import AblationRequest, Design, Unit, ablate
    from docdelta.improve.ablation import render as render_ablation
    from docdelta.results.layout import ABLATION_FILE

    request = AblationRequest(
        ref=args.ref,
        file=args.file,
        tasks_dir=args.tasks,
        unit=Unit(args.unit),
        design=Design(args.design),
        repeats=args.repeats,
        seed=args.seed,
        max_runs=None if args.yes else validate.MAX_RUNS_WITHOUT_CONFIRMATION,
    )
    options = run_options(args)
    try:
        report, done = ablate(request, options, Deps(repo=Repo(args.repo), workdir=args.workdir))
    except PlanTooLarge as exc:
        raise plan_too_large(exc, options) from None
    ran, reused = done.report.ran, done.report.reused
    if done.summary.broken:  # the runs measured the failure: no effects are shown
        print(f"docdelta: error: no ablation: {done.summary.broken}", file=sys.stderr)
        return ExitCode.INFRA
    print(render_ablation(report))
    print(f"results: {args.workdir / ABLATION_FILE} ({ran} ran, {reused} reused)", file=sys.stderr)
    if done.report.stopped:
        print(f"docdelta: matrix stopped early: {done.report.stopped}; rerun to resume", file=sys.stderr)
        return ExitCode.INCOMPLETE
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"ablate": _ablate}
