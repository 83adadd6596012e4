"""The plan job of a job-matrix workflow (the `plan` input): the GitHub job matrix for this
evaluation, from the same docdelta (the action's version) and the same inputs as its run
jobs; nothing runs. The check goes in progress here, once, and the aggregate job completes it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from docdelta.action.activity import Activity
from docdelta.action.publish import ActionContext, ActionResult
from docdelta.action.settings import Output
from docdelta.config import load_project_config
from docdelta.errors import ConfigError
from docdelta.experiment.plan import plan_size
from docdelta.experiment.shard import plan_matrix
from docdelta.git import Repo
from docdelta.tasks.load import export_tasks, load_tasks

EVALUATING = "evaluating the instruction-file change"
"""The in-progress check's title, from the plan job or the one job that runs the evaluation."""


def plan_job_matrix(ctx: ActionContext, repo: Repo, base_sha: str) -> ActionResult:
    """The job matrix (the `plan` output) of the evaluation's runs, refused over `max-runs`."""
    settings = ctx.settings
    if settings.repeats == "auto":
        raise ConfigError(
            "input 'plan': a matrix runs a fixed plan, but `repeats` is auto",
            hint="set `repeats:` to a number in the plan job and in every run job",
        )
    config = load_project_config(repo, base_sha)
    tasks_path = (settings.tasks or config.tasks).strip("/")
    with tempfile.TemporaryDirectory(prefix="docdelta-plan-") as tmp:
        tasks = load_tasks(export_tasks(repo, base_sha, tasks_path, Path(tmp)))
    columns = len(settings.conditions) + len(config.arms)  # `.docdelta.yml`'s arms run in every PR
    cells = plan_size(len(tasks), columns, settings.repeats)
    if cells > settings.max_runs:
        raise ConfigError(
            f"input 'plan': the plan is {cells:,} runs ({len(tasks)} tasks x {columns} "
            f"conditions and arms x {settings.repeats} repeats), more than max-runs {settings.max_runs:,}",
            hint="lower `repeats` or `conditions`, or raise `max-runs` in every job of the workflow",
        )
    matrix = plan_matrix(cells, max_parallel=settings.max_parallel)
    title = f"{cells} runs in {matrix.jobs} jobs of up to {matrix.cells_per_job}"
    ctx.publish(None, EVALUATING, f"Running {title} on {ctx.event.head_sha[:12]}.")
    ctx.say(f"docdelta: plan: {title}")
    return ActionResult(Activity.plan, None, title, {Output.plan: matrix.model_dump_json()})


def empty_job_matrix(ctx: ActionContext) -> str:
    """The job matrix of no runs: with `evaluate: false`, the matrix's run and aggregate jobs
    are skipped."""
    return plan_matrix(0, max_parallel=ctx.settings.max_parallel).model_dump_json()
