"""`GitHubPort` on PyGithub: the only module that imports `github`.

Retries are ours, not urllib3's (PyGithub runs with `retry=None`), because whether a
request may be repeated depends on what it does, not on its HTTP verb alone:

* reads and idempotent writes (GET, PATCH of a known comment/check, DELETE of a label,
  a commit status, which is last-write-wins per context) are repeated after a 5xx, a
  network error, or a rate limit;
* a POST that creates something (a comment, a check run) is never repeated blindly:
  after a failure we look again for what it would have created (the marker, the check
  name) and only post again if it is not there — a 502 may come after GitHub did the work.

The sticky comment (and the sticky review comment that carries a proven ```suggestion) is
the one that starts with the marker *and* was written by the token's own account: anyone
can post the marker, so the author is what makes it ours. A review comment is also tied to
its lines: on the same lines it is edited, elsewhere (the anchor moved, or GitHub outdated
it when the line changed) it is deleted and posted anew where the suggestion now applies.
Who the token is comes from GraphQL's `viewer`, which answers for a user's token and a
GitHub App installation token (GITHUB_TOKEN) alike; REST `GET /user` is 403 for the
latter and `GET /app` wants the app's JWT. Bot logins end in `[bot]`, which no user
name can, so comparing logins cannot mistake a person for the bot.

Rate limits are honoured from `retry-after` first, then `x-ratelimit-reset` when
`x-ratelimit-remaining` is 0; a wait longer than `max_wait_s` fails with a clear message.
Every failure becomes `ApiError` (a `GitHubError`) naming the operation, with the token
redacted from anything we print.
"""

from __future__ import annotations

import base64
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from github import Auth, Github, GithubException, UnknownObjectException
from github.CheckRun import CheckRun
from github.GithubObject import NotSet
from github.IssueComment import IssueComment
from github.PullRequest import PullRequest
from github.PullRequestComment import PullRequestComment

from docdelta.errors import ConfigError, GitHubError
from docdelta.github.comment import fit
from docdelta.github.port import (
    ANNOTATIONS_PER_REQUEST,
    PR_FILES_CAP,
    Annotation,
    CheckRef,
    CheckReport,
    CommentRef,
    Conclusion,
    PrFile,
    ReviewAnchor,
    ReviewCommentRef,
)
from docdelta.instructions.models import FileStatus

T = TypeVar("T")
log = logging.getLogger("docdelta.github")

DEFAULT_API_URL = "https://api.github.com"
#: GitHub limits a check run's output summary and text to this many characters each.
CHECK_TEXT_LIMIT = 65_535
#: ... and a commit status description to this many.
STATUS_DESCRIPTION_LIMIT = 140
_WRITERS = frozenset({"admin", "maintain", "write"})
_VIEWER = "query { viewer { login } }"
# GitHub's file statuses -> ours; "unchanged" entries carry no change and are dropped.
_STATUS = {
    "added": FileStatus.added,
    "copied": FileStatus.added,
    "removed": FileStatus.deleted,
    "modified": FileStatus.modified,
    "changed": FileStatus.modified,
    "renamed": FileStatus.renamed,
}
_STATUS_STATE = {
    Conclusion.success: "success",
    Conclusion.failure: "failure",
    Conclusion.neutral: "success",
    Conclusion.action_required: "pending",
    None: "pending",
}
_HINTS = {
    401: "the token is missing, invalid or expired: pass `github-token: ${{ secrets.GITHUB_TOKEN }}`",
    403: "the token lacks a permission: grant it in the workflow's `permissions:` block",
    404: "check that the repository, pull request and ref exist and that the token can see them "
    "(a force-pushed head commit is gone: re-run on the new head)",
    422: "GitHub rejected the request's content; this is likely a docdelta bug, please report it",
}


