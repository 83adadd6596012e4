"""Command line: parse arguments, build the real dependencies, map errors to exit codes.

This is one of the two places (with app.py) that construct real clients; every
other module receives them. Exit codes: 0 done, 1 matrix stopped before it was
complete (spend cap, rate limit), 2 bad input, 3 infrastructure failure, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import httpx

from docdelta import __version__
from docdelta.config import ProjectConfig, check_exposure, load_project_config, matcher
from docdelta.demo import build_demo_repo
from docdelta.detect import detect_diff, detect_refs
from docdelta.errors import ConfigError, DocdeltaError
from docdelta.git import Repo
from docdelta.grading.calibration import below_threshold, calibrate_tasks, default_dirs
from docdelta.grading.fromcommit import task_from_commit, write_task
from docdelta.grading.judge_api import JudgeAPI, endpoint_from_env
from docdelta.grading.judged import judge_workdir
from docdelta.grading.rubrics import rubric_of
from docdelta.grading.selftest import selftest_tasks
from docdelta.models import JudgeInfo, Manifest, RunResult, Summary
from docdelta.report import badge, render_json, render_markdown
from docdelta.report.html import render_html
from docdelta.runner import ExperimentRequest, RunLimits, Runner, prepare, progress_for
from docdelta.sandbox import get_provider, provider_names
from docdelta.sandbox.base import SandboxSpec
from docdelta.scorecard import scorecard
from docdelta.store import ResultStore
from docdelta.tasks import load_tasks, task_json_schema
from docdelta.wiring import AgentChoice, SandboxChoice, build_agent, build_provider

EXIT_INCOMPLETE = 1
EXIT_INTERRUPTED = 130


def _conditions(value: str) -> list[str]:
    names = [c.strip() for c in value.split(",") if c.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list such as base,head,none")
    return names


def _at_least(low: int) -> Callable[[str], int]:
    """An argparse type for whole numbers >= low, so a bad limit is a usage error up front."""

    def parse(value: str) -> int:
        number = int(value)
        if number < low:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {value}")
        return number

    return parse


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
        type=argparse.FileType("r"),
        help="a unified diff ('-' for stdin) instead of two refs; the built-in file table is used",
    )
    d.add_argument("--json", action="store_true", help="print the detection as JSON")

    r = sub.add_parser("run", help="run the matrix of tasks x conditions x repeats and print the scorecard")
    r.add_argument("--repo", type=Path, default=Path())
    r.add_argument("--base", required=True)
    r.add_argument("--head", required=True)
    r.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    r.add_argument("--workdir", type=Path, required=True)
    _add_run_options(r)

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

    demo = sub.add_parser("demo", help="run the bundled example with the fake agent (no key, no Docker)")
    demo.add_argument("--workdir", type=Path, default=Path("docdelta-demo"))
    demo.add_argument("--repeats", type=int, default=5)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--sandbox", default="local", choices=("local", "docker"), help="default: local")

    t = sub.add_parser("tasks", help="work with task files")
    tsub = t.add_subparsers(dest="tasks_command", required=True)
    fc = tsub.add_parser("from-commit", help="draft a change task from a past commit that changed tests")
    fc.add_argument("sha")
    fc.add_argument("--repo", type=Path, default=Path())
    fc.add_argument("--tasks", type=Path, default=Path(".docdelta/tasks"), help="where to write the task")

    st = sub.add_parser("selftest", help="prove each change task's hidden tests tell right from wrong")
    st.add_argument("--repo", type=Path, default=Path())
    st.add_argument("--tasks", type=Path, required=True)
    st.add_argument("--source", default="HEAD", help="source commit for tasks that do not name one")
    st.add_argument("--flake-runs", type=int, default=3, help="runs of the reference (flake probe)")
    st.add_argument("--workdir", type=Path, help="scratch directory (default: a temporary one)")

    jd = sub.add_parser("judge", help="rule on key points with a calibrated LLM judge (writes judged.json)")
    jd.add_argument("--workdir", type=Path, required=True)
    _add_judge_options(jd)
    cal = sub.add_parser("calibrate", help="measure a judge on each rubric's labeled pass/fail fixtures")
    cal.add_argument(
        "--fixtures", type=Path, help="labeled fixtures, <task id>.yaml (default: .docdelta/rubrics)"
    )
    _add_judge_options(cal)

    g = sub.add_parser("gc", help="remove Docker containers, networks and volumes left by a crashed run")
    g.add_argument("--yes", action="store_true", help="also remove those of runs that may still be going")

    s = sub.add_parser("schema", help="print a JSON Schema, for editors")
    s.add_argument("what", choices=("task",))

    sub.add_parser("action", help="the GitHub Action entry point (reads INPUT_* and GITHUB_* variables)")
    return p


def _add_run_options(r: argparse.ArgumentParser) -> None:
    r.add_argument("--conditions", type=_conditions, default=["base", "head", "none"])
    r.add_argument("--patch", type=Path, help="unified diff applied to head's instruction files (patched)")
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--source", default="head", help="source commit: head, base or a SHA (default head)")
    r.add_argument(
        "--agent",
        default="fake",
        help="fake | command | openai | claude_code | codex | opencode | gemini "
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


def _add_judge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    p.add_argument("--judge-model", required=True, help="must differ from the agent's model")
    p.add_argument("--provider", choices=("openai", "anthropic"), default="openai", help="default: openai")
    p.add_argument("--base-url", help="model API (or gateway route) base URL; default: the provider's")
    p.add_argument("--calibration", type=Path, help="calibration records (default: .docdelta/calibration)")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except DocdeltaError as exc:
        print(f"docdelta: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(
            "\ndocdelta: interrupted; every finished result is saved — rerun the same command to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "detect":
        return _detect(args)
    if args.command == "run":
        return _run(args)
    if args.command == "report":
        return _report(args)
    if args.command == "badge":
        return _badge(args)
    if args.command == "demo":
        return _demo(args)
    if args.command == "tasks":
        return _tasks_from_commit(args)
    if args.command == "selftest":
        return _selftest(args)
    if args.command == "gc":
        return _gc(args)
    if args.command in ("judge", "calibrate"):
        return _judge(args)
    if args.command == "action":
        from docdelta import app  # noqa: PLC0415 - PyGithub only for the Action

        return app.main()
    print(json.dumps(task_json_schema(), indent=2))
    return 0


def _detect(args: argparse.Namespace) -> int:
    if args.diff is not None:
        if args.base or args.head:
            raise ConfigError("--diff and --base/--head are alternatives", hint="pass one or the other")
        detection = detect_diff(args.diff.read(), matcher(ProjectConfig()))
    elif args.base and args.head:
        repo = Repo(args.repo)
        base = repo.resolve(args.base)
        detection = detect_refs(repo, base, repo.resolve(args.head), matcher(load_project_config(repo, base)))
    else:
        raise ConfigError(
            "detect needs --base and --head, or --diff FILE", hint="e.g. --base origin/main --head HEAD"
        )
    if args.json:
        print(detection.model_dump_json(indent=2))
        return 0
    if detection.empty:
        print("nothing to evaluate: no agent instruction file changed")
    for f in detection.changed:
        moved = f" (from {f.old_path})" if f.old_path else ""
        link = " [symlink]" if f.symlink else ""
        print(f"{f.status.value:<9} {f.path}{moved}{link}  read by: {', '.join(f.families) or '-'}")
    for n in detection.near_misses:
        print(f"note      {n.path}: {n.reason}")
    return 0


def _run(args: argparse.Namespace) -> int:
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
    return _execute(Repo(args.repo), request, args, args.workdir)


def _execute(repo: Repo, request: ExperimentRequest, args: argparse.Namespace, workdir: Path) -> int:
    """Build the real agent, sandbox provider and store, prepare, run, print the scorecard."""
    store = ResultStore(workdir)
    config = load_project_config(repo, repo.resolve(request.base))
    agent = build_agent(AgentChoice(args.agent, cmd=args.agent_cmd, model=args.model))
    provider, image_digest = build_provider(
        SandboxChoice(args.sandbox, allow_network=args.allow_network, extra_ca=args.extra_ca),
        repo=repo,
        workdir=store.workdir,
        config=config,
        agent=agent,
        tasks_dir=request.tasks_dir,
    )
    try:
        exp = prepare(
            repo,
            request,
            config=config,
            store=store,
            agent=agent,
            sandbox=args.sandbox,
            image_digest=image_digest,
        )
        if exp is None:
            print("nothing to evaluate: no agent instruction file changed")
            return 0
        runner = Runner(
            store,
            provider,
            SandboxSpec(network=agent.network),
            agent,
            RunLimits(
                timeout_s=args.timeout,
                max_turns=args.max_turns,
                cap_usd=args.cap_usd,
                reserve_usd=args.reserve_usd,
                infra_retries=args.infra_retries,
                rate_limit=args.rate_limit,
            ),
            progress_for(sys.stderr, ci=bool(os.environ.get("CI"))),
        )
        report = runner.run(exp)
    finally:
        provider.close()
    summary = scorecard(store, exp.manifest, exp.detection, report.results)
    print(render_markdown(summary))
    print(f"results: {store.workdir} ({report.ran} ran, {report.reused} reused)", file=sys.stderr)
    if report.stopped:
        print(f"docdelta: matrix stopped early: {report.stopped}; rerun to resume", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _load_summary(workdir: Path) -> Summary:
    return _load_experiment(workdir)[3]


def _load_experiment(workdir: Path) -> tuple[ResultStore, Manifest, list[RunResult], Summary]:
    """A finished (or partial) experiment's store, manifest, results and scorecard numbers."""
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
    store, manifest, results, summary = _load_experiment(args.workdir)
    if args.format == "html":
        cell_dir = partial(store.cell_dir, manifest.repo)
        sys.stdout.write(render_html(summary, results, cell_dir=cell_dir, link_root=Path.cwd()))
        return 0
    print(render_json(summary) if args.format == "json" else render_markdown(summary))
    return 0


