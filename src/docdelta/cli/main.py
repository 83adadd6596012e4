"""Command line: parse arguments, build the real dependencies, map errors to exit codes.

`run` and `demo` parse their flags into `RunOptions` and call the composition root
(`docdelta.evaluation.evaluate`), exactly as the Action does with its inputs. Exit codes
are `errors.ExitCode`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from docdelta import __version__, validate
from docdelta.errors import ConfigError, DocdeltaError, DraftRefused, ExitCode, Terminated
from docdelta.git import Repo
from docdelta.instructions.detect import InstructionMatcher, detect_diff, detect_refs
from docdelta.instructions.models import NearMiss
from docdelta.sandbox import provider_names
from docdelta.text import listing
from docdelta.validate import AUTO, DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_PARALLEL, DEFAULT_MAX_REPEATS
from docdelta.vocabulary import CONFIG_PATH, DEFAULT_CONDITIONS, DEFAULT_NOISE_BAND, HEAD

if TYPE_CHECKING:
    from docdelta.config import ArmSpec
    from docdelta.evaluation import RunOptions
    from docdelta.experiment.plan import ExperimentRequest
    from docdelta.improve.suggest import Suggestion
    from docdelta.results.models import Manifest, RunResult
    from docdelta.results.store import ResultStore
    from docdelta.scorecard.history import History
    from docdelta.scorecard.models import Summary
    from docdelta.tasks.models import PassThreshold, Task

# Each command imports what only it needs inside its handler (hence the PLC0415 per-file
# ignore in pyproject.toml): scipy, the Docker SDK, PyGithub and httpx cost seconds to
# import, and `detect`, which needs none of them, must start in well under a second
# (issue 12; the test is tests/unit/test_cli_imports.py, the figure bench/bench_detect.py).
# That includes docdelta's own pydantic models: the class statements of each package's models and
# docdelta.config (with the gateway's) were a third of detect's start-up.

T = TypeVar("T")


def _arg(check: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a `docdelta.validate` function: its message becomes the usage
    error, which argparse prefixes with the flag's name (exit 2)."""

    def parse(value: str) -> T:
        try:
            return check(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _at_least(low: int) -> Callable[[str], int]:
    return _arg(partial(validate.whole_at_least, low))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="docdelta",
        description="Test edits to agent instruction files (AGENTS.md, CLAUDE.md, ...) like code.",
    )
    p.add_argument("--version", action="version", version=f"docdelta {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser(
        "detect", help="list the agent instruction files changed between two refs, or in a unified diff"
    )
    d.add_argument("--repo", type=Path, default=Path())
    d.add_argument("--base", help="base ref (with --head)")
    d.add_argument("--head", help="head ref (with --base)")
    d.add_argument(
        "--diff",
        type=argparse.FileType("rb"),
        help="a unified diff ('-' for stdin) instead of two refs; the built-in file table is used",
    )
    d.add_argument("--json", action="store_true", help="print the detection as JSON")

    r = sub.add_parser("run", help="run the matrix of tasks x conditions x repeats and print the scorecard")
    r.add_argument("--repo", type=Path, default=Path())
    r.add_argument("--base", required=True)
    r.add_argument("--head", required=True)
    r.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    r.add_argument("--workdir", type=Path, required=True)
    r.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a .docdelta.yml to use instead of the base commit's (e.g. to evaluate a past PR)",
    )
    _add_run_options(r, history=True)

    _add_workdir_commands(sub)
    _add_loop_commands(sub)

    demo = sub.add_parser("demo", help="run the bundled example with the fake agent (no key, no Docker)")
    demo.add_argument("--workdir", type=Path, default=Path("docdelta-demo"))
    demo.add_argument("--repeats", type=_at_least(1), default=5)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--sandbox", default="local", choices=("local", "docker"), help="default: local")

    _add_tasks_commands(sub)

    st = sub.add_parser("selftest", help="prove each change task's hidden tests tell right from wrong")
    st.add_argument("--repo", type=Path, default=Path())
    st.add_argument("--tasks", type=Path, required=True)
    st.add_argument("--source", default="HEAD", help="source commit for tasks that do not name one")
    st.add_argument("--flake-runs", type=int, default=3, help="runs of the reference (flake probe)")
    st.add_argument("--workdir", type=Path, help="scratch directory (default: a temporary one)")
    st.add_argument(
        "--sandbox",
        default="local",
        choices=("local", "docker"),
        help="where the hidden tests run, with .docdelta.yml's environment as in a run; default: local",
    )
    st.add_argument(
        "--agent",
        default="fake",
        help="with --sandbox docker: grade in the image a run of this agent uses (its npm layer "
        "included); default: fake",
    )

    jd = sub.add_parser("judge", help="rule on key points with a calibrated LLM judge (writes judged.json)")
    jd.add_argument("--workdir", type=Path, required=True)
    _add_judge_options(jd)
    cal = sub.add_parser("calibrate", help="measure a judge on each rubric's labeled pass/fail fixtures")
    cal.add_argument(
        "--fixtures", type=Path, help="labeled fixtures, <task id>.yaml (default: .docdelta/rubrics)"
    )
    _add_judge_options(cal)

    g = sub.add_parser(
        "gc", help="remove Docker containers, networks and volumes of runs whose docdelta process is gone"
    )
    g.add_argument("--dry-run", action="store_true", help="only list what would be removed")

    _add_agent_check_command(sub)
    _add_init_command(sub)

    s = sub.add_parser("schema", help="print a JSON Schema, for editors")
    s.add_argument("what", choices=("task", "answer"), help="task: task files; answer: an agent's final JSON")

    sub.add_parser("action", help="the GitHub Action entry point (reads INPUT_* and GITHUB_* variables)")
    return p


