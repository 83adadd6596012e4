"""Refreshing the base arm (`refresh`, on a push to the default branch or a manual run): only
the base arm runs on this commit, and its results go to the results store, so later PRs on
this base reuse them."""

from __future__ import annotations

from docdelta.action.activity import Activity
from docdelta.action.job import run_job
from docdelta.action.publish import ActionContext, ActionResult, score_outputs
from docdelta.action.workspace import local_commit
from docdelta.config import load_project_config, matcher
from docdelta.git import Repo, overlay_commit
from docdelta.instructions.detect import instruction_files
from docdelta.report import render_markdown
from docdelta.vocabulary import BASE


def refresh_base_arm(ctx: ActionContext) -> ActionResult:
    """`refresh`, or `skip` with nowhere to keep the arm or no instruction file to run it on."""
    settings = ctx.settings
    if settings.results_store.kind == "none":
        return ActionResult(
            Activity.skip, title="results-store is none: there is nowhere to keep base results"
        )
    repo = Repo(settings.github.workspace)
    sha = local_commit(repo, settings.github.sha or ctx.event.head_sha, "pushed")
    docs = instruction_files(repo, sha, matcher(load_project_config(repo, sha)))
    paths = sorted({*docs.files, *docs.symlinks})
    if not paths:
        return ActionResult(
            Activity.skip, title=f"no instruction files at {sha[:12]}: no base arm to refresh"
        )
    # A stand-in head without any instruction file, so the experiment has a change to plan
    # around; only the base arm runs, and only its results are stored.
    bare = overlay_commit(repo.root, sha, dict.fromkeys(paths), "docdelta: no instruction files")
    job = run_job(ctx, repo, sha, bare, (BASE,), BASE, trusted=True, refresh=True)
    body = render_markdown(job.summary) + "\n" + "\n\n".join(job.notes) + "\n"
    ctx.runtime.append_summary(body)
    return ActionResult(
        Activity.refresh,
        title=f"base arm refreshed on {sha[:12]}",
        outputs=score_outputs(job.summary, job.cost_usd, settings),
    )
