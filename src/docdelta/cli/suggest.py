"""`docdelta suggest`: an instruction-file patch drafted from the gold items a run's agents
missed (`docdelta.improve.suggest`), and optionally a model-written one."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docdelta.cli.options import (
    at_least,
)
from docdelta.cli.report import open_workdir
from docdelta.errors import DraftRefused, ExitCode
from docdelta.git import Repo
from docdelta.results.layout import SUGGESTED_PATCH
from docdelta.vocabulary import HEAD

if TYPE_CHECKING:
    from docdelta.improve.suggest import Suggestion
    from docdelta.results.models import Manifest, RunResult
    from docdelta.tasks.models import Task


def add_parser(sub: Any) -> None:
    sg = sub.add_parser("suggest", help="draft an instruction-file patch from the gold items agents missed")
    sg.add_argument("--workdir", type=Path, required=True, help="a finished `docdelta run` workdir")
    sg.add_argument("--repo", type=Path, default=Path())
    sg.add_argument("--tasks", type=Path, required=True, help="the task files the run used")
    sg.add_argument("--condition", default=HEAD, help="whose files to patch (default head)")
    sg.add_argument("--max-tasks", type=at_least(1), default=3, help="worst-scored tasks to draft for")
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


def _suggest(args: argparse.Namespace) -> int:
    from docdelta.improve.suggest import adding, change, measure, measured_line, suggest
    from docdelta.improve.suggest import write as write_suggestion
    from docdelta.tasks.load import load_tasks

    run = open_workdir(args.workdir)
    manifest, results = run.manifest, run.results
    repo = Repo(args.repo)
    tasks = {lt.task.id: lt.task for lt in load_tasks(args.tasks)}
    drafted = suggest(repo, manifest, results, tasks, condition=args.condition, max_tasks=args.max_tasks)
    if drafted is None:
        print(f"nothing to suggest: {args.condition} missed no gold item its files do not already state")
        return ExitCode.OK
    out = args.out or args.workdir / SUGGESTED_PATCH
    side = write_suggestion(drafted, out)
    print(drafted.patch, end="")
    worst = ", ".join(f"{t} ({m:.2f})" for t, m in drafted.tasks.items())
    print(f"\ndrafted for {worst}; written to {out} (reasons: {side})")
    for r in drafted.replaced:
        print(f"replaces `{r.stale}` with `{r.command}` in {r.file}:{r.line}: {r.evidence}")
    model_patch = _model_draft(args, repo, manifest, results, tasks, drafted, out) if args.model else None
    if args.measured is not None:
        from docdelta.improve.suggest_model import measured_as

        proof = open_workdir(args.measured)
        proof_manifest, proof_results = proof.manifest, proof.results
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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"suggest": _suggest}