def _add_tasks_commands(sub: Any) -> None:
    """`tasks from-commit` (draft a change task), `tasks draft` (answer tasks from the rules of
    instruction files) and `tasks audit` (what the suite measures)."""
    t = sub.add_parser("tasks", help="work with task files")
    tsub = t.add_subparsers(dest="tasks_command", required=True)
    fc = tsub.add_parser("from-commit", help="draft a change task from a past commit that changed tests")
    fc.add_argument("sha")
    fc.add_argument("--repo", type=Path, default=Path())
    fc.add_argument("--tasks", type=Path, default=Path(".docdelta/tasks"), help="where to write the task")
    dr = tsub.add_parser(
        "draft", help="draft answer tasks (`reviewed: false`) from the concrete rules of instruction files"
    )
    dr.add_argument("--repo", type=Path, default=Path())
    dr.add_argument("--ref", default="HEAD", help="the commit whose files are read (default HEAD)")
    dr.add_argument(
        "--from",
        dest="sources",
        action="append",
        required=True,
        metavar="FILE",
        help="e.g. AGENTS.md (repeatable)",
    )
    dr.add_argument("--out", type=Path, default=Path(".docdelta/tasks"), help="where to write the drafts")
    au = tsub.add_parser(
        "audit", help="label each task target/control/unattainable from where its gold stands; find leaks"
    )
    au.add_argument("--repo", type=Path, default=Path())
    au.add_argument("--ref", default="HEAD", help="the source commit whose tree is searched (default HEAD)")
    au.add_argument("--tasks", type=Path, default=Path(".docdelta/tasks"))
    au.add_argument(
        "--results",
        type=Path,
        action="append",
        default=[],
        metavar="WORKDIR",
        help="a past run's workdir (repeatable): tasks saturated in every arm are candidates to drop",
    )
    au.add_argument("--json", action="store_true", help="print the audit as JSON")


def _add_init_command(sub: Any) -> None:
    ini = sub.add_parser(
        "init", help="adopt docdelta: write .docdelta.yml, the workflow and drafted tasks; print what to run"
    )
    ini.add_argument("--repo", type=Path, default=Path())
    ini.add_argument("--ref", default="HEAD", help="the commit whose instruction files are drafted from")


def _init(args: argparse.Namespace) -> int:
    from docdelta.improve.project_init import init_project, next_commands

    repo = Repo(args.repo)
    result = init_project(repo, args.ref)
    for path in result.written:
        print(f"wrote     {path.relative_to(repo.root)}")
    for path in result.kept:
        print(f"kept      {path.relative_to(repo.root)} (exists; not overwritten)")
    drafted = len(result.drafts.drafts) if result.drafts else 0
    print(
        f"drafted {drafted} task(s) from {', '.join(result.sources)}: "
        "each is `reviewed: false` until you check it"
    )
    print("next:")
    for n, command in enumerate(next_commands(repo, result), 1):
        print(f"  {n}. {command}")
    return ExitCode.OK


def _add_agent_check_command(sub: Any) -> None:
    ac = sub.add_parser(
        "agent-check",
        help="run the agent once on one task in the sandbox; show what it received and what was parsed",
    )
    ac.add_argument("--repo", type=Path, default=Path())
    ac.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    ac.add_argument("--task", help="the task's id (default: the first task file)")
    ac.add_argument(
        "--ref", default="HEAD", help="the commit whose files and instruction files the agent sees"
    )
    ac.add_argument("--agent", default="command", help="the agent, as for `run` (default: command)")
    ac.add_argument("--agent-cmd", help="the command agent's executable and arguments")
    ac.add_argument("--model", help="the model the agent uses (agents that call a model API)")
    ac.add_argument("--timeout", type=float, default=600.0, help="wall-clock seconds for the run")
    ac.add_argument("--sandbox", default="local", choices=("local", "docker"), help="default: local")


def _agent_check(args: argparse.Namespace) -> int:
    from docdelta.improve.agent_check import check_agent, passed, render
    from docdelta.wiring import AgentChoice, SandboxChoice, build_agent

    agent = build_agent(AgentChoice(args.agent, cmd=args.agent_cmd, model=args.model))
    check = check_agent(
        Repo(args.repo),
        args.tasks,
        agent,
        ref=args.ref,
        task_id=args.task,
        sandbox=SandboxChoice(args.sandbox),
        timeout_s=args.timeout,
        environ=os.environ,
    )
    render(check)
    return ExitCode.OK if passed(check) else ExitCode.BAD_INPUT


def _add_loop_commands(sub: Any) -> None:
    """Closing the loop (issue 15): ablate, suggest, history and receipts, external trials."""
    _add_ablate_command(sub)
    sg = sub.add_parser("suggest", help="draft an instruction-file patch from the gold items agents missed")
    sg.add_argument("--workdir", type=Path, required=True, help="a finished `docdelta run` workdir")
    sg.add_argument("--repo", type=Path, default=Path())
    sg.add_argument("--tasks", type=Path, required=True, help="the task files the run used")
    sg.add_argument("--condition", default=HEAD, help="whose files to patch (default head)")
    sg.add_argument("--max-tasks", type=_at_least(1), default=3, help="worst-scored tasks to draft for")
    sg.add_argument("--out", type=Path, help="the patch (default: <workdir>/suggested.patch)")
    sg.add_argument(
        "--measured", type=Path, metavar="WORKDIR", help="the workdir of the `--conditions head,patched` run"
    )
    sg.add_argument(
        "--model",
        help="also ask this model, through a loopback gateway that holds the key, for <out>-model.patch",
    )
    sg.add_argument("--provider", choices=("openai", "anthropic"), default="openai", help="its API")
    sg.add_argument("--base-url", help="the model API's URL (default: the project's gateway upstream)")
    _add_history_commands(sub)
    _add_external_commands(sub)


