"""`docdelta run`: flags -> `ExperimentRequest` and `RunOptions` -> the composition root
(`docdelta.evaluation.evaluate`), exactly as the Action does with its inputs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docdelta import validate
from docdelta.cli.options import (
    add_agent_options,
    add_band,
    add_comparison,
    arg,
    at_least,
    chosen_conditions,
    parse_arm_specs,
    plan_too_large,
    run_options,
)
from docdelta.errors import ConfigError, ExitCode
from docdelta.git import Repo
from docdelta.validate import AUTO, DEFAULT_MAX_REPEATS
from docdelta.vocabulary import HEAD

if TYPE_CHECKING:
    from docdelta.evaluation import RunOptions
    from docdelta.experiment.plan import ExperimentRequest
    from docdelta.tasks.models import PassThreshold


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="run the matrix of tasks x conditions x repeats and print the scorecard")
    add_comparison(r)
    r.add_argument("--workdir", type=Path, required=True)
    r.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a .docdelta.yml to use instead of the base commit's (e.g. to evaluate a past PR)",
    )
    _add_run_options(r, history=True)


def _add_run_options(r: argparse.ArgumentParser, *, history: bool = False) -> None:
    if history:
        r.add_argument(
            "--history",
            type=Path,
            metavar="DIR",
            help="record the finished evaluation in DIR (records/) and its head files' receipts (receipts/)",
        )
    r.add_argument(
        "--conditions",
        type=arg(validate.condition_list),
        help="comma-separated (default base,head,none; with --arms: only the arms unless given)",
    )
    r.add_argument(
        "--arms",
        type=arg(parse_arm_specs),
        help="arms that vary the agent, model or context: NAME:field=value,...;NAME:... with fields "
        "condition, agent, agent_cmd, model, overlay (a directory laid over the checkout), vs "
        "(e.g. small:model=s;large:model=l); default: .docdelta.yml's arms, added to the conditions",
    )
    r.add_argument("--patch", type=Path, help="unified diff applied to head's instruction files (patched)")
    r.add_argument(
        "--repeats",
        type=arg(validate.repeats),
        default=AUTO,
        help="runs per arm and task, or auto (rounds until decided, up to --max-repeats; the default)",
    )
    r.add_argument(
        "--max-repeats",
        type=at_least(2),
        default=DEFAULT_MAX_REPEATS,
        help="the cap of --repeats auto (default: %(default)s)",
    )
    r.add_argument("--seed", type=int, default=0)
    add_band(r)
    r.add_argument(
        "--yes",
        action="store_true",
        help=f"run a plan of more than {validate.MAX_RUNS_WITHOUT_CONFIRMATION:,} runs "
        "(tasks x conditions x repeats)",
    )
    r.add_argument("--source", default=HEAD, help="source commit: head, base or a SHA (default head)")
    r.add_argument(
        "--task",
        action="append",
        dest="only_tasks",
        metavar="ID",
        default=[],
        help="run only the task with this id (repeatable), while iterating; default: every task",
    )
    r.add_argument(
        "--pass-threshold",
        type=arg(validate.fraction),
        help="share of a task's head runs that must score 1.0 (e.g. 0.8) for tasks that set no "
        "pass_threshold; reported per arm, and a miss where base met it is flagged (default: none)",
    )
    r.add_argument(
        "--pass-k",
        type=at_least(1),
        default=1,
        help="with --pass-threshold: judge pass^k (the chance k runs all pass), not the pass rate",
    )
    add_agent_options(r)


def _run(args: argparse.Namespace) -> int:
    from docdelta.experiment.plan import ExperimentRequest, planned_repeats

    arms = args.arms or []
    repeats, adaptive = planned_repeats(args.repeats, args.max_repeats)
    conditions = chosen_conditions(args)
    request = ExperimentRequest(
        base=args.base,
        head=args.head,
        tasks_dir=args.tasks,
        conditions=conditions,
        arms=arms,
        config_arms=True,
        require_change=not arms,
        repeats=repeats,
        adaptive=adaptive,
        seed=args.seed,
        source=args.source,
        patch=args.patch,
        allow_unreviewed=args.allow_unreviewed,
        max_runs=None if args.yes else validate.MAX_RUNS_WITHOUT_CONFIRMATION,
        pass_threshold=_pass_threshold(args),
        only_tasks=args.only_tasks,
    )
    return execute(Repo(args.repo), request, run_options(args), args.workdir, args.history, args.config)


def _pass_threshold(args: argparse.Namespace) -> PassThreshold | None:
    """`--pass-threshold` / `--pass-k` as the default bar (`docdelta.scorecard.thresholds`)."""
    from docdelta.tasks.models import PassThreshold

    if args.pass_threshold is None:
        if args.pass_k != 1:
            raise ConfigError("--pass-k needs --pass-threshold", hint="e.g. --pass-threshold 0.8 --pass-k 3")
        return None
    return PassThreshold(fraction=args.pass_threshold, k=args.pass_k)


def execute(
    repo: Repo,
    request: ExperimentRequest,
    options: RunOptions,
    workdir: Path,
    history: Path | None = None,
    config: Path | None = None,
) -> int:
    """Run the composition root, print the scorecard, and record a complete evaluation."""
    from docdelta.config import load_config_file
    from docdelta.evaluation import Deps, evaluate
    from docdelta.experiment.plan import PlanTooLarge
    from docdelta.report import render_markdown
    from docdelta.scorecard.history import History, record_of

    try:
        project = None if config is None else load_config_file(config)
        done = evaluate(request, options, Deps(repo=repo, workdir=workdir, config=project))
    except PlanTooLarge as exc:
        raise plan_too_large(exc, options) from None
    if done is None:
        print("nothing to evaluate: no agent instruction file changed")
        return ExitCode.OK
    report, summary = done.report, done.summary
    if options.shard is None:
        print(render_markdown(summary))
    else:
        print(
            f"shard {options.shard}: {report.ran + report.reused} cells done; "
            f"combine the shards' workdirs with `docdelta merge DIR... --workdir OUT`, then `docdelta report`"
        )
    for kept in done.store.set_aside:
        print(f"docdelta: {kept.parent / 'result.json'} was unreadable: kept as {kept.name}, cell rerun",
              file=sys.stderr)  # fmt: skip
    print(f"results: {done.store.workdir} ({report.ran} ran, {report.reused} reused)", file=sys.stderr)
    if report.stopped:
        print(f"docdelta: matrix stopped early: {report.stopped}; rerun to resume", file=sys.stderr)
        return ExitCode.INCOMPLETE
    if history is not None and options.shard is None:
        added = History.at(history).append(record_of(done.experiment.manifest, summary))
        state = "recorded" if added else "already recorded"
        print(f"history: {history} ({state})", file=sys.stderr)
    if summary.broken:
        print(f"docdelta: error: no verdict: {summary.broken}", file=sys.stderr)
        return ExitCode.INFRA
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"run": _run}
