"""`docdelta prepare` and `docdelta check`: trials for an agent docdelta does not drive
(`docdelta.experiment.external`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docdelta import validate
from docdelta.cli.options import (
    add_comparison,
    arg,
    at_least,
)
from docdelta.errors import ExitCode
from docdelta.git import Repo
from docdelta.vocabulary import DEFAULT_CONDITIONS, HEAD


def add_parser(sub: Any) -> None:
    pr = sub.add_parser("prepare", help="write the trials for an agent docdelta does not drive")
    add_comparison(pr)
    pr.add_argument("--workdir", type=Path, required=True)
    pr.add_argument("--conditions", type=arg(validate.condition_list), default=list(DEFAULT_CONDITIONS))
    pr.add_argument("--patch", type=Path, help="unified diff applied to head's instruction files (patched)")
    pr.add_argument("--repeats", type=at_least(1), default=3)
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--source", default=HEAD, help="source commit: head, base or a SHA (default head)")
    pr.add_argument("--allow-unreviewed", action="store_true")
    pr.add_argument("--agent-name", default="unnamed", help="what drives the trials, for the manifest")
    pr.add_argument("--agent-version", default="", help="its version, for the manifest")
    pr.add_argument("--model", help="the model it uses, for the manifest")
    ck = sub.add_parser("check", help="grade trials `prepare` wrote, once their controller has run them")
    ck.add_argument("trials", nargs="+", type=Path, metavar="TRIAL", help="trial directories")
    ck.add_argument("--tasks", type=Path, required=True, help="the task files given to `prepare`")


def _prepare(args: argparse.Namespace) -> int:
    from docdelta.experiment.external import TRIALS_DIR, ExternalAgent, prepare_trials
    from docdelta.experiment.plan import ExperimentRequest
    from docdelta.results.layout import ANSWER_FILE, PROMPT_FILE, STATUS_FILE, TRIAL_FILE

    request = ExperimentRequest(
        base=args.base,
        head=args.head,
        tasks_dir=args.tasks,
        conditions=args.conditions,
        repeats=args.repeats,
        seed=args.seed,
        source=args.source,
        patch=args.patch,
        allow_unreviewed=args.allow_unreviewed,
    )
    agent = ExternalAgent(args.agent_name, args.agent_version, args.model)
    trials = prepare_trials(Repo(args.repo), request, args.workdir, agent)
    where = args.workdir / TRIALS_DIR
    print(f"prepared {len(trials)} trials in {where}: each has {PROMPT_FILE}, checkout/ and {TRIAL_FILE}")
    print(f"run the agent in each checkout, write {ANSWER_FILE} and {STATUS_FILE}, then: "
          f"docdelta check {where}/* --tasks {args.tasks}")  # fmt: skip
    return ExitCode.OK


def _check(args: argparse.Namespace) -> int:
    from docdelta.experiment.external import check_trial

    for trial in args.trials:
        result, fresh = check_trial(trial, args.tasks)
        score = "—" if result.score is None else f"{result.score.value:.2f}"
        print(f"{trial.name}: {result.status.value}, score {score}{'' if fresh else ' (checked before)'}")
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"prepare": _prepare, "check": _check}
