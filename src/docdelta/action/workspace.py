"""The runner's checkout (`GITHUB_WORKSPACE`): the commits an activity needs from it, and a
pull request's change as the checkout and the API show it together."""

from __future__ import annotations

from dataclasses import dataclass

from docdelta.action.publish import ActionContext
from docdelta.config import load_project_config, matcher
from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.github.port import PrFile
from docdelta.instructions.detect import detect_listed
from docdelta.instructions.models import Detection
from docdelta.vocabulary import BASE


def local_commit(repo: Repo, sha: str, what: str) -> str:
    """`sha` resolved in the checkout; `what` names it (base, head, pushed…) when it is missing."""
    try:
        return repo.resolve(sha)
    except ConfigError:
        raise ConfigError(
            f"the {what} commit {sha[:12]} is not in the checkout",
            hint="use actions/checkout with `fetch-depth: 0`; if the PR was force-pushed, the run for "
            "the new head replaces this one",
        ) from None


@dataclass(frozen=True)
class PrChange:
    """What an evaluation and a receipt check both start from: the PR's checkout, number and
    base commit (fetched if need be), the files its API lists, and the instruction files
    among them, matched by the base's `.docdelta.yml`."""

    repo: Repo
    number: int
    base_sha: str
    files: list[PrFile]
    detection: Detection


def pr_change(ctx: ActionContext, prefix: str, hint: str) -> PrChange:
    """The event's `PrChange`; an event without a PR and base is a `ConfigError` (`prefix`
    names the input that asked for it)."""
    event = ctx.event
    if event.pr_number is None or not event.base_sha:
        raise ConfigError(f"{prefix}the {event.event} event names no pull request and base commit", hint=hint)
    repo = Repo(ctx.settings.github.workspace)
    base_sha = local_commit(repo, event.base_sha, BASE)
    match = matcher(load_project_config(repo, base_sha))
    files = ctx.port.pr_files(event.pr_number, base_sha, event.head_sha)
    detection = detect_listed(files, match, base_sha, event.head_sha)
    return PrChange(repo, event.pr_number, base_sha, files, detection)
