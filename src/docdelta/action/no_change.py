"""A pull request that changes no instruction file: a `neutral` check says so, no comment is
posted and nothing runs (for an evaluation and for a receipt check alike)."""

from __future__ import annotations

from docdelta.action.activity import Activity
from docdelta.action.plan import empty_job_matrix
from docdelta.action.publish import ActionContext, ActionResult
from docdelta.action.settings import Output
from docdelta.github.port import Conclusion

NO_CHANGE_TITLE = "no agent instruction files changed"


def nothing_to_evaluate(ctx: ActionContext) -> ActionResult:
    """An evaluation with no instruction file to evaluate (its plan job: a job matrix of no runs)."""
    url = ctx.publish(
        Conclusion.neutral,
        NO_CHANGE_TITLE,
        "This pull request changes no agent instruction file (AGENTS.md, CLAUDE.md, Cursor or "
        "Copilot rules, ...), so there is nothing for docdelta to evaluate.",
    )
    ctx.say(f"docdelta: {NO_CHANGE_TITLE}")
    outputs: dict[str, str] = {Output.verdict: "skipped", Output.check_url: url}
    if ctx.settings.plan:
        outputs[Output.plan] = empty_job_matrix(ctx)
    return ActionResult(Activity.no_change, Conclusion.neutral, NO_CHANGE_TITLE, outputs)


def nothing_to_check(ctx: ActionContext) -> ActionResult:
    """A receipt check with no instruction file to hold a receipt."""
    url = ctx.publish(Conclusion.neutral, NO_CHANGE_TITLE, "No instruction file changed: none to check.")
    return ActionResult(Activity.no_change, Conclusion.neutral, NO_CHANGE_TITLE, {Output.check_url: url})
