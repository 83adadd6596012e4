"""A pull request's evaluation (`evaluate`): the sticky comment, the check (the gate's
conclusion), the job summary and the outputs.

No instruction file changed -> `no_change`; a fork or an untrusted sender without a
maintainer's approval -> `awaiting_approval` and no agent run; with the `plan` input, the job
matrix and nothing run; otherwise this job's evaluation (`job.run_job`: all of it, one shard,
or the merged shards) is published. A fork's code never runs on the runner: its instruction
files are read as data through the API and laid on the base commit (`overlay_commit`), so a
fork PR is judged on the base's code with the fork's instructions.
"""

from __future__ import annotations

from docdelta.action.activity import Activity
from docdelta.action.approval import ACTOR_WAITING, FORK_WAITING, actor_approver, fork_approver, waiting
from docdelta.action.job import run_job
from docdelta.action.no_change import nothing_to_evaluate
from docdelta.action.plan import EVALUATING, plan_job_matrix
from docdelta.action.publish import ActionContext, ActionResult, JobResults, post_comment, score_outputs
from docdelta.action.settings import ActionSettings, Output
from docdelta.action.suggest_and_audit import loop_sections
from docdelta.action.workspace import local_commit, pr_change
from docdelta.errors import ConfigError
from docdelta.git import Repo, overlay_commit
from docdelta.github.annotations import added_lines, line_annotations
from docdelta.github.links import artifacts_url, diff_links, pr_files_url
from docdelta.github.port import Conclusion, PrFile
from docdelta.instructions.models import Detection, FileStatus
from docdelta.report import render_comment_markdown
from docdelta.report.html import write_html
from docdelta.report.render import fmt_verdict
from docdelta.results.layout import REPORT_FILE
from docdelta.scorecard import stats, thresholds
from docdelta.scorecard.models import Summary
from docdelta.vocabulary import HEAD


def evaluate_pr(ctx: ActionContext) -> ActionResult:
    """`evaluate`, or `no_change`, `awaiting_approval` or `plan` before anything runs."""
    event, settings = ctx.event, ctx.settings
    change = pr_change(
        ctx, "", "run docdelta on pull_request / pull_request_target, or pass `pr-handoff` on workflow_run"
    )
    repo, number, base_sha, files = change.repo, change.number, change.base_sha, change.files
    detection = change.detection
    head_sha = event.head_sha
    if detection.empty:
        return nothing_to_evaluate(ctx)

    if event.is_fork:
        approval = fork_approver(ctx, number)
        if approval is None:
            return waiting(FORK_WAITING)
        head = _fork_head(ctx, repo, base_sha, detection)
        provenance = (
            f"Instruction files of fork `{event.head_repo or 'deleted fork'}` were read as data at "
            f"`{head_sha[:12]}` and laid on the base commit; evaluation approved by @{approval}."
        )
    else:
        approver = actor_approver(ctx, number)
        if approver is None:
            return waiting(ACTOR_WAITING)
        head = local_commit(repo, head_sha, HEAD)
        provenance = (
            ""
            if approver == event.sender
            else f"Evaluation of @{event.sender}'s event approved by @{approver}."
        )
    if settings.plan:
        return plan_job_matrix(ctx, repo, base_sha)
    if settings.options.shard is None:  # a shard's in-progress check is the plan job's
        ctx.publish(None, EVALUATING, f"Running the matrix on {head_sha[:12]}.")
    return _run_and_report(ctx, repo, base_sha, head, provenance, files)


def _fork_head(ctx: ActionContext, repo: Repo, base_sha: str, detection: Detection) -> str:
    """Base commit + the fork's instruction files, read through the API as bytes."""
    changes: dict[str, bytes | None] = {}
    for f in detection.changed:
        if f.old_path:
            changes[f.old_path] = None
        if f.status is FileStatus.deleted:
            changes[f.path] = None
            continue
        data = ctx.port.read_file(f.path, ctx.event.head_sha)
        if data is None:
            raise ConfigError(
                f"{f.path} is missing at the PR's head {ctx.event.head_sha[:12]}",
                hint="the head commit was probably force-pushed away; the run for the new head evaluates it",
            )
        changes[f.path] = data
    return overlay_commit(repo.root, base_sha, changes, "docdelta: fork instruction files")


