"""One job's evaluation: the trusted tasks exported from the base, then the composition root
(`evaluation.evaluate`) with the settings' options, exactly as `docdelta run` calls it, plus
the results store; in a job matrix's aggregate job, the shards merged instead (`merge`).
A finished evaluation is kept in the history (`docdelta.scorecard.history`)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from functools import partial
from pathlib import Path

from docdelta.action.merge import merged_shards
from docdelta.action.publish import ActionContext, JobResults, selftest_failed
from docdelta.config import load_project_config
from docdelta.errors import ConfigError, SelftestFailed
from docdelta.evaluation import Deps, evaluate
from docdelta.experiment.plan import ExperimentRequest, planned_repeats
from docdelta.git import Repo
from docdelta.github.wording import action_words
from docdelta.results.backends import ArmStore
from docdelta.results.models import Manifest
from docdelta.scorecard.history import History, keep
from docdelta.scorecard.models import Summary
from docdelta.tasks.load import export_tasks

ACTION_SANDBOX_BASE = "python:3.11-bookworm"
"""The agent image's base in the Action when `.docdelta.yml` names no `docker.base`: an
image every GitHub runner can pull, with the python3 and git the sandbox needs. (The
CLI's default, docdelta-base, exists only where scripts/provision-docker.sh built it.)"""


def run_job(
    ctx: ActionContext,
    repo: Repo,
    base_sha: str,
    head: str,
    conditions: tuple[str, ...],
    source: str,
    trusted: bool,
    refresh: bool = False,
    proof: Path | None = None,
) -> JobResults:
    """This job's evaluation of `head` against `base_sha`. `proof`: the suggested patch's
    `head,patched` run (`suggest: true`), in a workdir of its own, neither recorded in the
    history nor saved to the results store."""
    settings = ctx.settings
    config = load_project_config(repo, base_sha)
    tasks_path = settings.tasks or config.tasks
    workdir = settings.results_path / f"{base_sha[:12]}-{head[:12]}{'-patched' if proof else ''}"
    cache = ctx.results_store()
    if settings.merge is not None:  # a job matrix's aggregate job: where its evaluation finishes
        merged = merged_shards(settings, settings.merge, workdir / "results")
        if merged.stopped:
            return merged
        return replace(merged, history=keep_history(ctx, cache, merged.manifest, merged.summary))
    shutil.rmtree(workdir / "tasks", ignore_errors=True)
    tasks_dir = export_tasks(repo, base_sha, tasks_path.strip("/"), workdir / "tasks")
    repeats, auto = planned_repeats(settings.repeats, settings.max_repeats)
    request = ExperimentRequest(
        base=base_sha,
        head=head,
        tasks_dir=tasks_dir,
        conditions=conditions,
        repeats=repeats,
        adaptive=auto and proof is None,  # a proof has no base arm to decide on
        seed=settings.seed,
        source=source,
        patch=proof or settings.patch,
        max_runs=settings.max_runs,
        skip_base_from=None if refresh else settings.skip_base_from,
        refresh=refresh,
        config_arms=True,
        pass_threshold=settings.default_threshold,
    )
    deps = Deps(
        repo=repo,
        workdir=workdir / "results",
        cache=cache,
        save_cache=trusted and proof is None,
        image_base=ACTION_SANDBOX_BASE,
        job_summary=None if proof else ctx.runtime.append_summary,
    )
    try:
        done = evaluate(request, settings.options, deps)
    except SelftestFailed as exc:  # no agent ran: the scorecard says why, with the command's output
        return selftest_failed(ctx, deps.workdir, exc)
    if done is None:
        raise ConfigError(
            "the checkout shows no instruction-file change although GitHub lists one",
            hint="check that `.docdelta.yml` on the base branch does not exclude the changed files",
        )
    notes: list[str] = []
    if done.reused is not None:
        reuse = done.reused
        notes.append(
            f"**From cache:** the `{reuse.condition}` arm ({reuse.runs} runs) was reused from the results "
            f"store (key `{reuse.digest[:12]}`, run on `{reuse.source_commit[:12]}`); other arms ran now."
        )
        ctx.say(f"docdelta: {reuse.condition} arm reused from cache ({reuse.runs} runs)")
    if done.saved:
        ctx.say(f"docdelta: base arm saved to the results store ({settings.results_store.kind})")
    # The manifest's `repo` is the checkout's directory (`<repo>` of the result paths; on a
    # runner often just `workspace`); the scorecard names the repository as GitHub does.
    summary = done.summary.model_copy(update={"repo": settings.github.repository})
    manifest = done.experiment.manifest
    history = ""
    if not done.report.stopped and settings.options.shard is None and proof is None and not refresh:
        history = keep_history(ctx, deps.cache, manifest, summary)
    cell_dir = partial(done.store.cell_dir, manifest.repo)
    results = list(done.report.results)
    return JobResults(
        summary,
        notes,
        done.report.stopped,
        done.cost_usd,
        results,
        cell_dir,
        manifest,
        tasks_dir,
        done.store.workdir,  # `evaluation.on_base`'s own when it decided on base's code
        history,
    )


def keep_history(ctx: ActionContext, cache: ArmStore | None, manifest: Manifest, summary: Summary) -> str:
    """Record the finished evaluation, then the comment's history section. A same-repository
    PR writes the data branch (its author may push anyway); a fork's run does not (the
    fork-safe workflow's token is read-only). A store that refuses the write (a token without
    `contents: write`) costs the record, never the evaluation: a warning says so."""
    unrecorded = ctx.event.is_fork and ctx.settings.results_store.kind == "branch"
    if unrecorded:
        ctx.say(f"docdelta: {_FORK_UNRECORDED}")
    section, refused = keep(
        History.kept_in(cache, ctx.settings.results_path),
        manifest,
        summary,
        pr=ctx.event.pr_number,
        policy=ctx.settings.fail_on,
        write=not unrecorded,
    )
    if refused is not None:
        why = ctx.redact(action_words(str(refused)))
        ctx.runtime.annotate("warning", f"this evaluation was not recorded in the history: {why}")
    return section


_FORK_UNRECORDED = (
    "a fork's evaluation is not recorded on the data branch (the fork-safe workflow's token may "
    "not write; its head gets no receipt there)"
)
