"""The `suggest` and `audit` inputs after a PR's evaluation: a patch drafted (by rule, or by
`suggest-model`) and proven with a `head,patched` run, offered in the scorecard and as a
sticky review comment; and the task suite's audit as a folded section. The sections' words
and the review comment are `docdelta.action.suggest_loop`'s; this is where the run's clients
meet them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path

from pydantic import SecretStr

from docdelta.action.job import run_job
from docdelta.action.publish import ActionContext, JobResults
from docdelta.action.settings import ActionSettings
from docdelta.action.suggest_loop import (
    Proven,
    Published,
    ReviewTarget,
    audit_section,
    prove_suggestion,
    publish_suggestion,
)
from docdelta.agents import agent_upstream
from docdelta.config import ProjectConfig, load_project_config
from docdelta.errors import DocdeltaError, DraftRefused, InfraError
from docdelta.git import Repo
from docdelta.github.annotations import diff_hunks
from docdelta.github.comment import suggestion_marker
from docdelta.github.port import PrFile
from docdelta.improve.suggest import Suggestion
from docdelta.improve.suggest_model import REFUSED, ModelDraft, draft_for
from docdelta.results.models import Manifest, RunResult
from docdelta.tasks.models import Task
from docdelta.vocabulary import HEAD, PATCHED


def loop_sections(
    ctx: ActionContext, repo: Repo, base_sha: str, head: str, job: JobResults, files: list[PrFile]
) -> tuple[list[str], float, Published]:
    """The `audit` input's folded section, what the patched run cost, and the `suggest`
    input's section with its review comment still to post (docdelta.action.suggest_loop.Published)."""
    settings = ctx.settings
    if not (settings.suggest or settings.audit):
        return [], 0.0, Published(None)
    if job.tasks_dir is None or job.stopped or job.summary.broken:
        why = "a matrix's aggregate job" if job.tasks_dir is None else "an incomplete or broken run"
        ctx.say(f"docdelta: no suggest/audit section after {why}")
        if settings.suggest:  # it proved nothing: only an older head's review comment goes
            _publish(ctx, None, [], settled=False)
        return [], 0.0, Published(None)
    sections: list[str] = []
    spent: list[float] = []
    config = load_project_config(repo, base_sha)
    suggested = Published(None)
    if settings.suggest:
        suggested = _suggest_section(ctx, repo, (base_sha, head), config, job, files, spent)
    if settings.audit:
        tasks_path = settings.tasks or config.tasks
        sections.append(
            audit_section(
                repo,
                [base_sha, head],
                config,
                job.tasks_dir,
                tasks_path,
                [job.results_dir],
            )
        )
    return sections, sum(spent), suggested


def _ask_model(
    ctx: ActionContext,
    repo: Repo,
    job: JobResults,
    spent: list[float],
    drafted: Suggestion,
    tasks: Mapping[str, Task],
) -> ModelDraft | str:
    """`suggest-model`'s draft of what `drafted` drafts, or what the comment says instead:
    never the reply itself, and a failed call's detail only in the log (redacted of the key)."""
    settings = ctx.settings
    model = settings.suggest_model or ""
    who = f"{settings.suggest_provider}/{model}"
    try:
        got = draft_for(
            drafted, repo, job.manifest, job.results, tasks,
            provider=settings.suggest_provider, model=model,
            environ=os.environ, api_key=_draft_key(settings), base_url=settings.suggest_base_url,
        )  # fmt: skip
    except DraftRefused as exc:  # our words, never the reply's
        ctx.say(f"docdelta: suggest: {exc.message}")
        return f"{who}'s reply was refused: {exc.message.removeprefix(REFUSED)}"
    except DocdeltaError as exc:
        ctx.say(f"docdelta: suggest: the model's draft failed: {exc}")
        return f"the call to {who} failed (the job's log says why)"
    spent.append(got.cost_usd or 0.0)
    ctx.say(f"docdelta: suggest: {who} drafted a patch ({got.added_lines} lines added); proving it")
    return got


def _draft_key(settings: ActionSettings) -> SecretStr | None:
    """The `api-key` input when that key is for the draft's API (`provider`, else the agent's),
    never another API's; None leaves the draft's key to the step's env."""
    options = settings.options
    if (options.provider or agent_upstream(options.agent)) == settings.suggest_provider:
        return options.api_key
    return None


def _suggest_section(
    ctx: ActionContext,
    repo: Repo,
    refs: tuple[str, str],
    config: ProjectConfig,
    job: JobResults,
    files: list[PrFile],
    spent: list[float],
) -> Published:
    """`suggest: true`: draft, prove with a `head,patched` run (its cost appended to `spent`),
    then the scorecard's section and the sticky review comment (docdelta.action.suggest_loop)."""
    settings = ctx.settings
    assert job.tasks_dir is not None
    base_sha, head = refs

    def prove(patch: Path) -> tuple[Manifest, list[RunResult]]:
        proof = run_job(
            ctx, repo, base_sha, head, (HEAD, PATCHED), settings.source, trusted=False, proof=patch
        )
        spent.append(proof.cost_usd)
        if proof.stopped or proof.summary.broken:
            raise InfraError(f"the patched run did not finish: {proof.stopped or proof.summary.broken}")
        return proof.manifest, proof.results

    proven, settled = None, True
    try:
        ask = partial(_ask_model, ctx, repo, job, spent) if settings.suggest_model else None
        proven = prove_suggestion(
            repo, job.manifest, job.results, job.tasks_dir, settings.results_path, prove, ask
        )
    except DocdeltaError as exc:
        ctx.say(f"docdelta: suggest: no suggestion offered: {exc}")
        settled = False
    else:
        if proven is None:
            ctx.say("docdelta: suggest: head missed no gold item a patch could add: nothing to prove")
        else:
            ctx.say(f"docdelta: suggest: the patched run is in {settings.results_path}")
    return _publish(ctx, proven, files, settled)


def _publish(ctx: ActionContext, proven: Proven | None, files: list[PrFile], settled: bool) -> Published:
    """`publish_suggestion` on this PR's sticky review comment (none outside a PR)."""
    settings, number = ctx.settings, ctx.event.pr_number
    target = None
    if number is not None:
        mark = suggestion_marker(settings.config_id)
        target = ReviewTarget(ctx.port, number, ctx.event.head_sha, mark, post=settings.comment)
    return publish_suggestion(
        proven,
        diff_hunks(files),
        target,
        ctx.redact,
        say=lambda message: ctx.say(f"docdelta: {message}"),
        warn=lambda message: ctx.runtime.annotate("warning", ctx.redact(message), title="docdelta"),
        settled=settled,
    )