def _add_external_commands(sub: Any) -> None:
    pr = sub.add_parser("prepare", help="write the trials for an agent docdelta does not drive")
    pr.add_argument("--repo", type=Path, default=Path())
    pr.add_argument("--base", required=True)
    pr.add_argument("--head", required=True)
    pr.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    pr.add_argument("--workdir", type=Path, required=True)
    pr.add_argument("--conditions", type=_arg(validate.condition_list), default=list(DEFAULT_CONDITIONS))
    pr.add_argument("--patch", type=Path, help="unified diff applied to head's instruction files (patched)")
    pr.add_argument("--repeats", type=_at_least(1), default=3)
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--source", default=HEAD, help="source commit: head, base or a SHA (default head)")
    pr.add_argument("--allow-unreviewed", action="store_true")
    pr.add_argument("--agent-name", default="unnamed", help="what drives the trials, for the manifest")
    pr.add_argument("--agent-version", default="", help="its version, for the manifest")
    pr.add_argument("--model", help="the model it uses, for the manifest")
    ck = sub.add_parser("check", help="grade trials `prepare` wrote, once their controller has run them")
    ck.add_argument("trials", nargs="+", type=Path, metavar="TRIAL", help="trial directories")
    ck.add_argument("--tasks", type=Path, required=True, help="the task files given to `prepare`")


def _add_history_commands(sub: Any) -> None:
    h = sub.add_parser("history", help="the evaluations recorded by `run --history DIR` or the Action")
    _add_history_source(h)
    h.add_argument("--file", help="only evaluations whose head arm held this instruction file")
    h.add_argument("--json", action="store_true", help="print the records as JSON lines")
    rc = sub.add_parser(
        "receipt", help="exit 0 only if this exact instruction file content has a passing evaluation"
    )
    _add_history_source(rc)
    rc.add_argument("--file", required=True, help="the instruction file, e.g. AGENTS.md")
    rc.add_argument("--ref", help="read the file at this commit (default: the work tree's file)")
    rc.add_argument(
        "--fail-on",
        choices=("regression", "no-improvement", "never"),
        default="regression",
        help="the gate an evaluation must pass (default regression)",
    )


def _add_history_source(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--history", type=Path, metavar="DIR", help="a directory `run --history` wrote")
    where.add_argument(
        "--results-store",
        metavar="SPEC",
        help="the Action's results store, spelled as its input: branch:NAME (fetched from --repo's origin) "
        "or dir:PATH",
    )
    p.add_argument("--repo", type=Path, default=Path())


def _add_ablate_command(sub: Any) -> None:
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
        "--repeats", type=_at_least(1), default=4, help="runs per side one at a time would give (default 4)"
    )
    ab.add_argument("--seed", type=int, default=0)
    ab.add_argument("--yes", action="store_true", help="run a plan of more than 1,000 runs")
    _add_band(ab)
    _add_agent_options(ab)


def _add_band(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "--noise-band",
        type=_arg(validate.noise_band),
        default=None,
        help="head - base differences within +- this are noise (default: .docdelta.yml's noise_band, "
        f"else {DEFAULT_NOISE_BAND}); the run records it, so `report` uses it too",
    )


def _add_workdir_commands(sub: Any) -> None:
    """`plan` and `merge` (one evaluation spread over GitHub Actions matrix jobs), and the
    readers of a workdir, merged or not: `report` and `badge`."""
    pl = sub.add_parser("plan", help="write the GitHub Actions job matrix (JSON) for `run --shard I/N` jobs")
    pl.add_argument("--repo", type=Path, default=Path())
    pl.add_argument("--base", required=True)
    pl.add_argument("--head", required=True)
    pl.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    pl.add_argument("--conditions", type=_arg(validate.condition_list), help="as `run`'s")
    pl.add_argument("--arms", type=_arg(_parse_arms), help="as `run`'s")
    pl.add_argument("--repeats", type=_at_least(1), default=3)
    pl.add_argument(
        "--max-parallel",
        type=_at_least(1),
        default=DEFAULT_MAX_PARALLEL,
        help=f"jobs GitHub runs at once (strategy.max-parallel; default {DEFAULT_MAX_PARALLEL})",
    )
    pl.add_argument(
        "--cells-per-job", type=_at_least(1), help="batch size (default: spread over max-parallel)"
    )

    mg = sub.add_parser("merge", help="combine the workdirs of `run --shard` jobs into one workdir")
    mg.add_argument("shards", nargs="+", type=Path, metavar="DIR", help="each shard's workdir")
    mg.add_argument("--workdir", type=Path, required=True, help="the merged workdir (report, badge read it)")

    rep = sub.add_parser("report", help="render the scorecard of a workdir")
    rep.add_argument("--workdir", type=Path, required=True)
    rep.add_argument(
        "--format",
        choices=("md", "json", "html"),
        default="md",
        help="html: one self-contained page; its links to run files are relative to the current directory",
    )

    b = sub.add_parser("badge", help="write a shields.io endpoint JSON badge")
    b.add_argument("--workdir", type=Path, required=True)
    b.add_argument("--out", type=Path, required=True)


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
        type=_arg(validate.condition_list),
        help="comma-separated (default base,head,none; with --arms: only the arms unless given)",
    )
    r.add_argument(
        "--arms",
        type=_arg(_parse_arms),
        help="arms that vary the agent, model or context: NAME:field=value,...;NAME:... with fields "
        "condition, agent, agent_cmd, model, overlay (a directory laid over the checkout), vs "
        "(e.g. small:model=s;large:model=l); default: .docdelta.yml's arms, added to the conditions",
    )
    r.add_argument("--patch", type=Path, help="unified diff applied to head's instruction files (patched)")
    r.add_argument(
        "--repeats",
        type=_arg(validate.repeats),
        default=AUTO,
        help="runs per arm and task, or auto (rounds until decided, up to --max-repeats; the default)",
    )
    r.add_argument(
        "--max-repeats",
        type=_at_least(2),
        default=DEFAULT_MAX_REPEATS,
        help="the cap of --repeats auto (default: %(default)s)",
    )
    r.add_argument("--seed", type=int, default=0)
    _add_band(r)
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
        type=_arg(validate.fraction),
        help="share of a task's head runs that must score 1.0 (e.g. 0.8) for tasks that set no "
        "pass_threshold; reported per arm, and a miss where base met it is flagged (default: none)",
    )
    r.add_argument(
        "--pass-k",
        type=_at_least(1),
        default=1,
        help="with --pass-threshold: judge pass^k (the chance k runs all pass), not the pass rate",
    )
    _add_agent_options(r)