def _badge(args: argparse.Namespace) -> int:
    data = badge(_load_summary(args.workdir))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"badge written to {args.out}: {data['message']}")
    return 0


def _tasks_from_commit(args: argparse.Namespace) -> int:
    task, assets = task_from_commit(Repo(args.repo), args.sha)
    path = write_task(task, assets, args.tasks)
    print(f"wrote {path} (+ {len(assets.hidden)} hidden test file(s), reference.patch)")
    print("the task is `reviewed: false`: read its prompt and validation, then set `reviewed: true`")
    return 0


def _selftest(args: argparse.Namespace) -> int:
    repo = Repo(args.repo)
    config = load_project_config(repo, repo.resolve(args.source))
    loaded = load_tasks(args.tasks)
    with tempfile.TemporaryDirectory(prefix="docdelta-selftest-") as tmp:
        scratch = args.workdir or Path(tmp)
        check_exposure(config.sandbox, {"repository": repo.root, "tasks directory": args.tasks})
        toolchain = [str(p) for p in config.sandbox.host_paths()]
        provider = get_provider("local", ro_paths=toolchain, env=config.sandbox.env)
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
            )
        finally:
            provider.close()
    if not reports:
        print("no change tasks to selftest")
    for report in reports:
        print(f"{'ok  ' if report.passed else 'FAIL'} {report.task}")
        for leg in report.legs:
            print(f"     {'ok  ' if leg.passed else 'FAIL'} {leg.name}{': ' + leg.note if leg.note else ''}")
    return 0 if all(r.passed for r in reports) else 2


