"""`docdelta init`: adopt docdelta in a repository (`docdelta.improve.project_init`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docdelta.errors import ExitCode
from docdelta.git import Repo


def add_parser(sub: Any) -> None:
    ini = sub.add_parser(
        "init",
        help="adopt docdelta: write .docdelta.yml, the workflow and drafted tasks; print what to run",
        description="Adopt docdelta in the repository's work tree. Writes .docdelta.yml (the project "
        "config), .github/workflows/docdelta.yml (the example pull-request workflow) and, when the "
        "folder does not exist yet, .docdelta/tasks/ with answer tasks drafted from the instruction "
        "files every prompt loads (each `reviewed: false`); adds /.docdelta-results/ (the results "
        "workdir) to .gitignore. Never overwrites a file, and never re-drafts into an existing tasks "
        "folder, so a deleted draft stays deleted (`docdelta tasks draft` drafts more). Ends with the "
        "next three commands: review the drafts, check the agent, run on the last change.",
    )
    ini.add_argument("--repo", type=Path, default=Path())
    ini.add_argument("--ref", default="HEAD", help="the commit whose instruction files are drafted from")


def _init(args: argparse.Namespace) -> int:
    from docdelta.improve.project_init import (
        GITIGNORE_LINE,
        TASKS_DIR,
        WORKFLOW,
        data_branch,
        init_project,
        next_commands,
    )

    repo = Repo(args.repo)
    result = init_project(repo, args.ref)
    for path in result.written:
        print(f"wrote     {path.relative_to(repo.root)}")
    branch = data_branch(repo.root / WORKFLOW) if repo.root / WORKFLOW in result.written else None
    if branch is not None:
        print(
            f"note      the workflow records each evaluation on the {branch} branch; a pull request "
            "reuses a base arm from it only once docdelta-push.yml (examples/workflows) runs beside "
            "it, on every push to main, with the same agent and repeats (docs/action.md)"
        )
    for path in result.kept:
        print(f"kept      {path.relative_to(repo.root)} (exists; not overwritten)")
    if result.gitignored:
        print(f"added     {GITIGNORE_LINE} to .gitignore (the results workdir)")
    if result.drafts is None:
        print(f"drafted nothing: {TASKS_DIR} exists (`docdelta tasks draft` adds drafts to it)")
    elif not result.drafts.drafts:
        print(
            f"drafted 0 task(s) from {', '.join(result.sources)}: no concrete rule found; write tasks "
            f"into {TASKS_DIR} by hand (docs/tasks.md) before the next commands"
        )
    else:
        print(
            f"drafted {len(result.drafts.drafts)} task(s) from {', '.join(result.sources)}: "
            "each is `reviewed: false` until you check it"
        )
    if result.blind is not None:
        print(f"warning   {result.blind.warning()}")
    print("next:")
    for n, command in enumerate(next_commands(repo, result), 1):
        print(f"  {n}. {command}")
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"init": _init}
