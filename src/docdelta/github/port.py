"""The GitHub port: exactly the operations the bot performs on one repository.

`app.py` talks to GitHub only through `GitHubPort`, so the Action glue can be tested
against the fake server (or any stand-in) and the PyGithub client stays in one module
(`github/pygithub.py`). The value types here are what crosses that boundary.

A port instance is bound to one repository (`owner/name`): the bot never acts on two.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from pydantic import Field

from docdelta.instructions.models import FileStatus
from docdelta.vocabulary import Frozen

#: GitHub's pull-request files endpoint stops at this many files; at the cap the list may
#: be incomplete, so the port falls back to comparing the two commits' trees.
PR_FILES_CAP = 3000


class Conclusion(StrEnum):
    """The check conclusions the bot uses (a subset of GitHub's)."""

    success = "success"
    failure = "failure"
    neutral = "neutral"
    action_required = "action_required"


class PrFile(Frozen):
    """One changed path of a pull request, in the project's own status vocabulary."""

    path: str
    status: FileStatus
    old_path: str | None = None
    patch: str | None = Field(
        default=None,
        description="the file's unified-diff hunks as GitHub shows them (None: binary or too big)",
    )


#: GitHub accepts at most this many annotations per check-run request; more take more updates.
ANNOTATIONS_PER_REQUEST = 50


class AnnotationLevel(StrEnum):
    """GitHub's annotation levels."""

    notice = "notice"
    warning = "warning"
    failure = "failure"


class Annotation(Frozen):
    """A note on lines of a file in the PR's "Files changed" view (a check-run annotation)."""

    path: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    level: AnnotationLevel
    title: str
    message: str


class CommentRef(Frozen):
    """The sticky comment after an upsert; `created` is False when an existing one was edited."""

    id: int
    url: str
    created: bool


class ReviewAnchor(Frozen):
    """Where a pull-request review comment sits: lines of one file on the head side (GitHub's
    `RIGHT`) of the PR's diff, the only lines GitHub accepts a review comment on."""

    path: str
    line: int = Field(ge=1, description="the last (or only) line")
    start_line: int | None = Field(default=None, ge=1, description="the first line of a multi-line comment")


class ReviewCommentRef(Frozen):
    """The sticky review comment after an upsert: `created` is False when the one already on
    the same lines was kept (edited if its body differed); `removed` counts the bot's other
    ones deleted (their anchor moved, or a lost answer left a duplicate)."""

    id: int
    url: str
    created: bool
    removed: int = 0


class CheckReport(Frozen):
    """What the bot wants a check to say. `conclusion=None` means still in progress."""

    name: str = Field(min_length=1, description="unique per config, e.g. 'docdelta' or 'docdelta / api'")
    head_sha: str = Field(min_length=1)
    conclusion: Conclusion | None = None
    title: str
    summary: str
    text: str = ""
    details_url: str | None = None
    annotations: tuple[Annotation, ...] = ()
    """Posted ANNOTATIONS_PER_REQUEST at a time: the create or update, then further updates."""


class CheckRef(Frozen):
    """Where the result went: a check run, or a commit status when checks were forbidden.

    `note` is set when the bot had to fall back, so the caller can tell the user why.
    """

    kind: str = Field(pattern="^(check_run|status)$")
    id: int | None = None
    url: str | None = None
    note: str = ""


class GitHubPort(Protocol):
    """The bot's view of one repository on GitHub (or GitHub Enterprise)."""

    def pr_files(self, number: int, base_sha: str, head_sha: str) -> list[PrFile]:
        """Every file the PR changes; at the 3,000-file cap, compare the merge base and head trees."""
        ...

    def read_file(self, path: str, ref: str) -> bytes | None:
        """A file's bytes at `ref` as data (never a checkout), or None if it is absent there."""
        ...

    def upsert_comment(self, number: int, marker: str, body: str) -> CommentRef:
        """Edit the token's own comment whose body starts with `marker`, else create one (never a
        duplicate); a comment by anyone else is never edited, whatever it starts with."""
        ...

    def edit_comment(self, number: int, comment_id: int, body: str) -> CommentRef:
        """Edit comment `comment_id` (the one `upsert_comment` just returned) in one request:
        its body, once it can name what was posted after it."""
        ...

    def upsert_review_comment(
        self, number: int, marker: str, commit_id: str, anchor: ReviewAnchor, body: str
    ) -> ReviewCommentRef:
        """The token's own review comment starting with `marker`, on `anchor` of `commit_id`:
        the one already on those lines is edited; one elsewhere (the anchor moved, or GitHub
        outdated it) is deleted and a new one posted. Anyone else's is never touched."""
        ...

    def delete_review_comments(self, number: int, marker: str, keep: str | None = None) -> int:
        """Delete the token's own review comments starting with `marker`, except those whose
        body holds `keep`; how many were deleted."""
        ...

    def publish_check(self, report: CheckReport) -> CheckRef:
        """Create or update the check run named `report.name` on `report.head_sha`;
        fall back to a commit status when the token may not write checks."""
        ...

    def pr_labels(self, number: int) -> list[str]:
        """The names of the labels currently on the PR."""
        ...

    def can_write(self, login: str) -> bool:
        """Whether `login` has write access (write, maintain or admin) to the repository."""
        ...

    def label_approver(self, number: int, label: str) -> str | None:
        """Login of the user with write access who last applied `label`, if it is on the PR."""
        ...

    def remove_label(self, number: int, label: str) -> bool:
        """Remove `label` from the PR; False if it was not there."""
        ...