def _judge(args: argparse.Namespace) -> int:
    """`judge` and `calibrate`: both build the judge's HTTP client here, with the key from the env."""
    tasks = [t.task for t in load_tasks(args.tasks)]
    fixtures_dir, calibration_dir = default_dirs(args.tasks)
    calibration_dir = args.calibration or calibration_dir
    judge = JudgeInfo(provider=args.provider, model=args.judge_model)
    api = JudgeAPI(endpoint_from_env(judge, args.base_url, os.environ), httpx.Client(timeout=120.0))
    try:
        if args.command == "judge":
            done = judge_workdir(ResultStore(args.workdir), tasks, api, calibration_dir)
            print(f"judge {judge}: {done.judged} run(s) judged, {done.reused} reused, {done.skipped} skipped")
            return 0
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
    return 2 if any(below_threshold(r) for r, _ in saved) else 0


def _gc(args: argparse.Namespace) -> int:
    from docdelta.sandbox import docker as docker_sandbox  # noqa: PLC0415 - Docker only when asked

    if not args.yes:
        raise ConfigError(
            "gc removes every docdelta-labelled container, network and volume on this engine, "
            "including those of runs still in progress",
            hint="stop other docdelta runs first, then pass --yes",
        )
    removed = docker_sandbox.gc(docker_sandbox.engine())
    print(f"removed {removed} docdelta container(s), network(s) and volume(s)")
    return 0


def _demo(args: argparse.Namespace) -> int:
    demo = build_demo_repo(args.workdir / "pricebook")
    request = ExperimentRequest(
        base=demo.base_sha,
        head=demo.head_sha,
        tasks_dir=demo.path / ".docdelta" / "tasks",
        repeats=args.repeats,
        seed=args.seed,
    )
    ns = argparse.Namespace(
        agent="fake",
        agent_cmd=None,
        model=None,
        sandbox=args.sandbox,
        extra_ca=None,
        allow_network=False,
        timeout=60.0,
        cap_usd=None,
        reserve_usd=0.0,
        max_turns=None,
        infra_retries=2,
        rate_limit="stop",
    )
    return _execute(Repo(demo.path), request, ns, args.workdir / "results")
