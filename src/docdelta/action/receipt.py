"""The receipt check (the `receipt` input): no agent runs. The check passes only if every
instruction file the PR changes has, at head, a receipt in the results store: an evaluation
of exactly these bytes that passed `fail-on` (`docdelta.scorecard.history.check_receipts`).
The bytes come from the checkout, or through the API for a fork's head (data only, never run)."""

from __future__ import annotations

from docdelta.action.activity import Activity
from docdelta.action.no_change import nothing_to_check
from docdelta.action.publish import ActionContext, ActionResult
from docdelta.action.settings import Output
from docdelta.action.workspace import pr_change
from docdelta.errors import ConfigError, InfraError
from docdelta.git import Repo
from docdelta.github.port import Conclusion
from docdelta.scorecard.history import History, check_receipts


def check_pr_receipts(ctx: ActionContext) -> ActionResult:
    """`receipt`: a check that passes, or names the files without a receipt; `no_change` when none changed."""
    settings = ctx.settings
    change = pr_change(
        ctx, "input 'receipt': ", "run the receipt check on pull_request / pull_request_target"
    )
    repo, detection = change.repo, change.detection
    if detection.empty:
        return nothing_to_check(ctx)
    if settings.results_store.kind == "none":
        raise ConfigError(
            "input 'receipt': the receipts are kept in the results store, but `results-store` is none",
            hint="set `results-store: branch:docdelta-results` here and in the evaluating workflow",
        )
    try:
        history = History.kept_in(ctx.results_store(), settings.results_path)
        lines, missing = check_receipts(
            history, detection.changed, lambda path: _head_bytes(ctx, repo, path), settings.fail_on
        )
    except InfraError as exc:  # a required check: an unreadable store must not pass as neutral
        raise ConfigError(f"input 'receipt': {exc.message}", hint=exc.hint) from None
    if missing:
        conclusion, title = Conclusion.failure, f"no passing evaluation of {', '.join(missing)} as merged"
    else:
        conclusion, title = Conclusion.success, "every changed instruction file has a passing evaluation"
    summary = (
        f"A receipt is an evaluation of an instruction file's exact content that passed "
        f"`fail-on: {settings.fail_on}` (kept in `{settings.results_store.kind}:"
        f"{settings.results_store.location}`).\n\n" + "\n".join(lines)
    )
    url = ctx.publish(conclusion, title, summary)
    ctx.say(f"docdelta: receipt: {conclusion.value}: {title}")
    return ActionResult(Activity.receipt, conclusion, title, {Output.check_url: url})


def _head_bytes(ctx: ActionContext, repo: Repo, path: str) -> bytes:
    """`path` at the PR's head: from the checkout when it holds the commit, else the API."""
    sha = ctx.event.head_sha
    try:
        commit = repo.resolve(sha)
    except ConfigError:  # a fork's head is not in the base checkout
        data = ctx.port.read_file(path, sha)
    else:
        data = repo.file_at(commit, path)
    if data is None:
        raise ConfigError(
            f"{path} is missing at the PR's head {sha[:12]}",
            hint="the head commit was probably force-pushed away; the run for the new head checks it",
        )
    return data
