"""`docdelta plan` and `docdelta merge`: one evaluation spread over GitHub Actions matrix jobs
(`docdelta.experiment.shard`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docdelta import validate
from docdelta.cli.options import (
    add_comparison,
    arg,
    at_least,
    chosen_conditions,
    parse_arm_specs,
)
from docdelta.errors import ExitCode
from docdelta.git import Repo
from docdelta.instructions.detect import detect_refs
from docdelta.validate import DEFAULT_MAX_PARALLEL


def add_parser(sub: Any) -> None:
    pl = sub.add_parser("plan", help="write the GitHub Actions job matrix (JSON) for `run --shard I/N` jobs")
    add_comparison(pl)
    pl.add_argument("--conditions", type=arg(validate.condition_list), help="as `run`'s")
    pl.add_argument("--arms", type=arg(parse_arm_specs), help="as `run`'s")
    pl.add_argument("--repeats", type=at_least(1), default=3)
    pl.add_argument(
        "--max-parallel",
        type=at_least(1),
        default=DEFAULT_MAX_PARALLEL,
        help=f"jobs GitHub runs at once (strategy.max-parallel; default {DEFAULT_MAX_PARALLEL})",
    )
    pl.add_argument(
        "--cells-per-job", type=at_least(1), help="batch size (default: spread over max-parallel)"
    )

    mg = sub.add_parser("merge", help="combine the workdirs of `run --shard` jobs into one workdir")
    mg.add_argument("shards", nargs="+", type=Path, metavar="DIR", help="each shard's workdir")
    mg.add_argument("--workdir", type=Path, required=True, help="the merged workdir (report, badge read it)")


def _plan(args: argparse.Namespace) -> int:
    """The job matrix of one evaluation, as one JSON line for `$GITHUB_OUTPUT`."""
    from docdelta.config import load_project_config, matcher
    from docdelta.experiment.plan import plan_size
    from docdelta.experiment.shard import plan_matrix
    from docdelta.tasks.load import load_tasks

    repo = Repo(args.repo)
    base = repo.resolve(args.base)
    config = load_project_config(repo, base)
    detection = detect_refs(repo, base, repo.resolve(args.head), matcher(config))
    columns = len(chosen_conditions(args)) + len(args.arms or config.arms)  # as `run` plans them
    cells = 0 if detection.empty else plan_size(len(load_tasks(args.tasks)), columns, args.repeats)
    plan = plan_matrix(cells, max_parallel=args.max_parallel, cells_per_job=args.cells_per_job)
    print(plan.model_dump_json())
    what = f"{plan.cells} runs in {plan.jobs} jobs of up to {plan.cells_per_job}" if plan.evaluate else (
        "no agent instruction file changed: nothing to run"
    )  # fmt: skip
    print(f"docdelta plan: {what}", file=sys.stderr)
    return ExitCode.OK


def _merge(args: argparse.Namespace) -> int:
    from docdelta.experiment.shard import merge_workdirs

    merged = merge_workdirs(args.shards, args.workdir)
    planned = len(merged.manifest.order)
    print(f"merged {merged.shards} shard workdirs into {args.workdir}: {merged.complete} of {planned} runs")
    if merged.missing:
        shown = ", ".join(c.key for c in merged.missing[:5]) + (", ..." if len(merged.missing) > 5 else "")
        print(
            f"docdelta: {len(merged.missing)} planned runs have no result ({shown}): a shard is missing "
            "or stopped early; its job's rerun resumes it",
            file=sys.stderr,
        )
        return ExitCode.INCOMPLETE
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"plan": _plan, "merge": _merge}