def _add_agent_options(r: argparse.ArgumentParser) -> None:
    """The flags of `RUN_FLAGS`: agent, sandbox and limits (`run` and `ablate`)."""
    r.add_argument(
        "--agent",
        default="fake",
        help="fake | command | openai | claude_code | codex | opencode | gemini | copilot "
        "(agents that call a model need --sandbox docker)",
    )
    r.add_argument("--agent-cmd", help="the command agent's executable and arguments")
    r.add_argument("--model", help="the model the agent uses (agents that call a model API)")
    r.add_argument("--timeout", type=float, default=600.0, help="wall-clock seconds per run")
    r.add_argument(
        "--sandbox",
        default="local",
        choices=provider_names(),
        help="local (bubblewrap), docker, or none (no isolation, flagged as a confound); default: local",
    )
    r.add_argument("--extra-ca", type=Path, help="PEM bundle trusted when building the docker image")
    r.add_argument(
        "--allow-network", action="store_true", help="local sandbox: give runs asking for it the host network"
    )
    r.add_argument("--allow-unreviewed", action="store_true", help="run tasks whose gold is not reviewed")
    r.add_argument("--cap-usd", type=float, help="stop the matrix before spend would exceed this")
    r.add_argument(
        "--reserve-usd",
        type=float,
        default=0.0,
        help="spend reserved per run for the cap check; behind the gateway also each run's dollar budget",
    )
    r.add_argument("--max-turns", type=_at_least(1), help="turn cap per run, for agents that take one")
    r.add_argument(
        "--max-output-tokens",
        type=_at_least(1),
        help=f"output cap per model turn of the openai agent (default {DEFAULT_MAX_OUTPUT_TOKENS})",
    )
    r.add_argument(
        "--infra-retries",
        type=_at_least(0),
        default=2,
        help="reruns of a run our own machinery failed (default 2)",
    )
    r.add_argument(
        "--rate-limit",
        choices=("stop", "wait"),
        default="stop",
        help="stop: a rate-limited run stops the matrix (default); wait: retry it after 5, 15 and 45 "
        "minutes first (logged in <workdir>/ratelimit.log)",
    )

    r.add_argument(
        "--env-file",
        type=Path,
        metavar="FILE",
        help="read API keys from this dotenv file (KEY=value lines); variables already set win",
    )
    r.add_argument("--jobs", type=_at_least(1), default=1, help="cells run at once (default 1)")
    r.add_argument(
        "--shard",
        help="I/N: run only shard I of N of the plan (one GitHub Actions matrix job; see `docdelta plan`)",
    )


