"""Waiting for a maintainer (`awaiting_approval`): who let an evaluation run that holds the key,
or an `action_required` check that says what a maintainer should do.

A fork's instruction files are fed to the agent only after a user with write access applied
the approval label; a new push removes it, so every revision is read by a maintainer before
it meets the key. A same-repository PR runs for a trusted sender (`activity.trusted_actor`),
else after the same label.
"""

from __future__ import annotations

from docdelta.action.activity import Activity, trusted_actor
from docdelta.action.publish import ActionContext, ActionResult
from docdelta.action.settings import Output
from docdelta.github.port import Conclusion
from docdelta.report.render import inline

FORK_WAITING = "waiting for a maintainer to approve this fork's instruction files"
ACTOR_WAITING = "waiting for a maintainer: the event's actor has no write access"


def waiting(title: str) -> ActionResult:
    """The run's result while the check waits for a maintainer."""
    return ActionResult(
        Activity.awaiting_approval, Conclusion.action_required, title, {Output.verdict: "pending"}
    )


def fork_approver(ctx: ActionContext, number: int) -> str | None:
    """The approving maintainer, or None after publishing `action_required`."""
    event, label = ctx.event, ctx.settings.approve_label
    if event.event == "pull_request":
        reason = (
            "Pull requests from forks get no secrets on `pull_request`, so the agent cannot run here. "
            "Use the fork-safe workflow (`pull_request_target` + an approval label), see https://github.com/docdelta/docdelta/blob/main/docs/action.md"
        )
    else:
        if event.action == "synchronize" and ctx.port.remove_label(number, label):
            ctx.say(f"docdelta: new commits on the fork: approval label {label!r} removed")
        approver = ctx.port.label_approver(number, label)
        if approver is not None:
            ctx.say(f"docdelta: fork evaluation approved by @{approver}")
            return approver
        reason = (
            f"This pull request comes from a fork, and its instruction files would be fed to an agent "
            f"that holds the model API key. A maintainer with write access should read the changed "
            f"instruction files and then apply the label `{label}`; the evaluation starts then. "
            "The label is removed again when new commits are pushed."
        )
    ctx.publish(Conclusion.action_required, FORK_WAITING, reason)
    ctx.say(f"docdelta: {FORK_WAITING}")
    return None


def actor_approver(ctx: ActionContext, number: int) -> str | None:
    """Who let this same-repository pull request's evaluation run: its sender when trusted,
    else a maintainer's approve-label; None after publishing `action_required`."""
    if trusted_actor(ctx.settings, ctx.event, ctx.port):
        return ctx.event.sender
    label = ctx.settings.approve_label
    approver = ctx.port.label_approver(number, label)
    if approver is not None:
        ctx.say(f"docdelta: evaluation approved by @{approver}")
        return approver
    sender = inline(ctx.event.sender)
    ctx.publish(
        Conclusion.action_required,
        ACTOR_WAITING,
        f"@{sender} has no write access to this repository, and an evaluation runs agents that hold "
        f"the model API key. A maintainer with write access should read the changed instruction files "
        f"and then apply the label `{label}`, or list trusted actors (a bot) in the `allowed-actors` "
        "input.",
    )
    ctx.say(f"docdelta: {ACTOR_WAITING} (@{ctx.event.sender})")
    return None
