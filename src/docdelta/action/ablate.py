"""An ablation (the `ablate` input, on any event): `docdelta ablate` on the event's commit with
the job's agent, sandbox, tasks, repeats and seed, the same `ablation.ablate` the CLI calls.
The per-section table goes to the job summary and the `ablation` output; no comment and no
check (an ablation is no gate on a commit)."""

from __future__ import annotations

import shutil
from pathlib import Path

from docdelta.action.activity import Activity
from docdelta.action.job import ACTION_SANDBOX_BASE
from docdelta.action.publish import ActionContext, ActionResult
from docdelta.action.settings import ActionSettings, Output
from docdelta.action.workspace import local_commit
from docdelta.config import load_project_config
from docdelta.errors import ConfigError, InfraError
from docdelta.evaluation import Deps
from docdelta.experiment.plan import PlanTooLarge
from docdelta.git import Repo
from docdelta.improve.ablation import AblationRequest, ablate
from docdelta.improve.ablation import render as render_ablation
from docdelta.results.layout import ABLATION_FILE
from docdelta.tasks.load import export_tasks

_TRUSTED_EVENTS = ("pull_request_target", "workflow_run")
"""Events whose job holds secrets for an untrusted PR: an ablation there is refused."""


def ablate_commit(ctx: ActionContext) -> ActionResult:
    """`ablate`: refused with inputs that make it a gate or a matrix job, or on an event whose
    job holds secrets for an untrusted PR."""
    settings = ctx.settings
    assert settings.ablate is not None  # `choose` picked ablate
    if settings.repeats == "auto":
        raise ConfigError(
            "input 'repeats': an ablation runs a fixed design, but `repeats` is auto",
            hint="set `repeats:` to a number: runs per side of each effect, as one at a time (e.g. 4)",
        )
    for name, value in (
        ("plan", settings.plan),
        ("shard", settings.options.shard),
        ("merge", settings.merge),
        ("receipt", settings.receipt),
    ):
        if value:
            raise ConfigError(
                f"input '{name}' cannot be combined with `ablate`: an ablation runs in one job and "
                "checks nothing",
                hint=f"remove `{name}` from the ablation step (or `ablate` from the matrix's steps)",
            )
    if ctx.event.event in _TRUSTED_EVENTS:
        raise ConfigError(
            f"input 'ablate' on {ctx.event.event}: the ablated commit's tasks and .docdelta.yml would "
            "run beside the key in a job that exists to keep a PR's files away from it",
            hint="ablate on workflow_dispatch or push (examples/workflows/docdelta-ablate.yml)",
        )
    repo = Repo(settings.github.workspace)
    sha = local_commit(repo, ctx.event.head_sha, "ablated")
    workdir = settings.results_path / f"ablate-{sha[:12]}"
    tasks_path = (settings.tasks or load_project_config(repo, sha).tasks).strip("/")
    shutil.rmtree(workdir / "tasks", ignore_errors=True)
    request = AblationRequest(
        ref=sha,
        file=settings.ablate,
        tasks_dir=export_tasks(repo, sha, tasks_path, workdir / "tasks"),
        unit=settings.ablate_unit,
        repeats=settings.repeats,
        seed=settings.seed,
        max_runs=settings.max_runs,
        file_named="input 'ablate':",
    )
    deps = Deps(repo=repo, workdir=workdir / "results", image_base=ACTION_SANDBOX_BASE)
    try:
        report, done = ablate(request, settings.options, deps)
    except PlanTooLarge as exc:
        raise ConfigError(
            f"input 'max-runs': {exc.message}", hint="lower `repeats`, or raise `max-runs` to run it"
        ) from None
    if done.summary.broken:  # the runs measured the harness's failure: no effects are shown
        raise InfraError(
            f"no ablation: {done.summary.broken}", hint="the runs' transcripts are in results-path"
        )
    ran, reused = done.report.ran, done.report.reused
    lines = [
        render_ablation(report),
        "",
        f"Results: `{_in_workspace(settings, deps.workdir / ABLATION_FILE)}` ({ran} ran, {reused} reused).",
    ]
    if done.report.stopped:
        lines.append(f"**Stopped early:** {done.report.stopped}; the table holds the runs done so far.")
    ctx.runtime.append_summary(ctx.redact("\n".join(lines)))
    ctx.say(f"docdelta: ablation of {settings.ablate}: {ran} ran, {reused} reused")
    sections = f"{len(report.sections)} sections, {report.runs_done} runs"
    title = f"ablation of {settings.ablate} at {sha[:12]}: {sections}"
    outputs: dict[str, str] = {
        Output.ablation: report.model_dump_json(),
        Output.cost_usd: f"{done.cost_usd:.4f}",
        Output.results_path: str(settings.results_path),
    }
    return ActionResult(Activity.ablate, None, title, outputs)


def _in_workspace(settings: ActionSettings, path: Path) -> Path:
    """`path` as the workflow names it (relative to the checkout) when it is inside it."""
    return (
        path.relative_to(settings.github.workspace)
        if path.is_relative_to(settings.github.workspace)
        else path
    )