class ApiError(GitHubError):
    """A GitHub API call failed; `status` is the HTTP status (None for network errors)."""

    def __init__(self, message: str, *, status: int | None, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.status = status


class PyGithubPort:
    """The bot's operations on one repository, through PyGithub, with safe retries."""

    def __init__(
        self,
        token: str,
        repo: str,
        *,
        api_url: str = DEFAULT_API_URL,
        attempts: int = 4,
        max_wait_s: float = 600.0,
        throttle: bool = True,
        timeout_s: int = 30,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        run_key: str | None = None,
    ) -> None:
        """`api_url` is `$GITHUB_API_URL` (GitHub Enterprise: `https://HOST/api/v3`).

        `throttle` keeps GitHub's advice of spacing requests (and 1 s between writes) to
        avoid secondary rate limits; tests against a local server turn it off.
        `run_key` is written as the `external_id` of every check run this port creates, so
        the jobs of one workflow run attempt (a matrix's plan and aggregate jobs) find their
        own check run and never another run's; without one, this port's runs are its own.
        """
        if not token:
            raise ConfigError(
                "no GitHub token was given",
                hint="pass `github-token: ${{ secrets.GITHUB_TOKEN }}` to the action",
            )
        if "/" not in repo:
            raise ConfigError(
                f"repository {repo!r} is not 'owner/name'",
                hint="run inside GitHub Actions, or set GITHUB_REPOSITORY=owner/name",
            )
        self._token = token
        self._attempts = attempts
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._clock = clock
        self._gh = Github(
            base_url=api_url.rstrip("/"),
            auth=Auth.Token(token),
            retry=None,
            per_page=100,
            lazy=True,
            timeout=timeout_s,
            seconds_between_requests=0.25 if throttle else None,
            seconds_between_writes=1.0 if throttle else None,
        )
        self._repo = self._gh.get_repo(repo)
        self.repo = repo
        self._login: str | None = None
        self._run_key = run_key or uuid.uuid4().hex
        self._own_checks: dict[tuple[str, str], int] = {}

    @classmethod
    def from_actions_env(cls, token: str, env: Mapping[str, str] | None = None) -> PyGithubPort:
        """The port for the workflow's own repository: `$GITHUB_REPOSITORY` on `$GITHUB_API_URL`."""
        env = os.environ if env is None else env
        run_id = env.get("GITHUB_RUN_ID", "")
        return cls(
            token,
            env.get("GITHUB_REPOSITORY", ""),
            api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
            run_key=f"docdelta-{run_id}.{env.get('GITHUB_RUN_ATTEMPT', '1')}" if run_id else None,
        )

    # ------------------------------------------------------------------ files
    def pr_files(self, number: int, base_sha: str, head_sha: str) -> list[PrFile]:
        pull = self._repo.get_pull(number)
        files = self._call(
            f"list the files of PR #{number}",
            lambda: [
                PrFile(path=f.filename, status=_STATUS[f.status], old_path=f.previous_filename, patch=f.patch)
                for f in pull.get_files()
                if f.status in _STATUS
            ],
        )
        if len(files) < PR_FILES_CAP:
            return files
        log.info("PR #%s lists %s files (GitHub's cap); comparing the trees instead", number, len(files))
        return self._tree_diff(base_sha, head_sha)

    def _tree_diff(self, base_sha: str, head_sha: str) -> list[PrFile]:
        """The PR's changes as GitHub shows them: merge base vs head, from the full trees.

        The compare endpoint lists only 300 files, so trees are the one complete source.
        Renames show as a deletion plus an addition.
        """
        merge_base = self._call(
            f"compare {base_sha}...{head_sha}",
            lambda: self._repo.compare(base_sha, head_sha).merge_base_commit.sha,
        )
        old, new = self._blobs(merge_base), self._blobs(head_sha)
        changed = [PrFile(path=p, status=FileStatus.added) for p in new.keys() - old.keys()]
        changed += [PrFile(path=p, status=FileStatus.deleted) for p in old.keys() - new.keys()]
        same = new.keys() & old.keys()
        changed += [PrFile(path=p, status=FileStatus.modified) for p in same if new[p] != old[p]]
        return sorted(changed, key=lambda f: f.path)

    def _blobs(self, sha: str) -> dict[str, tuple[str, str]]:
        tree = self._call(f"read the tree of {sha}", lambda: self._repo.get_git_tree(sha, recursive=True))
        if tree.raw_data.get("truncated"):
            raise ApiError(
                f"the tree of {sha} is too large for GitHub's trees API",
                status=None,
                hint="run docdelta with a local checkout (`docdelta detect --repo PATH`) for this PR",
            )
        return {e.path: (e.sha, e.mode) for e in tree.tree if e.type == "blob"}

    def read_file(self, path: str, ref: str) -> bytes | None:
        def fetch() -> bytes | None:
            try:
                content = self._repo.get_contents(path, ref=ref)
            except UnknownObjectException:
                return None
            if isinstance(content, list):
                raise ApiError(f"{path} at {ref} is a directory, not a file", status=None)
            if content.type == "symlink":
                # a symlink's blob is its target path, as git stores it
                return str(content.raw_data.get("target", "")).encode()
            if content.encoding == "none":  # over 1 MB: the contents API omits the bytes
                return base64.b64decode(self._repo.get_git_blob(content.sha).content)
            return content.decoded_content

        return self._call(f"read {path} at {ref}", fetch)

    # ---------------------------------------------------------------- comment
    def upsert_comment(self, number: int, marker: str, body: str) -> CommentRef:
        _check_marker(marker, body)
        issue = self._repo.get_issue(number)

        def find() -> IssueComment | None:
            marked = [c for c in issue.get_comments() if c.body.lstrip().startswith(marker)]
            # No marked comment: nothing to tell apart, so no need to ask who we are.
            return next((c for c in marked if self._mine(c.user.login)), None)

        def edit_existing(created: bool) -> CommentRef | None:
            comment = self._call(f"list the comments of PR #{number}", find)
            if comment is None:
                return None
            if comment.body != body:
                self._call(f"edit comment {comment.id} on PR #{number}", lambda: comment.edit(body))
            return CommentRef(id=comment.id, url=comment.html_url, created=created)

        def create() -> CommentRef:
            comment = issue.create_comment(body)
            return CommentRef(id=comment.id, url=comment.html_url, created=True)

        return edit_existing(created=False) or self._call(
            f"create the docdelta comment on PR #{number}",
            create,
            reconcile=lambda: edit_existing(created=True),
        )

    def edit_comment(self, number: int, comment_id: int, body: str) -> CommentRef:
        comment = self._repo.get_issue(number).get_comment(comment_id)  # lazy: the PATCH alone
        self._call(f"edit comment {comment_id} on PR #{number}", lambda: comment.edit(body))
        return CommentRef(id=comment_id, url=comment.html_url, created=False)

    def _mine(self, login: str) -> bool:
        return login.casefold() == self.login().casefold()

    # --------------------------------------------------------- review comment
    def upsert_review_comment(
        self, number: int, marker: str, commit_id: str, anchor: ReviewAnchor, body: str
    ) -> ReviewCommentRef:
        _check_marker(marker, body)
        pull = self._repo.get_pull(number)

        def on_anchor(c: PullRequestComment) -> bool:  # GitHub nulls `line` once a comment is outdated
            return (c.path, c.line, c.start_line) == (anchor.path, anchor.line, anchor.start_line)

        mine = self._own_review_comments(pull, number, marker)
        keep = next((c for c in mine if on_anchor(c)), None)
        removed = sum(self._delete_review_comment(number, c) for c in mine if c is not keep)
        if keep is not None:
            if keep.body != body:
                self._call(f"edit review comment {keep.id} on PR #{number}", lambda: keep.edit(body))
            return ReviewCommentRef(id=keep.id, url=keep.html_url, created=False, removed=removed)

        def create() -> ReviewCommentRef:
            multi = anchor.start_line is not None
            comment = pull.create_review_comment(
                body,
                commit_id,
                anchor.path,
                line=anchor.line,
                side="RIGHT",
                start_line=anchor.start_line if anchor.start_line is not None else NotSet,
                start_side="RIGHT" if multi else NotSet,
            )
            return ReviewCommentRef(id=comment.id, url=comment.html_url, created=True, removed=removed)

        def reconcile() -> ReviewCommentRef | None:
            found = next((c for c in self._own_review_comments(pull, number, marker) if on_anchor(c)), None)
            return None if found is None else ReviewCommentRef(id=found.id, url=found.html_url, created=True)

        where = f"{anchor.path} line {anchor.line}"
        return self._call(f"post the review comment on {where} of PR #{number}", create, reconcile=reconcile)

    def delete_review_comments(self, number: int, marker: str, keep: str | None = None) -> int:
        pull = self._repo.get_pull(number)
        mine = self._own_review_comments(pull, number, marker)
        return sum(self._delete_review_comment(number, c) for c in mine if keep is None or keep not in c.body)

    def _own_review_comments(self, pull: PullRequest, number: int, marker: str) -> list[PullRequestComment]:
        def find() -> list[PullRequestComment]:
            marked = [c for c in pull.get_review_comments() if c.body.lstrip().startswith(marker)]
            return [c for c in marked if self._mine(c.user.login)]

        return self._call(f"list the review comments of PR #{number}", find)

    def _delete_review_comment(self, number: int, comment: PullRequestComment) -> bool:
        """Delete one review comment (idempotent: one already gone counts as deleted)."""
        try:
            self._call(f"delete review comment {comment.id} on PR #{number}", comment.delete)
        except ApiError as exc:
            if exc.status != 404:
                raise
        return True

    def login(self) -> str:
        """The login of the token's account (`github-actions[bot]` for GITHUB_TOKEN), asked once."""
        if self._login is None:

            def viewer() -> str:
                _headers, data = self._gh.requester.graphql_query(_VIEWER, {})
                return str(data["data"]["viewer"]["login"])

            self._login = self._call("find out whom the token belongs to (GraphQL viewer)", viewer)
        return self._login

    # ------------------------------------------------------------------ check
    def publish_check(self, report: CheckReport) -> CheckRef:
        try:
            return self._publish_check_run(report)
        except ApiError as exc:
            if exc.status != 403:
                raise
            note = (
                f"the token may not write check runs ({exc.message}); the result was posted as a "
                "commit status instead. Add `checks: write` to the workflow's `permissions:` "
                "for a check run with the full summary."
            )  # the caller tells the user, once, in its own channel (the Action: a warning)
            return self._publish_status(report, note)

    def _check_fields(self, report: CheckReport) -> tuple[dict[str, Any], dict[str, str]]:
        """The create/update request's fields and its output without annotations."""
        link = report.details_url or ""
        output = {"title": report.title, "summary": fit(report.summary, CHECK_TEXT_LIMIT, link)}
        if report.text:
            output["text"] = fit(report.text, CHECK_TEXT_LIMIT, link)
        fields: dict[str, Any] = {
            "status": "in_progress" if report.conclusion is None else "completed",
            "details_url": report.details_url or NotSet,
            "output": output,
        }
        if report.conclusion is not None:
            fields["conclusion"] = report.conclusion.value
            fields["completed_at"] = datetime.fromtimestamp(self._clock(), UTC)
        return fields, output

    def _publish_check_run(self, report: CheckReport) -> CheckRef:
        fields, output = self._check_fields(report)
        batches = [
            [_annotation(a) for a in report.annotations[i : i + ANNOTATIONS_PER_REQUEST]]
            for i in range(0, len(report.annotations), ANNOTATIONS_PER_REQUEST)
        ]
        if batches:
            fields["output"] = {**output, "annotations": batches[0]}
        what = f"check run {report.name!r} on {report.head_sha}"
        key = (report.name, report.head_sha)
        fields["external_id"] = self._run_key

        def find(lost: bool) -> CheckRun | None:
            """This run's own check run: the one it created, else (another job of the same
            workflow run attempt, such as a matrix's aggregate job) the newest one bearing
            its `external_id` if still in progress. Another evaluation's is never touched.
            `lost`: a create's answer was lost, so the run it made, completed with exactly
            these title and conclusion, is this one's."""
            run: CheckRun | None
            if key in self._own_checks:
                run = self._repo.get_check_run(self._own_checks[key])
            else:
                commit = self._repo.get_commit(report.head_sha)
                runs = commit.get_check_runs(check_name=report.name, filter="all")
                run = next((r for r in runs if r.external_id == self._run_key), None)
                if run is not None and run.status == "completed" and not (lost and _sent(run, report)):
                    run = None  # an earlier evaluation's result
            return run if run is not None and _reusable(run, report, bool(batches)) else None

        def update_existing(lost: bool = False) -> CheckRun | None:
            run = self._call(f"find the {what}", lambda: find(lost))
            if run is not None:
                self._call(f"update the {what}", lambda: run.edit(**fields))
            return run

        def create() -> CheckRun:
            return self._repo.create_check_run(report.name, report.head_sha, **fields)

        run = update_existing() or self._call(
            f"create the {what}", create, reconcile=lambda: update_existing(lost=True)
        )

        def annotate(batch: list[dict[str, Any]]) -> Callable[[], None]:
            return lambda: run.edit(output={**output, "annotations": batch})

        self._own_checks[key] = run.id
        for i, batch in enumerate(batches[1:], 2):
            # a retry after a lost answer may post one batch twice: GitHub keeps both copies
            self._call(f"annotate the {what} (batch {i} of {len(batches)})", annotate(batch))
        return CheckRef(kind="check_run", id=run.id, url=run.html_url)

    def _publish_status(self, report: CheckReport, note: str) -> CheckRef:
        prefix = {Conclusion.neutral: "Neutral: ", Conclusion.action_required: "Action required: "}
        description = (prefix.get(report.conclusion, "") if report.conclusion else "") + report.title
        if len(description) > STATUS_DESCRIPTION_LIMIT:
            description = description[: STATUS_DESCRIPTION_LIMIT - 1] + "…"
        commit = self._repo.get_commit(report.head_sha)
        status = self._call(
            f"create the commit status {report.name!r} on {report.head_sha}",
            lambda: commit.create_status(
                _STATUS_STATE[report.conclusion],
                target_url=report.details_url or NotSet,
                description=description,
                context=report.name,
            ),
        )
        return CheckRef(kind="status", id=status.id, url=report.details_url, note=note)

    # ----------------------------------------------------------------- labels
    def pr_labels(self, number: int) -> list[str]:
        issue = self._repo.get_issue(number)
        return self._call(f"list the labels of PR #{number}", lambda: [x.name for x in issue.get_labels()])

    def label_approver(self, number: int, label: str) -> str | None:
        if label not in self.pr_labels(number):
            return None
        issue = self._repo.get_issue(number)
        actors = self._call(
            f"list the events of PR #{number}",
            lambda: [
                e.actor.login
                for e in issue.get_events()
                if e.event == "labeled" and e.label is not None and e.label.name == label and e.actor
            ],
        )
        if not actors:
            return None
        return actors[-1] if self.can_write(actors[-1]) else None

    def can_write(self, login: str) -> bool:
        try:
            permission = self._call(
                f"read {login}'s permission", lambda: self._repo.get_collaborator_permission(login)
            )
        except ApiError as exc:
            if exc.status == 404:  # not a collaborator (or a bot GitHub does not list)
                return False
            raise
        return permission in _WRITERS

    def remove_label(self, number: int, label: str) -> bool:
        issue = self._repo.get_issue(number)
        try:
            self._call(f"remove label {label!r} from PR #{number}", lambda: issue.remove_from_labels(label))
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # ---------------------------------------------------------------- retries
    def _call(self, op: str, fn: Callable[[], T], *, reconcile: Callable[[], T | None] | None = None) -> T:
        """Run `fn`, retrying transient failures; with `reconcile`, `fn` is a non-idempotent
        create: after a failure `reconcile` looks for its effect before `fn` runs again."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn()
            except GithubException as exc:
                wait = self._transient_wait(op, exc.status, exc.headers or {}, _message(exc), attempt)
                if wait is None:
                    raise self._error(op, exc.status, _message(exc)) from None
                reason = f"HTTP {exc.status}"
            except OSError as exc:  # requests' connection errors and timeouts are OSErrors
                if attempt >= self._attempts:
                    raise self._error(op, None, type(exc).__name__) from None
                wait, reason = _backoff(attempt), type(exc).__name__
            log.warning("GitHub: %s failed (%s); retrying in %.0f s", op, reason, wait)
            self._sleep(wait)
            if reconcile is not None:
                found = reconcile()
                if found is not None:
                    return found

    def _transient_wait(
        self, op: str, status: int, headers: dict[str, Any], message: str, attempt: int
    ) -> float | None:
        """Seconds to wait before retrying, or None if this failure is not transient."""
        if attempt >= self._attempts:
            return None
        lower = {k.lower(): str(v) for k, v in headers.items()}
        wait: float | None = None
        if status in (403, 429):
            if "retry-after" in lower:
                wait = float(lower["retry-after"])
            elif lower.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in lower:
                wait = max(0.0, float(lower["x-ratelimit-reset"]) - self._clock()) + 1.0
            elif status == 429 or "rate limit" in message.lower():
                wait = 60.0  # GitHub: without headers, wait at least a minute
            if wait is not None and wait > self._max_wait_s:
                raise ApiError(
                    f"GitHub: {op} is rate-limited for another {wait:.0f} s",
                    status=status,
                    hint="re-run the workflow later, or use a token with a higher rate limit",
                )
        elif status >= 500:
            wait = _backoff(attempt)
        return wait

    def _error(self, op: str, status: int | None, detail: str) -> ApiError:
        where = f"HTTP {status}" if status is not None else "network error"
        message = f"GitHub: {op} failed ({where}: {detail})".replace(self._token, "***")
        return ApiError(message, status=status, hint=_HINTS.get(status or 0, ""))


def _check_marker(marker: str, body: str) -> None:
    if not marker.startswith("<!--") or not body.lstrip().startswith(marker):
        raise ValueError("a sticky comment's body must start with its hidden marker")


def _sent(run: CheckRun, report: CheckReport) -> bool:
    """Whether `run` says what `report` says (its title and conclusion)."""
    conclusion = report.conclusion.value if report.conclusion else None
    return run.output.title == report.title and run.conclusion == conclusion


def _reusable(run: CheckRun, report: CheckReport, annotated: bool) -> bool:
    """Whether `report` may be written to `run`: a completed run never goes back to in_progress,
    and GitHub appends annotations to a run's, so a run that has some takes no more (a new run does)."""
    if report.conclusion is None and run.status == "completed":
        return False
    return not (annotated and run.output.annotations_count)


def _annotation(a: Annotation) -> dict[str, Any]:
    """An annotation in the REST shape of a check run's `output.annotations[]`."""
    return {
        "path": a.path,
        "start_line": a.start_line,
        "end_line": a.end_line,
        "annotation_level": a.level.value,
        "title": a.title,
        "message": a.message,
    }


def _message(exc: GithubException) -> str:
    """GitHub's message, with the reasons a 422 lists (strings, or objects with a `message`)."""
    data = exc.data
    if isinstance(data, dict) and data.get("message"):
        listed = (str(e.get("message", "") if isinstance(e, dict) else e) for e in data.get("errors") or [])
        reasons = ", ".join(r for r in listed if r)
        return f"{data['message']}: {reasons}" if reasons else str(data["message"])
    return exc.message or "no message"


def _backoff(attempt: int) -> float:
    return float(min(2 ** (attempt - 1), 30))
