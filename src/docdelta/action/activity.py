"""What one Action run does: the closed set of activities and the one place events are told apart.

`choose` maps an event to `evaluate`, `refresh` or `skip`; an evaluation can end as
`no_change` (no instruction file changed) or `awaiting_approval` (a fork without a
maintainer's label), with the `plan` input as `plan` (the job matrix written, nothing
run), and with the `receipt` input as `receipt` (the receipts checked, nothing run); with
the `ablate` input the run is an `ablate` (`docdelta ablate` on the event's commit) whatever
the event; anything docdelta could not do is `error`. Workflows branch on the output's
value, so the strings are part of the Action's contract (action.yml lists them).

Trust is decided here too: tasks and project config always come from the base commit; a
`workflow_run` learns its PR only from the untrusted job's pr.json, checked against the run's
head (`apply_handoff`); a run that holds the key starts only for a sender with write access
or named in `allowed-actors` (`trusted_actor`), else after a maintainer's approval label.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import ValidationError

from docdelta.action.settings import ActionSettings
from docdelta.errors import ConfigError
from docdelta.github.events import EventContext
from docdelta.github.port import GitHubPort
from docdelta.github.pygithub import ApiError
from docdelta.vocabulary import Frozen


class Activity(StrEnum):
    evaluate = "evaluate"
    refresh = "refresh"
    skip = "skip"
    no_change = "no_change"
    awaiting_approval = "awaiting_approval"
    plan = "plan"
    ablate = "ablate"
    receipt = "receipt"
    error = "error"


PR_EVENTS = ("pull_request", "pull_request_target")
EVALUATED_ACTIONS = ("opened", "synchronize", "reopened", "ready_for_review", "labeled")


def choose(event: EventContext, settings: ActionSettings) -> tuple[Activity, str]:
    """(activity, why): `evaluate` (or `receipt`, when that input is set), `refresh`, `skip`, or
    `ablate` on any event when the `ablate` input is set. The one place events are told apart."""
    if settings.ablate is not None:
        return Activity.ablate, f"ablation of {settings.ablate} (input 'ablate') on {event.event}"
    if event.event in PR_EVENTS or (event.event == "workflow_run" and event.pr_number is not None):
        if event.action in ("labeled", "unlabeled") and event.label != settings.approve_label:
            return (
                Activity.skip,
                f"label {event.label!r} is not the approval label {settings.approve_label!r}",
            )
        if event.event in PR_EVENTS and event.action not in EVALUATED_ACTIONS:
            return Activity.skip, f"nothing to do when a pull request is {event.action}"
        # The merge gate (`receipt`) reads the evaluations' receipts of the same events.
        return Activity.receipt if settings.receipt else Activity.evaluate, f"pull request #{event.pr_number}"
    if event.event == "workflow_run":
        return Activity.skip, "the workflow run belongs to no pull request (pass `pr-handoff` for fork PRs)"
    if event.event == "push":
        if event.default_branch and event.head_ref == f"refs/heads/{event.default_branch}":
            return Activity.refresh, f"push to the default branch {event.default_branch}"
        return Activity.skip, f"push to {event.head_ref}, not the default branch: nothing to refresh"
    if event.event == "workflow_dispatch":
        return Activity.refresh, f"manual run on {event.head_ref}"
    return Activity.skip, f"event {event.event} is not handled"


class PrHandoff(Frozen):
    """pr.json, written by the untrusted `pull_request` job for the trusted `workflow_run` job.

    It is validated here and must name the same head commit GitHub reports for the run,
    so an artifact cannot point the trusted job at another commit.
    """

    number: int
    base_sha: str
    head_sha: str


def apply_handoff(event: EventContext, path: Path) -> EventContext:
    """Fill a `workflow_run` event's PR from the untrusted job's pr.json, after checking it."""
    try:
        handoff = PrHandoff.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read the PR handoff {path}: {exc.strerror}", hint=_HANDOFF_HINT) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top level)"
        raise ConfigError(f"PR handoff {path}: {where}: {first['msg']}", hint=_HANDOFF_HINT) from None
    if handoff.head_sha != event.head_sha:
        raise ConfigError(
            f"PR handoff {path} names head {handoff.head_sha[:12]}, but the workflow run is for "
            f"{event.head_sha[:12]}",
            hint="the artifact must come from the run that triggered this workflow_run",
        )
    return event.model_copy(update={"pr_number": handoff.number, "base_sha": handoff.base_sha})


_HANDOFF_HINT = "upload pr.json ({number, base_sha, head_sha}) from the pull_request job, as in the example"


def trusted_actor(settings: ActionSettings, event: EventContext, port: GitHubPort) -> bool:
    """Whether the event's sender may start a run that holds the key: write access (asked
    through the collaborator permission API), or named in `allowed-actors` (`*`: anyone).
    Anyone who can read a repository can open a pull request from one of its branches, and
    the runner hands its job the secrets."""
    allowed = settings.allowed_actors
    return "*" in allowed or event.sender in allowed or port.can_write(event.sender)


def read_only_fork_token(event: EventContext, exc: ApiError) -> bool:
    """A fork's `pull_request` run holds a read-only token: a 403 there is GitHub's rule, not a failure."""
    return event.event == "pull_request" and event.is_fork and exc.status == 403
