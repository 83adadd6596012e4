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
    from docdelta.config import ProjectConfig
    from docdelta.evaluation import Evaluation, RunOptions
    from docdelta.experiment.plan import ExperimentRequest
    from docdelta.results.models import Manifest, RunResult
    from docdelta.tasks.models import PassThreshold


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="run the matrix of tasks x conditions x repeats and print the scorecard")
    add_comparison(r, required=False)
    r.add_argument(
        "--repos",
        type=Path,
        metavar="FILE",
        help="evaluate each repository a YAML file lists (instead of --repo, --base, --head, --tasks), "
        "each in <workdir>/<name>, and pool their verdicts (docs/scale.md)",
    )
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


ONE_REPO_FLAGS = ("repo", "base", "head", "tasks", "config", "patch", "shard")
"""Flags that name or slice one repository's evaluation: `--repos` names each repository's in its file."""


def _run(args: argparse.Namespace) -> int:
    if args.repos is not None:
        return _run_suite(args)
    for flag in ("base", "head", "tasks"):
        if getattr(args, flag) is None:
            hint = "give --repo, --base, --head and --tasks, or --repos FILE"
            raise ConfigError(f"--{flag} is required", hint=hint)
    request = _request(args, args.base, args.head, args.tasks, args.source)
    repo = Repo(args.repo or Path())
    return execute(repo, request, run_options(args), args.workdir, args.history, args.config)


def _request(args: argparse.Namespace, base: str, head: str, tasks: Path, source: str) -> ExperimentRequest:
    """The request `run`'s flags make for one repository's comparison."""
    from docdelta.experiment.plan import ExperimentRequest, planned_repeats

    arms = args.arms or []
    repeats, adaptive = planned_repeats(args.repeats, args.max_repeats)
    return ExperimentRequest(
        base=base,
        head=head,
        tasks_dir=tasks,
        conditions=chosen_conditions(args),
        arms=arms,
        config_arms=True,
        require_change=not arms,
        repeats=repeats,
        adaptive=adaptive,
        seed=args.seed,
        source=source,
        patch=args.patch,
        allow_unreviewed=args.allow_unreviewed,
        max_runs=None if args.yes else validate.MAX_RUNS_WITHOUT_CONFIRMATION,
        pass_threshold=_pass_threshold(args),
        only_tasks=args.only_tasks,
    )


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

    project = None if config is None else load_config_file(config)
    done = _evaluated(repo, request, options, workdir, project)
    if done is None:
        print(NOTHING_CHANGED)
        return ExitCode.OK
    return _outcome(done, options, history)


NOTHING_CHANGED = "nothing to evaluate: no agent instruction file changed"


def _evaluated(
    repo: Repo, request: ExperimentRequest, options: RunOptions, workdir: Path, project: ProjectConfig | None
) -> Evaluation | None:
    from docdelta.evaluation import Deps, evaluate
    from docdelta.experiment.plan import PlanTooLarge

    try:
        return evaluate(request, options, Deps(repo=repo, workdir=workdir, config=project))
    except PlanTooLarge as exc:
        raise plan_too_large(exc, options) from None


def _outcome(done: Evaluation, options: RunOptions, history: Path | None) -> int:
    """Print an evaluation's scorecard and what became of its runs; record it in `history`
    when complete. The exit code: INCOMPLETE when the matrix stopped, INFRA when broken."""
    from docdelta.report import render_markdown
    from docdelta.scorecard.history import History, record_of

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
    if summary.saturated:
        print(f"docdelta: no verdict: {summary.saturated}", file=sys.stderr)
    return ExitCode.OK


def _run_suite(args: argparse.Namespace) -> int:
    """`run --repos FILE`: each repository's evaluation in `<workdir>/<name>`, one after the
    other with the same flags, then every verdict and the pooled one (`suite.json`). A matrix
    that stops early stops the suite (the next would hit the same cap or rate limit); the
    rerun resumes each repository where it stopped."""
    from docdelta.atomic import atomic_write
    from docdelta.report.render import render_suite_markdown, text
    from docdelta.results.layout import SUITE_FILE
    from docdelta.scorecard.models import SuiteRepoState, SuiteRepoSummary, SuiteSummary
    from docdelta.scorecard.summarize import pooled_verdict
    from docdelta.suite import REPOS_FLAG, load_suite

    given = [f for f in ONE_REPO_FLAGS if getattr(args, f) is not None]
    if args.source != HEAD:
        given.append("source")
    if given:
        flags = ", ".join(f"--{f}" for f in given)
        raise ConfigError(
            f"{REPOS_FLAG} names each repository, its refs and tasks in its file: {flags} cannot go with it",
            hint=f"set them per repository in {args.repos}, or drop {REPOS_FLAG}",
        )
    entries = load_suite(args.repos)
    options = run_options(args)
    rows: list[SuiteRepoSummary] = []
    parts: dict[str, tuple[Manifest, list[RunResult]]] = {}
    bands: list[float] = []
    code: int = ExitCode.OK
    for entry in entries:
        workdir = args.workdir / entry.name
        print(f"# {text(entry.name)}\n")
        request = _request(args, entry.base, entry.head, entry.tasks, entry.source)
        done = _evaluated(entry.repo, request, options, workdir, None)
        if done is None:
            print(NOTHING_CHANGED)
            state = SuiteRepoState.no_change
            rows.append(SuiteRepoSummary(name=entry.name, workdir=str(workdir), state=state))
            continue
        outcome = _outcome(done, options, args.history)
        if outcome == ExitCode.INCOMPLETE:
            return outcome
        code = max(code, outcome)
        s = done.summary
        refused = s.verdict_refused or (None if s.verdict else "no task has runs of both head and base")
        rows.append(
            SuiteRepoSummary(
                name=entry.name,
                workdir=str(workdir),
                state=SuiteRepoState.no_verdict if refused else SuiteRepoState.evaluated,
                verdict=None if s.verdict is None else s.verdict.kind,
                head_vs_base=s.head_vs_base.value,
                tasks=len(done.experiment.manifest.tasks),
                why=refused,
            )
        )
        if not refused:
            parts[entry.name] = (done.experiment.manifest, list(done.report.results))
            bands.append(s.noise_band)
    band = max(bands, default=0.0)
    suite = SuiteSummary(repos=rows, pooled=pooled_verdict(parts, alpha=options.alpha, band=band), band=band)
    print(render_suite_markdown(suite))
    args.workdir.mkdir(parents=True, exist_ok=True)
    atomic_write(args.workdir / SUITE_FILE, suite.model_dump_json(indent=2).encode())
    print(f"suite: {args.workdir / SUITE_FILE}", file=sys.stderr)
    return code


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"run": _run}
