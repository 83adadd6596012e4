"""The parts of GitHub webhook payloads the bot reads, validated before use.

`load_event(name, path)` turns `$GITHUB_EVENT_NAME` + `$GITHUB_EVENT_PATH` into an
`EventContext`: one flat, trusted-shape record (repository, PR, base/head, fork or not,
labels, sender) so `app.py` decides what to do in one place. Payloads hold hundreds of
fields we ignore; the few we use are required, and a malformed payload is a `ConfigError`
naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from docdelta.errors import ConfigError

_ZERO_SHA = "0" * 40


class _Payload(BaseModel):
    """Webhook payloads grow fields all the time: ignore what we do not read."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class RepoPayload(_Payload):
    full_name: str = Field(pattern=r"^[^/\s]+/[^/\s]+$")
    default_branch: str | None = None


class Account(_Payload):
    login: str
    type: str = "User"


class Label(_Payload):
    name: str


class PullSide(_Payload):
    ref: str
    sha: str
    # null when the fork that held the head branch was deleted
    repo: RepoPayload | None = None


class PullRequest(_Payload):
    number: int
    state: str = "open"
    draft: bool = False
    base: PullSide
    head: PullSide
    labels: list[Label] = []


class PullRequestPayload(_Payload):
    action: str
    number: int
    pull_request: PullRequest
    repository: RepoPayload
    sender: Account
    label: Label | None = None


class PushPayload(_Payload):
    ref: str
    before: str
    after: str
    deleted: bool = False
    repository: RepoPayload
    sender: Account


class WorkflowDispatchPayload(_Payload):
    ref: str
    inputs: dict[str, Any] | None = None
    repository: RepoPayload
    sender: Account


class RunPullRef(_Payload):
    number: int


class WorkflowRun(_Payload):
    id: int
    event: str
    conclusion: str | None = None
    head_sha: str
    head_branch: str | None = None
    head_repository: RepoPayload | None = None
    pull_requests: list[RunPullRef] = []


class WorkflowRunPayload(_Payload):
    action: str
    workflow_run: WorkflowRun
    repository: RepoPayload
    sender: Account


class EventContext(_Payload):
    """What the bot needs from any supported event, in one shape."""

    event: str
    action: str | None = None
    repo: str
    sender: str
    pr_number: int | None = None
    base_ref: str | None = None
    base_sha: str | None = None
    head_ref: str | None = None
    head_sha: str
    head_repo: str | None = Field(default=None, description="None when the head repository is gone")
    labels: list[str] = []
    default_branch: str | None = None
    inputs: dict[str, Any] = {}
    label: str | None = Field(default=None, description="the label just added/removed (labeled events)")

    @property
    def is_fork(self) -> bool:
        """A PR whose head lives in another repository (or a deleted one) is untrusted."""
        return self.pr_number is not None and self.head_repo != self.repo


def _from_pull_request(name: str, p: PullRequestPayload) -> EventContext:
    pr = p.pull_request
    return EventContext(
        event=name,
        action=p.action,
        repo=p.repository.full_name,
        sender=p.sender.login,
        pr_number=pr.number,
        base_ref=pr.base.ref,
        base_sha=pr.base.sha,
        head_ref=pr.head.ref,
        head_sha=pr.head.sha,
        head_repo=pr.head.repo.full_name if pr.head.repo else None,
        labels=[label.name for label in pr.labels],
        default_branch=p.repository.default_branch,
        label=p.label.name if p.label else None,
    )


def _from_push(name: str, p: PushPayload) -> EventContext:
    return EventContext(
        event=name,
        repo=p.repository.full_name,
        sender=p.sender.login,
        head_ref=p.ref,
        head_sha=p.after,
        base_sha=None if p.before == _ZERO_SHA else p.before,
        head_repo=p.repository.full_name,
        default_branch=p.repository.default_branch,
    )


def _from_dispatch(name: str, p: WorkflowDispatchPayload) -> EventContext:
    # The payload carries no sha: the runner's $GITHUB_SHA is the commit; the ref stands in here.
    return EventContext(
        event=name,
        repo=p.repository.full_name,
        sender=p.sender.login,
        head_ref=p.ref,
        head_sha=p.ref,
        head_repo=p.repository.full_name,
        default_branch=p.repository.default_branch,
        inputs=p.inputs or {},
    )


def _from_workflow_run(name: str, p: WorkflowRunPayload) -> EventContext:
    run = p.workflow_run
    return EventContext(
        event=name,
        action=p.action,
        repo=p.repository.full_name,
        sender=p.sender.login,
        pr_number=run.pull_requests[0].number if run.pull_requests else None,
        head_ref=run.head_branch,
        head_sha=run.head_sha,
        head_repo=run.head_repository.full_name if run.head_repository else None,
        default_branch=p.repository.default_branch,
    )


_PARSERS: dict[str, tuple[type[_Payload], Any]] = {
    "pull_request": (PullRequestPayload, _from_pull_request),
    "pull_request_target": (PullRequestPayload, _from_pull_request),
    "push": (PushPayload, _from_push),
    "workflow_dispatch": (WorkflowDispatchPayload, _from_dispatch),
    "workflow_run": (WorkflowRunPayload, _from_workflow_run),
}

SUPPORTED_EVENTS = tuple(_PARSERS)


def load_event(event_name: str, path: Path) -> EventContext:
    """Parse the payload at `path` for `event_name` ($GITHUB_EVENT_NAME / $GITHUB_EVENT_PATH)."""
    if event_name not in _PARSERS:
        raise ConfigError(
            f"event {event_name!r} is not supported",
            hint=f"trigger docdelta on one of: {', '.join(SUPPORTED_EVENTS)}",
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"cannot read the event payload {path}: {exc.strerror}",
            hint="run inside GitHub Actions, or point GITHUB_EVENT_PATH at a saved payload",
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"event payload {path} is not JSON (line {exc.lineno}: {exc.msg})",
            hint="pass the payload file GitHub wrote, unmodified",
        ) from None
    model, convert = _PARSERS[event_name]
    try:
        payload = model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(
            f"event payload {path}: field '{field}': {first['msg'].lower()} "
            f"({len(exc.errors())} problem(s) for a {event_name} event)",
            hint=f"check that GITHUB_EVENT_NAME ({event_name}) matches the payload in {path}",
        ) from None
    context: EventContext = convert(event_name, payload)
    return context
