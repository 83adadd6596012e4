"""`docdelta tasks` (from-commit, draft, audit: writing and auditing task files) and
`docdelta selftest` (do a change task's hidden tests tell right from wrong)."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docdelta.errors import ExitCode
from docdelta.git import Repo


def add_parser(sub: Any) -> None:
    """`tasks from-commit` (draft a change task), `tasks draft` (answer tasks from the rules of
    instruction files, or trigger tasks from on-demand files' descriptions) and `tasks audit`
    (what the suite measures)."""
    t = sub.add_parser("tasks", help="work with task files")
    tsub = t.add_subparsers(dest="tasks_command", required=True)
    fc = tsub.add_parser("from-commit", help="draft a change task from a past commit that changed tests")
    fc.add_argument("sha")
    fc.add_argument("--repo", type=Path, default=Path())
    fc.add_argument("--tasks", type=Path, default=Path(".docdelta/tasks"), help="where to write the task")
    dr = tsub.add_parser(
        "draft",
        help="draft answer tasks (`reviewed: false`) from the concrete rules of instruction files, or "
        "trigger tasks from skills' descriptions (--triggers)",
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
    dr.add_argument(
        "--triggers",
        action="store_true",
        help="draft trigger tasks (should-load prompts and near misses) from the descriptions of "
        "on-demand files (skills, slash commands, subagents) instead of answer tasks from rules",
    )
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
    from docdelta.improve.trigger_draft import draft_triggers

    lonely: list[str] = []
    if args.triggers:
        drafts, lonely = draft_triggers(Repo(args.repo), args.ref, args.sources, existing_tasks(args.out))
    else:
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
    for path in lonely:
        print(
            f"no near miss drafted for {path}: its description rules nothing out (`Not for ...`) and no "
            "other file was drafted with it; write one by hand (a prompt that sounds close, "
            "should_load: false)"
        )
    if written:  # with nothing written there is nothing new to review
        print(
            "every draft is `reviewed: false`: reword its prompt, check its gold, then set `reviewed: true` "
            f"(`docdelta run` refuses unreviewed tasks; `docdelta tasks audit --tasks {args.out}` labels "
            "each and marks the unreviewed)"
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
    from docdelta.agents import agent_class
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
            image_agent=agent_class(args.agent),
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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"tasks": _tasks, "selftest": _selftest}