def _add_judge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    p.add_argument("--judge-model", required=True, help="must differ from the agent's model")
    p.add_argument("--provider", choices=("openai", "anthropic"), default="openai", help="default: openai")
    p.add_argument("--base-url", help="model API (or gateway route) base URL; default: the provider's")
    p.add_argument("--calibration", type=Path, help="calibration records (default: .docdelta/calibration)")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with _sigterm_as_exception():
        try:
            code = _dispatch(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit as "Exception ignored"
            return code
        except DocdeltaError as exc:
            print(f"docdelta: error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print(f"\ndocdelta: interrupted; {_SAVED}", file=sys.stderr)
            return ExitCode.INTERRUPTED
        except Terminated:
            print(f"\ndocdelta: terminated (SIGTERM); {_SAVED}", file=sys.stderr)
            return ExitCode.TERMINATED
        except BrokenPipeError:
            return _reader_went_away()


_SAVED = "every finished result is saved — rerun the same command to resume"


@contextlib.contextmanager
def _sigterm_as_exception() -> Iterator[None]:
    """SIGTERM (a CI cancel, `kill`, `docker stop`) unwinds like Ctrl-C: every `finally`
    removes its temp files and sandboxes, finished results stay, and the exit is 143."""

    def terminate(_signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends us at once
        raise Terminated

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _reader_went_away() -> int:
    """`docdelta report | head`: the reader closed the pipe, which is its right, not an error.
    Point stdout at /dev/null so the interpreter's final flush does not fail too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return ExitCode.OK


def _dispatch(args: argparse.Namespace) -> int:
    if getattr(args, "env_file", None) is not None:
        from docdelta.envfile import load_env_file

        names = load_env_file(args.env_file)
        print(f"docdelta: --env-file set {', '.join(names) or 'nothing new'}", file=sys.stderr)
    return COMMANDS[args.command](args)


def _action(args: argparse.Namespace) -> int:
    from docdelta.action import main  # PyGithub only for the Action

    return main.main()


def _schema(args: argparse.Namespace) -> int:
    from docdelta.agents.prompt import answer_json_schema
    from docdelta.tasks.load import task_json_schema

    print(json.dumps(answer_json_schema() if args.what == "answer" else task_json_schema(), indent=2))
    return ExitCode.OK


def _detect(args: argparse.Namespace) -> int:
    if args.diff is not None:
        if args.base or args.head:
            raise ConfigError("--diff and --base/--head are alternatives", hint="pass one or the other")
        detection = detect_diff(_diff_text(args.diff), InstructionMatcher())
    elif args.base and args.head:
        repo = Repo(args.repo)
        base = repo.resolve(args.base)
        detection = detect_refs(repo, base, repo.resolve(args.head), _project_matcher(repo, base))
    else:
        raise ConfigError(
            "detect needs --base and --head, or --diff FILE", hint="e.g. --base origin/main --head HEAD"
        )
    if args.json:
        print(detection.model_dump_json(indent=2))
        return ExitCode.OK
    if detection.empty:
        print("nothing to evaluate: no agent instruction file changed")
    for f in detection.changed:
        moved = f" (from {f.old_path})" if f.old_path else ""
        link = f" [symlink -> {f.link_target}]" if f.link_target else " [symlink]" if f.symlink else ""
        via = f" (imported by {', '.join(f.imported_by)})" if f.imported_by else ""
        print(f"{f.status.value:<9} {f.path}{moved}{link}{via}  read by: {f.loading_text() or '-'}")
    for reason, paths in _grouped(detection.near_misses).items():
        where = paths[0] if len(paths) == 1 else f"{len(paths)} files ({listing(paths)})"
        print(f"note      {where}: {reason}")
    if detection.other_changed and not detection.empty:
        print(
            f"note      {len(detection.other_changed)} other file(s) changed in the range (code, tests, docs)"
        )
    return ExitCode.OK


def _grouped(near_misses: Sequence[NearMiss]) -> dict[str, list[str]]:
    """Near misses with the same reason as one line: a docs site's six translated `agents.md`
    pages are one finding, not six."""
    grouped: dict[str, list[str]] = {}
    for n in near_misses:
        grouped.setdefault(n.reason, []).append(n.path)
    return grouped


def _project_matcher(repo: Repo, sha: str) -> InstructionMatcher:
    """The instruction matcher of `.docdelta.yml` at `sha` (the trusted base). Without one
    it is the built-in table's, and the config's models are never imported."""
    if not any(e.path == CONFIG_PATH for e in repo.tree(sha, [CONFIG_PATH])):
        return InstructionMatcher()
    from docdelta.config import load_project_config, matcher

    return matcher(load_project_config(repo, sha))


def _diff_text(stream: BinaryIO) -> str:
    """A diff's text. Only its file headers matter to detection and those are git's (UTF-8
    or C-quoted); a hunk in another encoding (a Latin-1 file) must not stop it."""
    with stream:
        return stream.read().decode("utf-8", errors="replace")


def _parse_arms(text: str) -> list[ArmSpec]:
    from docdelta.experiment.arms import parse_arms  # statistics are imported only when arms are given

    return parse_arms(text)


def _conditions(args: argparse.Namespace) -> list[str]:
    """`--conditions`, by default base,head,none, or none of them when `--arms` is given."""
    if args.conditions is not None:
        return list(args.conditions)
    return [] if args.arms else list(DEFAULT_CONDITIONS)


def _run(args: argparse.Namespace) -> int:
    from docdelta.experiment.plan import ExperimentRequest

    arms = args.arms or []
    conditions = _conditions(args)
    request = ExperimentRequest(
        base=args.base,
        head=args.head,
        tasks_dir=args.tasks,
        conditions=conditions,
        arms=arms,
        config_arms=True,
        require_change=not arms,
        repeats=args.max_repeats if args.repeats == AUTO else args.repeats,
        adaptive=args.repeats == AUTO,
        seed=args.seed,
        source=args.source,
        patch=args.patch,
        allow_unreviewed=args.allow_unreviewed,
        max_runs=None if args.yes else validate.MAX_RUNS_WITHOUT_CONFIRMATION,
        pass_threshold=_pass_threshold(args),
        only_tasks=args.only_tasks,
    )
    return _execute(Repo(args.repo), request, run_options(args), args.workdir, args.history, args.config)


def _pass_threshold(args: argparse.Namespace) -> PassThreshold | None:
    """`--pass-threshold` / `--pass-k` as the default bar (`docdelta.scorecard.thresholds`)."""
    from docdelta.tasks.models import PassThreshold

    if args.pass_threshold is None:
        if args.pass_k != 1:
            raise ConfigError("--pass-k needs --pass-threshold", hint="e.g. --pass-threshold 0.8 --pass-k 3")
        return None
    return PassThreshold(fraction=args.pass_threshold, k=args.pass_k)


RUN_FLAGS = {
    "agent": "agent",
    "agent_cmd": "agent-cmd",
    "model": "model",
    "sandbox": "sandbox",
    "allow_network": "allow-network",
    "extra_ca": "extra-ca",
    "timeout_s": "timeout",
    "max_turns": "max-turns",
    "max_output_tokens": "max-output-tokens",
    "cap_usd": "cap-usd",
    "reserve_usd": "reserve-usd",
    "infra_retries": "infra-retries",
    "rate_limit": "rate-limit",
    "jobs": "jobs",
    "shard": "shard",
    "noise_band": "noise-band",
}
"""RunOptions field -> `docdelta run` flag (without `--`); the Action's table is settings.INPUTS."""


def run_options(args: argparse.Namespace) -> RunOptions:
    """`docdelta run`'s flags as the options the composition root takes. The CLI's keys
    come from the environment, so `api_key` stays unset."""
    from docdelta.evaluation import RunOptions

    values = {name: getattr(args, flag.replace("-", "_")) for name, flag in RUN_FLAGS.items()}
    return RunOptions.parse(values, lambda name: f"--{RUN_FLAGS.get(name, name)}")


def _execute(
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
        raise ConfigError(exc.message, hint=_plan_cost(exc.planned, options) + exc.hint) from None
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


def _open_history(args: argparse.Namespace) -> History:
    """`--history DIR`, or the `history/` folder of `--results-store` (the data branch included)."""
    from docdelta.action.settings import StoreSpec
    from docdelta.results.backends import open_store
    from docdelta.scorecard.history import HISTORY_DIR, History

    if args.history is not None:
        return History.at(args.history)
    try:
        spec = StoreSpec.parse(args.results_store)
    except ValueError as exc:
        raise ConfigError(f"--results-store: {exc}", hint="e.g. branch:docdelta-results") from None
    store = open_store(spec.kind, spec.location, args.repo)
    if store is None:
        raise ConfigError("--results-store none keeps no history", hint="name the branch or directory")
    return History(store, HISTORY_DIR)


def _history(args: argparse.Namespace) -> int:
    from docdelta.scorecard.history import render as render_history

    records, skipped = _open_history(args).records()
    if args.json:
        for record in records:
            print(record.model_dump_json())
        return ExitCode.OK
    print(render_history(records, args.file, skipped))
    return ExitCode.OK


def _file_bytes(repo_dir: Path, path: str, ref: str | None) -> bytes:
    """The instruction file as it would be merged: the work tree's, or at `ref`."""
    if ref is None:
        try:
            return (repo_dir / path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {repo_dir / path}: {exc.strerror}", hint="check --file") from None
    repo = Repo(repo_dir)
    entry = next((e for e in repo.tree(repo.resolve(ref), [path]) if e.path == path), None)
    if entry is None:
        raise ConfigError(f"{path} does not exist at {ref}", hint="check --file and --ref")
    return repo.read_blob(entry.oid)


def _receipt(args: argparse.Namespace) -> int:
    """The CI check: the file being merged, by content hash, against the receipts."""
    from docdelta.scorecard.history import content_digest

    history = _open_history(args)
    digest = content_digest(_file_bytes(args.repo, args.file, args.ref))
    receipt = history.receipt(digest)
    entries = receipt.evaluations if receipt else []
    passing = receipt.passing(args.fail_on) if receipt else []
    if passing:
        last = passing[-1]
        print(
            f"ok: {args.file} ({digest[:12]}) passed `fail-on: {args.fail_on}` in the evaluation of head "
            f"{last.head_sha[:12]} on {last.recorded_at:%Y-%m-%d %H:%M}: {last.gate(args.fail_on).reason}"
        )
        return ExitCode.OK
    why = (
        f"{len(entries)} evaluation(s) of this content, none passing `fail-on: {args.fail_on}`"
        if entries
        else "no evaluation of this exact content is recorded"
    )
    print(f"docdelta: {args.file} ({digest[:12]}): {why}", file=sys.stderr)
    return ExitCode.NO_RECEIPT


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
        raise ConfigError(exc.message, hint=_plan_cost(exc.planned, options) + exc.hint) from None
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


def _suggest(args: argparse.Namespace) -> int:
    from docdelta.improve.suggest import adding, change, measure, measured_line, suggest
    from docdelta.improve.suggest import write as write_suggestion
    from docdelta.tasks.load import load_tasks

    _, manifest, results, _summary = _load_experiment(args.workdir)
    repo = Repo(args.repo)
    tasks = {lt.task.id: lt.task for lt in load_tasks(args.tasks)}
    drafted = suggest(repo, manifest, results, tasks, condition=args.condition, max_tasks=args.max_tasks)
    if drafted is None:
        print(f"nothing to suggest: {args.condition} missed no gold item its files do not already state")
        return ExitCode.OK
    out = args.out or args.workdir / "suggested.patch"
    side = write_suggestion(drafted, out)
    print(drafted.patch, end="")
    worst = ", ".join(f"{t} ({m:.2f})" for t, m in drafted.tasks.items())
    print(f"\ndrafted for {worst}; written to {out} (reasons: {side})")
    for r in drafted.replaced:
        print(f"replaces `{r.stale}` with `{r.command}` in {r.file}:{r.line}: {r.evidence}")
    model_patch = _model_draft(args, repo, manifest, results, tasks, drafted, out) if args.model else None
    if args.measured is not None:
        from docdelta.improve.suggest_model import measured_as

        _, proof_manifest, proof_results, _ = _load_experiment(args.measured)
        what = change(drafted)
        model = measured_as(drafted, out, proof_manifest)
        if model is not None:
            drafted, lines = model
            what = adding(lines)
            print(f"measured: the model's draft ({out.stem}-model{out.suffix})")
        for m in measure(drafted, proof_manifest, proof_results):
            print(measured_line(m, what))
        return ExitCode.OK
    print(
        "unproven until measured: docdelta run "
        f"--repo {args.repo} --base {manifest.base_sha[:12]} --head {manifest.head_sha[:12]} "
        f"--tasks {args.tasks} --conditions {args.condition},patched --patch {out} --workdir WORKDIR"
        + (f" (or --patch {model_patch}, the model's)" if model_patch else "")
    )
    return ExitCode.OK


def _model_draft(
    args: argparse.Namespace,
    repo: Repo,
    manifest: Manifest,
    results: list[RunResult],
    tasks: dict[str, Task],
    drafted: Suggestion,
    out: Path,
) -> Path | None:
    """The second, model-written patch beside `out` (its path); a refused draft is said, not kept."""
    from docdelta.improve.suggest_model import draft_for
    from docdelta.improve.suggest_model import write as write_model_draft

    try:
        got = draft_for(
            drafted, repo, manifest, results, tasks,
            provider=args.provider, model=args.model, environ=os.environ, base_url=args.base_url,
        )  # fmt: skip
    except DraftRefused as exc:
        print(f"docdelta: {exc.message}\n  hint: {exc.hint}", file=sys.stderr)
        return None
    path = write_model_draft(got, out)
    print(got.patch, end="")
    spent = f"{got.tokens_in or 0}+{got.tokens_out or 0} tokens" + (
        f", ${got.cost_usd:.4f}" if got.cost_usd is not None else ""
    )
    print(
        f"\nmodel draft by {got.provider}/{got.model} ({got.added_lines} line{'s' * (got.added_lines != 1)} "
        "added, one call through "
        f"the gateway: {spent}); written to {path}"
    )
    return path


def _plan_cost(planned: int, options: RunOptions) -> str:
    """What a plan may cost and take, where the options bound it: the reserve is each run's
    spend limit, the timeout each run's longest wall-clock time (runs go one at a time)."""
    timeout = options.timeout_s
    hours = f"take up to {planned * timeout / 3600:,.1f} hours (--timeout {timeout:g}s per run)"
    if options.reserve_usd > 0:
        return (
            f"it may cost up to ${planned * options.reserve_usd:,.2f} (--reserve-usd per run) and {hours}; "
        )
    return f"it may {hours}; "


def _plan(args: argparse.Namespace) -> int:
    """The job matrix of one evaluation, as one JSON line for `$GITHUB_OUTPUT`."""
    from docdelta.config import load_project_config, matcher
    from docdelta.experiment.shard import plan_matrix
    from docdelta.tasks.load import load_tasks

    repo = Repo(args.repo)
    base = repo.resolve(args.base)
    config = load_project_config(repo, base)
    detection = detect_refs(repo, base, repo.resolve(args.head), matcher(config))
    columns = len(_conditions(args)) + len(args.arms or config.arms)  # as `run` plans them
    cells = 0 if detection.empty else len(load_tasks(args.tasks)) * columns * args.repeats
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


def _load_summary(workdir: Path) -> Summary:
    return _load_experiment(workdir)[3]


def _load_experiment(workdir: Path) -> tuple[ResultStore, Manifest, list[RunResult], Summary]:
    """A finished (or partial) experiment's store, manifest, results and scorecard numbers."""
    from docdelta.results.store import ResultStore
    from docdelta.scorecard.workdir import scorecard

    store = ResultStore(workdir)
    manifest, detection = store.read_manifest(), store.read_detection()
    if manifest is None or detection is None:
        raise ConfigError(
            f"{workdir} holds no docdelta experiment (manifest.json or detection.json missing)",
            hint="pass the --workdir you gave to `docdelta run`",
        )
    results = store.results(manifest.repo)
    return store, manifest, results, scorecard(store, manifest, detection, results)


def _report(args: argparse.Namespace) -> int:
    from docdelta.report import render_json, render_markdown
    from docdelta.report.html import render_html

    store, manifest, results, summary = _load_experiment(args.workdir)
    if args.format == "html":
        cell_dir = partial(store.cell_dir, manifest.repo)
        sys.stdout.write(render_html(summary, results, cell_dir=cell_dir, link_root=Path.cwd()))
        return ExitCode.OK
    print(render_json(summary) if args.format == "json" else render_markdown(summary))
    return ExitCode.OK


def _badge(args: argparse.Namespace) -> int:
    from docdelta.report import badge

    data = badge(_load_summary(args.workdir))
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the badge to {args.out}: {exc.strerror or exc}",
            hint="pass --out a file path (not a directory) in a directory you can write to",
        ) from None
    print(f"badge written to {args.out}: {data['message']}")
    return ExitCode.OK


def _tasks(args: argparse.Namespace) -> int:
    if args.tasks_command == "audit":
        return _tasks_audit(args)
    if args.tasks_command == "draft":
        return _tasks_draft(args)
    return _tasks_from_commit(args)


def _tasks_audit(args: argparse.Namespace) -> int:
    from docdelta.config import load_project_config
    from docdelta.experiment.plan import strip_inside
    from docdelta.improve.task_audit import audit_suite, read_source
    from docdelta.improve.task_audit import render as render_audit
    from docdelta.tasks.load import load_tasks

    repo = Repo(args.repo)
    sha = repo.resolve(args.ref)
    config = load_project_config(repo, sha)
    source = read_source(repo, sha, config, strip_inside(repo.root, args.tasks))
    audit = audit_suite(load_tasks(args.tasks), source, sha, args.results)
    print(audit.model_dump_json(indent=2) if args.json else render_audit(audit))
    return ExitCode.OK


def _tasks_draft(args: argparse.Namespace) -> int:
    from docdelta.improve.task_draft import draft_tasks, existing_tasks, gold_summary, write_drafts

    drafts = draft_tasks(Repo(args.repo), args.ref, args.sources, existing_tasks(args.out))
    written, kept = write_drafts(drafts, args.out)
    where = ", ".join(args.sources)
    print(f"drafted {len(written)} task(s) from {where} at {drafts.source_sha[:12]} into {args.out}")
    new = {p.stem for p in written}
    for d in drafts.drafts:
        if d.task.id in new:
            print(f"  {d.kind.value:<8} {d.task.id:<48} {d.file}:{d.line:<4} {gold_summary(d.task)}")
    if drafts.covered:  # listed by the covering task's id where it differs (a rerun's are the same)
        others = [f"{d.task.id} ({by})" for d, by in drafts.covered if d.task.id != by]
        line = f"not drafted: {len(drafts.covered)} rule(s) that tasks in {args.out} already cover"
        print(line + (": " + ", ".join(others) if others else ""))
    if kept:
        print(f"kept {len(kept)} existing file(s), not overwritten: {', '.join(p.name for p in kept)}")
    print(
        "every draft is `reviewed: false`: reword its prompt, check its gold, then set `reviewed: true` "
        f"(`docdelta run` refuses unreviewed tasks; `docdelta tasks audit --tasks {args.out}` labels them)"
    )
    return ExitCode.OK


def _tasks_from_commit(args: argparse.Namespace) -> int:
    from docdelta.improve.from_commits import task_from_commit, write_task

    draft = task_from_commit(Repo(args.repo), args.sha)
    path = write_task(draft, args.tasks)
    print(f"wrote {path} (+ {len(draft.assets.hidden)} hidden test file(s), reference.patch)")
    for note in draft.notes:
        print(f"  {note}")
    print("the task is `reviewed: false`: read its prompt and validation, then set `reviewed: true`")
    return ExitCode.OK


def _selftest(args: argparse.Namespace) -> int:
    from docdelta.agents import agent_npm
    from docdelta.checkout import envs
    from docdelta.config import load_project_config, matcher
    from docdelta.grading.selftest import selftest_tasks
    from docdelta.tasks.load import load_tasks

    repo = Repo(args.repo)
    config = load_project_config(repo, repo.resolve(args.source))
    loaded = load_tasks(args.tasks)
    with tempfile.TemporaryDirectory(prefix="docdelta-selftest-") as tmp:
        scratch = args.workdir or Path(tmp)
        from docdelta.wiring import SandboxChoice, build_provider

        provider = build_provider(
            SandboxChoice(args.sandbox),
            repo=repo,
            private={"tasks directory": args.tasks, "workdir": scratch},
            config=config,
            agent=None,
            image_npm=agent_npm(args.agent),
        ).provider
        try:
            reports = selftest_tasks(
                repo,
                loaded,
                source=args.source,
                strip=config.checkout_strip,
                matcher=matcher(config),
                provider=provider,
                scratch=scratch,
                flake_runs=args.flake_runs,
                env_links=lambda sha: envs.links(envs.install(repo, sha, config.sandbox)),
            )
        finally:
            provider.close()
    if not reports:
        print("no change tasks to selftest")
    for report in reports:
        print(f"{'ok  ' if report.passed else 'FAIL'} {report.task}")
        for leg in report.legs:
            print(f"     {'ok  ' if leg.passed else 'FAIL'} {leg.name}{': ' + leg.note if leg.note else ''}")
    return ExitCode.OK if all(r.passed for r in reports) else ExitCode.BAD_INPUT


def _judge(args: argparse.Namespace) -> int:
    """`judge` and `calibrate`: both ask through the judge's client, with the key from the env."""
    from docdelta.grading.calibration import below_threshold, calibrate_tasks, default_dirs
    from docdelta.grading.judged import judge_workdir
    from docdelta.grading.rubrics import rubric_of
    from docdelta.results.grades import JudgeInfo
    from docdelta.results.store import ResultStore
    from docdelta.tasks.load import load_tasks
    from docdelta.wiring import build_judge

    tasks = [t.task for t in load_tasks(args.tasks)]
    fixtures_dir, calibration_dir = default_dirs(args.tasks)
    calibration_dir = args.calibration or calibration_dir
    judge = JudgeInfo(provider=args.provider, model=args.judge_model)
    api = build_judge(judge, args.base_url, os.environ)
    try:
        if args.command == "judge":
            done = judge_workdir(ResultStore(args.workdir), tasks, api, calibration_dir)
            print(f"judge {judge}: {done.judged} run(s) judged, {done.reused} reused, {done.skipped} skipped")
            return ExitCode.OK
        rubrics = [rubric_of(t) for t in tasks]
        saved = calibrate_tasks(api, rubrics, args.fixtures or fixtures_dir, calibration_dir)
    finally:
        api.close()
    for record, path in saved:
        low = below_threshold(record)
        print(
            f"{'FAIL' if low else 'ok  '} {record.task}: pass-class {record.pass_accuracy:.2f} "
            f"({record.pass_labels}), fail-class {record.fail_accuracy:.2f} ({record.fail_labels}) -> {path}"
        )
        for line in [*low, *record.errors]:
            print(f"     {line}")
    return ExitCode.BAD_INPUT if any(below_threshold(r) for r, _ in saved) else ExitCode.OK


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
    return _execute(Repo(demo.path), request, options, args.workdir / "results")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "detect": _detect,
    "run": _run,
    "ablate": _ablate,
    "suggest": _suggest,
    "history": _history,
    "prepare": _prepare,
    "check": _check,
    "receipt": _receipt,
    "plan": _plan,
    "merge": _merge,
    "report": _report,
    "badge": _badge,
    "demo": _demo,
    "tasks": _tasks,
    "selftest": _selftest,
    "gc": _gc,
    "judge": _judge,
    "calibrate": _judge,
    "schema": _schema,
    "agent-check": _agent_check,
    "init": _init,
    "action": _action,
}
"""Subcommand -> handler; every subparser of `_parser` has one (a test holds them equal)."""