def _run_and_report(
    ctx: ActionContext, repo: Repo, base_sha: str, head: str, provenance: str, files: list[PrFile]
) -> ActionResult:
    settings = ctx.settings
    trusted = settings.results_store.kind == "directory"  # a PR run never writes the shared branch
    job = run_job(ctx, repo, base_sha, head, settings.conditions, settings.source, trusted)
    summary = job.summary
    if settings.options.shard is not None:
        # One job of a job matrix: the aggregate job merges every shard and posts once.
        ctx.say(f"docdelta: shard {settings.options.shard} done; `docdelta merge` the shards' results")
        title = f"shard {settings.options.shard} done"
        return ActionResult(Activity.evaluate, None, title, {Output.results_path: str(settings.results_path)})
    decision = stats.gate(summary.verdict, settings.fail_on, refused=summary.verdict_refused)
    decision = thresholds.with_thresholds(decision, summary)
    conclusion = Conclusion(decision.conclusion)
    undecided = _undecided_on_prs_code(settings, summary)
    if undecided:
        conclusion = Conclusion.action_required
    # the verdict's statistical reason is in the comment's statistics fold, not here; a
    # blocking pass threshold is not, so the Gate line names it
    gate = f"**Gate** (`fail-on: {settings.fail_on}`): {conclusion.value} — {fmt_verdict(summary.verdict)}"
    if blocked := thresholds.gate_reason(summary):
        gate += f"; {blocked}"
    notes = [gate, *job.notes]
    if undecided:
        notes.append(
            f"**No verdict on the PR's own code**, which changes {summary.confounds.code_changes} file(s) "
            "besides its instruction files (so it may have stopped the hidden tests itself), and the job "
            "matrix's aggregate job runs no agent to decide on base's code: rerun this evaluation with "
            "`source: base`, or without the matrix, which does so by itself."
        )
    if provenance:
        notes.append(provenance)
    if job.stopped:
        notes.append(f"**Incomplete:** the matrix stopped early ({job.stopped}); re-run to resume.")
    files_url = pr_files_url(settings.github.server_url, settings.github.repository, ctx.event.pr_number)
    links = diff_links(files_url, [f.path for f in summary.changed])
    report = write_html(settings.results_path, summary, job.results, job.cell_dir)
    ctx.say(f"docdelta: HTML report written to {report}")
    body = render_comment_markdown(
        summary,
        diff_links=links,
        report_url=settings.report_url,
        artifacts_url=artifacts_url(settings.github.run_url),
        files_url=files_url,
        max_runs=settings.max_runs,
    )
    body += "\n" + "\n\n".join(notes)
    if job.history:
        body += f"\n\n{job.history}"
    sections, extra_cost, suggested = loop_sections(ctx, repo, base_sha, head, job, files)
    footer = (
        f"\n\n[Full report and logs]({settings.github.run_url}) · every transcript: `{REPORT_FILE}` in the "
        f"run's [artifacts]({artifacts_url(settings.github.run_url)})\n"
    )

    scorecard = body

    def composed(suggestion: str | None) -> str:  # all of it redacted: a grading failure quotes the tests
        return ctx.redact(scorecard + "".join(f"\n\n{s}" for s in [suggestion, *sections] if s) + footer)

    body = composed(suggested.section)
    outputs = score_outputs(summary, job.cost_usd + extra_cost, settings)
    if settings.comment:
        review = suggested.review
        relinked = None if review is None else lambda url: composed(review(url))
        body = post_comment(ctx, body, relinked, outputs)
    ctx.runtime.append_summary(body)
    title = _title(job)
    notes_on_lines = line_annotations(summary.instruction_usage, added_lines(files), alpha=summary.alpha)
    outputs[Output.check_url] = ctx.publish(conclusion, title, body, notes_on_lines)
    ctx.say(f"docdelta: {conclusion.value}: {decision.reason}")
    return ActionResult(Activity.evaluate, conclusion, title, outputs)


def _undecided_on_prs_code(settings: ActionSettings, summary: Summary) -> bool:
    """A job matrix's aggregate job whose merged evaluation on the PR's code gave no verdict
    (broken or saturated) while the PR changes other files than instruction files. One job
    decides such an evaluation on base's code (`evaluation.evaluate`); this job runs no agent
    and cannot, and a `neutral` check would let the PR's code move its own gate, so the check
    asks a maintainer to (`action_required`, which a required check does not accept)."""
    return (
        settings.merge is not None
        and settings.source == HEAD
        and bool(summary.broken or summary.saturated)
        and summary.confounds.code_changes > 0
    )


def _title(job: JobResults) -> str:
    """The check's title: the verdict and head's difference, or why there is none."""
    summary = job.summary
    kind = summary.verdict.kind if summary.verdict else "no verdict"
    delta = summary.head_vs_base.value
    title = f"{kind.replace('_', ' ')}: head - base {delta:+.2f}" if delta is not None else kind
    if summary.decided_on_base:
        title += " (decided on base's code: the PR's own code gave no verdict)"
    if summary.saturated:
        title = "no verdict: no score could move (every task at 0, or at 1, in every run and condition)"
    if summary.broken:
        failed = sum(summary.faults.values())
        title = f"no verdict: the evaluation is broken ({failed} runs failed for the harness's reasons)"
        if not job.results and summary.grading_failures:
            title = "no verdict: the hidden tests could not run (selftest failed; see Grading failures)"
    return title
