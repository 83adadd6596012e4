"""A fake GitHub REST API on 127.0.0.1 that the real PyGithub client talks to over HTTP.

It serves the endpoints the docdelta bot uses, answering with recorded GitHub bodies
(see `recordings.py`) filled in from in-memory state: pull requests and their files,
commits (file contents and trees), issue comments (each with its author), pull-request
review comments (anchored to a line of the PR's diff, refused with GitHub's 422 anywhere
else, re-anchored or outdated when the PR's head moves: `push`), check runs,
commit statuses, labels and label events, collaborator permissions, and the one GraphQL
query the bot sends, `viewer { login }`: who the token belongs to (`identity`, by default
the Actions bot that GITHUB_TOKEN posts as). GraphQL requests are logged with the path
`/graphql`. Tests drive it with real requests and then
assert on the state (`comments`, `check_runs`, `statuses`, `annotations(run_id)`) and on the
request log. A PR file's `patch` is the real diff of the PR's two commits when the test added
them (`add_commit`). Check-run annotations are kept per run and appended by each update, at
most 50 per request (more is GitHub's 422), and listed by `GET /check-runs/{id}/annotations`.

Failures are injected per route with `fail_next`: the next N matching requests get an
error status and headers (a 502, a secondary rate limit with `retry-after`, ...), either
instead of doing the work or *after* doing it (`after=True`, the case that makes a
blind POST retry duplicate things). `deny_checks` makes every check-run endpoint answer
403 as GitHub does for a token without `checks: write`; `deny_review_comments` does the same
for writing review comments (a token with `issues: write` but not `pull-requests: write`).

The server lives under a path prefix (default `/api/v3`), the GitHub Enterprise layout,
so passing `base_url` through the client is exercised too.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from fakegithub.recordings import template

BOT = {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
NOW = "2026-06-01T12:00:00Z"
PR_FILES_CAP = 3000
COMPARE_FILES_CAP = 300

Response = tuple[int, Any, dict[str, str]]


def blob_sha(data: bytes) -> str:
    """The git blob id of `data`, as GitHub reports it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # below the repository, e.g. "/issues/2/comments"
    query: dict[str, str]
    body: Any
    status: int


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    remaining: int
    status: int
    headers: dict[str, str]
    message: str
    after: bool


@dataclass
class Pull:
    number: int
    base_sha: str
    head_sha: str
    files: list[dict[str, str]]
    base_ref: str = "main"
    head_ref: str = "feature"
    labels: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


class FakeGitHub:
    """The fake server and its state; use as a context manager (`with FakeGitHub() as gh`)."""

    def __init__(
        self,
        repo: str = "Codertocat/Hello-World",
        token: str = "ghs_fake_token",
        prefix: str = "/api/v3",
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        """`tls` = (certificate chain, key): serve HTTPS, for tests of CA trust."""
        self.repo = repo
        self.tls = tls
        self.token = token
        self.prefix = prefix
        self.pulls: dict[int, Pull] = {}
        self.commits: dict[str, dict[str, bytes]] = {}
        self.merge_bases: dict[tuple[str, str], str] = {}
        self.comments: list[dict[str, Any]] = []
        self.check_runs: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self._annotations: dict[int, list[dict[str, Any]]] = {}
        self.permissions: dict[str, str] = {repo.split("/", maxsplit=1)[0]: "admin"}
        """login -> permission; the owner of a user's repository is its admin, as on GitHub."""
        self.identity: dict[str, Any] = dict(BOT)
        self.deny_checks = False
        self.deny_review_comments = False
        self.review_comments: list[dict[str, Any]] = []
        self.log: list[Request] = []
        self._faults: list[Fault] = []
        self._next_id = 1000
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Response]]] = [
            ("GET", re.compile(r"/pulls/(\d+)/files"), self._pull_files),
            ("GET", re.compile(r"/compare/([^/]+)\.\.\.([^/]+)"), self._compare),
            ("GET", re.compile(r"/git/trees/([^/]+)"), self._tree),
            ("GET", re.compile(r"/contents/(.+)"), self._contents),
            ("GET", re.compile(r"/issues/(\d+)/comments"), self._list_comments),
            ("POST", re.compile(r"/issues/(\d+)/comments"), self._create_comment),
            ("PATCH", re.compile(r"/issues/comments/(\d+)"), self._edit_comment),
            ("GET", re.compile(r"/pulls/(\d+)/comments"), self._list_review_comments),
            ("POST", re.compile(r"/pulls/(\d+)/comments"), self._create_review_comment),
            ("PATCH", re.compile(r"/pulls/comments/(\d+)"), self._edit_review_comment),
            ("DELETE", re.compile(r"/pulls/comments/(\d+)"), self._delete_review_comment),
            ("GET", re.compile(r"/commits/([^/]+)/check-runs"), self._list_check_runs),
            ("POST", re.compile(r"/check-runs"), self._create_check_run),
            ("PATCH", re.compile(r"/check-runs/(\d+)"), self._edit_check_run),
            ("GET", re.compile(r"/check-runs/(\d+)/annotations"), self._list_annotations),
            ("POST", re.compile(r"/statuses/([^/]+)"), self._create_status),
            ("GET", re.compile(r"/issues/(\d+)/labels"), self._labels),
            ("DELETE", re.compile(r"/issues/(\d+)/labels/([^/]+)"), self._remove_label),
            ("GET", re.compile(r"/issues/(\d+)/events"), self._events),
            ("GET", re.compile(r"/collaborators/([^/]+)/permission"), self._permission),
        ]

    # ---------------------------------------------------------------- setup API
    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}{self.prefix}"

    @property
    def repo_url(self) -> str:
        return f"{self.base_url}/repos/{self.repo}"

    def add_commit(self, sha: str, files: dict[str, bytes]) -> None:
        """A commit whose tree holds exactly `files` (served by contents and trees)."""
        self.commits[sha] = dict(files)

    def add_pull(
        self,
        number: int,
        base_sha: str,
        head_sha: str,
        files: list[tuple[str, str]],
        labels: tuple[str, ...] = (),
    ) -> Pull:
        """A PR whose files endpoint lists `files` as (path, GitHub status) pairs."""
        pull = Pull(
            number, base_sha, head_sha, [{"filename": p, "status": s} for p, s in files], labels=[*labels]
        )
        self.pulls[number] = pull
        return pull

    def add_comment(self, number: int, body: str, user: dict[str, Any]) -> int:
        """`user` (e.g. a participant) comments on PR `number`; returns the comment's id."""
        comment_id = self._new_id()
        self.comments.append(
            {
                "id": comment_id,
                "issue": number,
                "body": body,
                "user": user,
                "created_at": NOW,
                "updated_at": NOW,
            }
        )
        return comment_id

    def add_review_comment(
        self,
        number: int,
        body: str,
        user: dict[str, Any],
        path: str,
        line: int,
        start_line: int | None = None,
    ) -> int:
        """`user` left a review comment on `path` line `line` (to `start_line`) of the PR's head."""
        pull = self.pulls[number]
        comment_id = self._new_id()
        self.review_comments.append(
            {"id": comment_id, "pull": number, "body": body, "user": user, "path": path, "side": "RIGHT"}
            | _anchored(pull.head_sha, line, start_line)
        )
        return comment_id

    def push(self, number: int, head_sha: str) -> None:
        """New commits on the PR: its head becomes `head_sha` (added with `add_commit`), and each
        review comment follows its line as GitHub does: moved to where that line stands in the
        new diff, or outdated (`line` null) when the line changed or left the diff."""
        pull = self.pulls[number]
        for comment in self.review_comments:
            if comment["pull"] != number or comment["line"] is None:
                continue
            old = _lines(self.commits[comment["commit_id"]], comment["path"])
            new = _lines(self.commits[head_sha], comment["path"])
            moved = _follow(old, new)
            line, start = moved.get(comment["line"]), moved.get(comment["start_line"] or comment["line"])
            hunk = self._hunk_of(pull, head_sha, comment["path"], line) if line else None
            if line is None or start is None or hunk is None or start not in hunk:
                comment.update(line=None, start_line=None)
            else:
                comment.update(
                    line=line, start_line=start if comment["start_line"] else None, commit_id=head_sha
                )
        pull.head_sha = head_sha

    def apply_label(self, number: int, label: str, actor: str) -> None:
        """`actor` applies `label` to the PR: the label and a `labeled` issue event appear."""
        pull = self.pulls[number]
        if label not in pull.labels:
            pull.labels.append(label)
        pull.events.append(
            {
                "id": self._new_id(),
                "event": "labeled",
                "actor": {"login": actor, "id": 1, "type": "User"},
                "label": {"name": label, "color": "ededed"},
                "created_at": NOW,
                "commit_id": None,
            }
        )

    def fail_next(
        self,
        method: str,
        path: str,
        *,
        count: int = 1,
        status: int = 502,
        headers: dict[str, str] | None = None,
        message: str = "Server Error",
        after: bool = False,
    ) -> None:
        """The next `count` requests matching `method` and the `path` regex (below the repo) fail.

        With `after=True` the request is carried out first and only the response fails.
        """
        self._faults.append(Fault(method, re.compile(path), count, status, headers or {}, message, after))

    def requests(self, method: str | None = None, path: str | None = None) -> list[Request]:
        """Logged requests, filtered by method and a full-match path regex."""
        return [
            r
            for r in self.log
            if (method is None or r.method == method) and (path is None or re.fullmatch(path, r.path))
        ]

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> FakeGitHub:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------- dispatch
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: Any) -> Response:
        split = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        repo_root = f"{self.prefix}/repos/{self.repo}"
        # GitHub Enterprise serves GraphQL at /api/graphql beside the REST API's /api/v3.
        graphql = f"{self.prefix.removesuffix('/v3')}/graphql"
        if split.path == graphql:
            sub = "/graphql"
        elif split.path.startswith(repo_root):
            sub = split.path[len(repo_root) :]
        else:
            return 404, {"message": "Not Found"}, {}
        if headers.get("authorization") not in (f"token {self.token}", f"Bearer {self.token}"):
            return self._record(method, sub, query, body, (401, {"message": "Bad credentials"}, {}))
        with self._lock:
            fault = self._take_fault(method, sub)
            if fault and not fault.after:
                return self._record(method, sub, query, body, _fault_response(fault))
            response = self._route(method, sub, query, body)
            if fault:
                response = _fault_response(fault)
            return self._record(method, sub, query, body, response)

    def _route(self, method: str, sub: str, query: dict[str, str], body: Any) -> Response:
        if self.deny_checks and "check-runs" in sub:
            return (
                403,
                {
                    "message": "Resource not accessible by integration",
                    "documentation_url": "https://docs.github.com/rest/checks/runs#create-a-check-run",
                },
                {},
            )
        if sub == "/graphql":
            return self._graphql(method, body)
        for verb, pattern, handler in self._routes:
            match = pattern.fullmatch(sub)
            if verb == method and match:
                return handler(*(unquote(g) for g in match.groups()), query=query, body=body)
        return 404, {"message": "Not Found"}, {}

    def _take_fault(self, method: str, sub: str) -> Fault | None:
        for fault in self._faults:
            if fault.remaining > 0 and fault.method == method and fault.path.fullmatch(sub):
                fault.remaining -= 1
                return fault
        return None

    def _record(
        self, method: str, sub: str, query: dict[str, str], body: Any, response: Response
    ) -> Response:
        self.log.append(Request(method, sub, query, body, response[0]))
        return response

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _page(self, items: list[Any], sub: str, query: dict[str, str]) -> tuple[list[Any], dict[str, str]]:
        """GitHub's pagination: `per_page` (max 100) and `page`, with a `Link` header."""
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        links = []
        for rel, number in (("next", page + 1), ("last", last)):
            if page < last:
                params = urlencode({**query, "page": number, "per_page": per_page})
                links.append(f'<{self.repo_url}{sub}?{params}>; rel="{rel}"')
        return items[(page - 1) * per_page : page * per_page], {"Link": ", ".join(links)} if links else {}

    # -------------------------------------------------------------------- routes
    def _pull(self, number: str) -> Pull | None:
        return self.pulls.get(int(number))

    def _pull_files(self, number: str, *, query: dict[str, str], body: Any) -> Response:
        pull = self._pull(number)
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        files = [self._file(f) for f in pull.files[:PR_FILES_CAP]]
        page, headers = self._page(files, f"/pulls/{number}/files", query)
        return 200, page, headers

    def _file(self, entry: dict[str, str]) -> dict[str, Any]:
        item = template("file")
        item.update(entry, sha=blob_sha(entry["filename"].encode()), patch=self._patch(entry))
        item["blob_url"] = item["raw_url"] = f"https://github.com/{self.repo}/blob/x/{entry['filename']}"
        return item

    def _patch(self, entry: dict[str, str]) -> str:
        """The file's hunks as GitHub's `patch` field holds them (no ---/+++ header, 3 lines of
        context), from the PR's commits when the test added them, else a one-line stand-in."""
        pull = next((p for p in self.pulls.values() if entry in p.files), None)
        if pull is None or pull.base_sha not in self.commits or pull.head_sha not in self.commits:
            return "@@ -1 +1 @@"
        name = entry["filename"]
        old, new = (self.commits[sha].get(name, b"").decode() for sha in (pull.base_sha, pull.head_sha))
        lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3)
        return "\n".join(line for line in lines if not line.startswith(("---", "+++")))

    def _compare(self, base: str, head: str, *, query: dict[str, str], body: Any) -> Response:
        if base not in self.commits or head not in self.commits:
            return 404, {"message": "Not Found"}, {}
        result = template("compare")
        merge_base = self.merge_bases.get((base, head), base)
        result["url"] = f"{self.repo_url}/compare/{base}...{head}"
        result["base_commit"]["sha"] = base
        result["merge_base_commit"]["sha"] = merge_base
        old, new = self.commits[merge_base], self.commits[head]
        changed = sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
        result["files"] = [self._file({"filename": p, "status": "modified"}) for p in changed][
            :COMPARE_FILES_CAP
        ]
        result["commits"] = []
        return 200, result, {}

    def _tree(self, sha: str, *, query: dict[str, str], body: Any) -> Response:
        files = self.commits.get(sha)
        if files is None:
            return 404, {"message": "Not Found"}, {}
        entries = [
            {"path": p, "mode": "100644", "type": "blob", "sha": blob_sha(d), "size": len(d), "url": ""}
            for p, d in sorted(files.items())
        ]
        return (
            200,
            {"sha": sha, "url": f"{self.repo_url}/git/trees/{sha}", "tree": entries, "truncated": False},
            {},
        )

    def _contents(self, path: str, *, query: dict[str, str], body: Any) -> Response:
        ref = query.get("ref", "")
        files = self.commits.get(ref)
        if files is None:
            return 404, {"message": f"No commit found for the ref {ref}"}, {}
        if path not in files:
            return 404, {"message": "Not Found"}, {}
        data = files[path]
        item = template("content")
        encoded = base64.b64encode(data).decode()
        item.update(
            path=path,
            name=path.rsplit("/", 1)[-1],
            sha=blob_sha(data),
            size=len(data),
            content="\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)),
            url=f"{self.repo_url}/contents/{path}?ref={ref}",
        )
        return 200, item, {}

    def _graphql(self, method: str, body: Any) -> Response:
        """GitHub's GraphQL endpoint, for `query { viewer { login } }` only: errors come back
        with status 200 in an `errors` list, as GitHub sends them."""
        if method != "POST":
            return 404, {"message": "Not Found"}, {}
        query = body.get("query", "") if isinstance(body, dict) else ""
        if re.fullmatch(r"\s*(query\s*)?\{\s*viewer\s*\{\s*login\s*\}\s*\}\s*", query):
            return 200, {"data": {"viewer": {"login": self.identity["login"]}}}, {}
        return 200, {"errors": [{"message": f"the fake server does not answer {query!r}"}]}, {}

    def _comment_json(self, comment: dict[str, Any]) -> dict[str, Any]:
        item = template("comment")
        item.update(comment)
        user = comment.get("user", self.identity)
        item["user"] = {**item["user"], **user, "url": f"{self.base_url}/users/{user['login']}"}
        item.update(
            url=f"{self.repo_url}/issues/comments/{comment['id']}",
            html_url=f"https://github.com/{self.repo}/pull/{comment['issue']}#issuecomment-{comment['id']}",
            issue_url=f"{self.repo_url}/issues/{comment['issue']}",
            node_id=f"IC_{comment['id']}",
            author_association="NONE",
        )
        del item["issue"]
        return item

    def _list_comments(self, number: str, *, query: dict[str, str], body: Any) -> Response:
        items = [self._comment_json(c) for c in self.comments if c["issue"] == int(number)]
        page, headers = self._page(items, f"/issues/{number}/comments", query)
        return 200, page, headers

    def _create_comment(self, number: str, *, query: dict[str, str], body: Any) -> Response:
        comment = {"id": self._new_id(), "issue": int(number), "body": body["body"], "user": self.identity}
        comment.update(created_at=NOW, updated_at=NOW)
        self.comments.append(comment)
        return 201, self._comment_json(comment), {}

    def _edit_comment(self, comment_id: str, *, query: dict[str, str], body: Any) -> Response:
        for comment in self.comments:
            if comment["id"] == int(comment_id):
                comment["body"] = body["body"]
                return 200, self._comment_json(comment), {}
        return 404, {"message": "Not Found"}, {}

    def _hunk_of(self, pull: Pull, commit_id: str, path: str, line: int) -> set[int] | None:
        """The head-side lines of the hunk of the PR's diff (base -> `commit_id`) holding `line`."""
        if pull.base_sha not in self.commits or commit_id not in self.commits:
            return None
        old, new = (_lines(self.commits[sha], path) for sha in (pull.base_sha, commit_id))
        # The matcher `difflib.unified_diff` uses, so these hunks are the files' `patch` hunks.
        for group in difflib.SequenceMatcher(None, old, new).get_grouped_opcodes(3):
            lines = {j + 1 for _tag, _i1, _i2, j1, j2 in group for j in range(j1, j2)}
            if line in lines:
                return lines
        return None

    def _review_json(self, comment: dict[str, Any]) -> dict[str, Any]:
        item = template("review_comment")
        number, cid = comment["pull"], comment["id"]
        url = f"{self.repo_url}/pulls/comments/{cid}"
        html = f"https://github.com/{self.repo}/pull/{number}#discussion_r{cid}"
        pull_url = f"{self.repo_url}/pulls/{number}"
        user = comment["user"]
        item.update({k: v for k, v in comment.items() if k in item})
        item.update(
            url=url,
            html_url=html,
            pull_request_url=pull_url,
            node_id=f"PRRC_{cid}",
            pull_request_review_id=cid + 1_000_000,
            user={**item["user"], **user, "url": f"{self.base_url}/users/{user['login']}"},
            start_side="RIGHT" if comment["start_line"] else None,
            position=None,
            original_position=None,
            diff_hunk="",
            subject_type="line",
        )
        item["_links"] = {"self": {"href": url}, "html": {"href": html}, "pull_request": {"href": pull_url}}
        item["reactions"] = {**item["reactions"], "url": f"{url}/reactions"}
        return item

    def _list_review_comments(self, number: str, *, query: dict[str, str], body: Any) -> Response:
        items = [self._review_json(c) for c in self.review_comments if c["pull"] == int(number)]
        page, headers = self._page(items, f"/pulls/{number}/comments", query)
        return 200, page, headers

    def _create_review_comment(self, number: str, *, query: dict[str, str], body: Any) -> Response:
        pull = self._pull(number)
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        if self.deny_review_comments:
            return _DENIED_REVIEW
        missing = [f for f in ("body", "commit_id", "path", "line") if f not in (body or {})]
        if missing:
            return _unprocessable(f"missing {', '.join(missing)}")
        if body["commit_id"] not in self.commits:
            return _unprocessable(f"No commit found for SHA: {body['commit_id']}")
        if body.get("side", "RIGHT") != "RIGHT" or body.get("start_side", "RIGHT") != "RIGHT":
            return _unprocessable("the fake serves comments on the head side (RIGHT) only")
        line, start = body["line"], body.get("start_line")
        hunk = self._hunk_of(pull, body["commit_id"], body["path"], line)
        problems = [] if hunk else ["Pull request review thread line must be part of the diff"]
        if start is not None and start >= line:
            problems.append("Pull request review thread start line must precede the end line.")
        elif start is not None and (hunk is None or start not in hunk):
            problems.append(
                "Pull request review thread start line must be part of the same hunk as the line."
            )
        if problems:
            return _unprocessable(*problems)
        comment = {
            "id": self._new_id(),
            "pull": int(number),
            "body": body["body"],
            "user": self.identity,
            "path": body["path"],
            "side": "RIGHT",
        } | _anchored(body["commit_id"], line, start)
        self.review_comments.append(comment)
        return 201, self._review_json(comment), {}

    def _review_comment(self, comment_id: str) -> dict[str, Any] | None:
        return next((c for c in self.review_comments if c["id"] == int(comment_id)), None)

    def _edit_review_comment(self, comment_id: str, *, query: dict[str, str], body: Any) -> Response:
        if self.deny_review_comments:
            return _DENIED_REVIEW
        comment = self._review_comment(comment_id)
        if comment is None:
            return 404, {"message": "Not Found"}, {}
        comment.update(body=body["body"], updated_at=NOW)
        return 200, self._review_json(comment), {}

    def _delete_review_comment(self, comment_id: str, *, query: dict[str, str], body: Any) -> Response:
        if self.deny_review_comments:
            return _DENIED_REVIEW
        comment = self._review_comment(comment_id)
        if comment is None:
            return 404, {"message": "Not Found"}, {}
        self.review_comments.remove(comment)
        return 204, None, {}

    def annotations(self, run_id: int) -> list[dict[str, Any]]:
        """Every annotation posted to check run `run_id`, in order (GitHub appends each request's)."""
        return list(self._annotations.get(run_id, []))

    def _check_json(self, run: dict[str, Any]) -> dict[str, Any]:
        item = template("check_run")
        item.update({k: v for k, v in run.items() if k != "output"})
        output = {k: v for k, v in run.get("output", {}).items() if k != "annotations"}
        item["output"] = {
            "text": None,
            **output,
            "annotations_count": len(self._annotations.get(run["id"], [])),
            "annotations_url": f"{self.repo_url}/check-runs/{run['id']}/annotations",
        }
        item.update(
            url=f"{self.repo_url}/check-runs/{run['id']}",
            html_url=f"https://github.com/{self.repo}/runs/{run['id']}",
        )
        return item

    def _list_check_runs(self, ref: str, *, query: dict[str, str], body: Any) -> Response:
        runs = [r for r in self.check_runs if r["head_sha"] == ref]
        if "check_name" in query:
            runs = [r for r in runs if r["name"] == query["check_name"]]
        items = [self._check_json(r) for r in reversed(runs)]  # newest first, as GitHub lists them
        page, headers = self._page(items, f"/commits/{ref}/check-runs", query)
        return 200, {"total_count": len(items), "check_runs": page}, headers

    def _create_check_run(self, *, query: dict[str, str], body: Any) -> Response:
        invalid = _invalid_annotations(body)
        if invalid:
            return invalid
        run = {"id": self._new_id(), "status": "queued", "conclusion": None, "completed_at": None, **body}
        self.check_runs.append(run)
        self._annotations[run["id"]] = list(body.get("output", {}).get("annotations", []))
        return 201, self._check_json(run), {}

    def _edit_check_run(self, run_id: str, *, query: dict[str, str], body: Any) -> Response:
        invalid = _invalid_annotations(body)
        if invalid:
            return invalid
        for run in self.check_runs:
            if run["id"] == int(run_id):
                run.update(body)
                self._annotations[run["id"]] += body.get("output", {}).get("annotations", [])
                return 200, self._check_json(run), {}
        return 404, {"message": "Not Found"}, {}

    def _list_annotations(self, run_id: str, *, query: dict[str, str], body: Any) -> Response:
        if not any(r["id"] == int(run_id) for r in self.check_runs):
            return 404, {"message": "Not Found"}, {}
        items = [
            {"blob_href": f"https://github.com/{self.repo}/blob/x/{a['path']}", "raw_details": None, **a}
            for a in self._annotations[int(run_id)]
        ]
        page, headers = self._page(items, f"/check-runs/{run_id}/annotations", query)
        return 200, page, headers

    def _create_status(self, sha: str, *, query: dict[str, str], body: Any) -> Response:
        status = {"id": self._new_id(), "sha": sha, "context": "default", **body}
        self.statuses.append(status)
        item = template("status")
        item.update({k: v for k, v in status.items() if k != "sha"}, creator=self.identity)
        item["url"] = f"{self.repo_url}/statuses/{sha}"
        return 201, item, {}

    def _label_json(self, name: str) -> dict[str, Any]:
        return {
            "id": 1,
            "node_id": "LA_1",
            "url": f"{self.repo_url}/labels/{name}",
            "name": name,
            "color": "ededed",
            "default": False,
            "description": None,
        }

    def _labels(self, number: str, *, query: dict[str, str], body: Any) -> Response:
        pull = self._pull(number)
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        page, headers = self._page(
            [self._label_json(x) for x in pull.labels], f"/issues/{number}/labels", query
        )
        return 200, page, headers

    def _remove_label(self, number: str, name: str, *, query: dict[str, str], body: Any) -> Response:
        pull = self._pull(number)
        if pull is None or name not in pull.labels:
            return 404, {"message": "Label does not exist"}, {}
        pull.labels.remove(name)
        return 200, [self._label_json(x) for x in pull.labels], {}

    def _events(self, number: str, *, query: dict[str, str], body: Any) -> Response:
        pull = self._pull(number)
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        items = [
            {**e, "url": f"{self.repo_url}/issues/events/{e['id']}", "node_id": f"LE_{e['id']}"}
            for e in pull.events
        ]
        page, headers = self._page(items, f"/issues/{number}/events", query)
        return 200, page, headers

    def _permission(self, login: str, *, query: dict[str, str], body: Any) -> Response:
        permission = self.permissions.get(login, "none")
        role = {"none": "none", "read": "read", "write": "write", "admin": "admin"}[permission]
        user = {"login": login, "id": 2, "type": "User"}
        return 200, {"permission": permission, "role_name": role, "user": user}, {}


ANNOTATIONS_PER_REQUEST = 50
ANNOTATION_FIELDS = ("path", "start_line", "end_line", "annotation_level", "message")
ANNOTATION_LEVELS = ("notice", "warning", "failure")


def _invalid_annotations(body: Any) -> Response | None:
    """GitHub's 422 for a check-run request with more than 50 annotations or a malformed one."""
    annotations = (body or {}).get("output", {}).get("annotations", [])
    problem = None
    if len(annotations) > ANNOTATIONS_PER_REQUEST:
        problem = f"Only {ANNOTATIONS_PER_REQUEST} annotations are allowed per request"
    for a in annotations:
        missing = [f for f in ANNOTATION_FIELDS if f not in a]
        if missing:
            problem = f"annotation is missing {', '.join(missing)}"
        elif a["annotation_level"] not in ANNOTATION_LEVELS or a["start_line"] > a["end_line"]:
            problem = f"invalid annotation {a!r}"
    if problem is None:
        return None
    return 422, {"message": "Invalid request.", "errors": [problem]}, {}


_DENIED_REVIEW: Response = (
    403,
    {
        "message": "Resource not accessible by integration",
        "documentation_url": "https://docs.github.com/rest/pulls/comments#create-a-review-comment-for-a-pull-request",
    },
    {},
)


def _unprocessable(*errors: str) -> Response:
    """GitHub's 422 for a review comment it cannot place (its messages, joined as it joins them)."""
    return (
        422,
        {
            "message": "Unprocessable Entity",
            "errors": errors,
            "documentation_url": "https://docs.github.com/rest/pulls/comments#create-a-review-comment-for-a-pull-request",
            "status": "422",
        },
        {},
    )


def _anchored(commit_id: str, line: int, start_line: int | None) -> dict[str, Any]:
    """A new review comment's anchor fields: where it is now and where it was made."""
    return {
        "commit_id": commit_id,
        "original_commit_id": commit_id,
        "line": line,
        "original_line": line,
        "start_line": start_line,
        "original_start_line": start_line,
        "created_at": NOW,
        "updated_at": NOW,
    }


def _lines(files: dict[str, bytes], path: str) -> list[str]:
    return files.get(path, b"").decode().splitlines()


def _follow(old: list[str], new: list[str]) -> dict[int, int]:
    """Old line number -> new line number, for the lines left unchanged between the two."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return {a + k + 1: b + k + 1 for a, b, size in matcher.get_matching_blocks() for k in range(size)}


def _fault_response(fault: Fault) -> Response:
    return (
        fault.status,
        {"message": fault.message, "documentation_url": "https://docs.github.com/rest"},
        fault.headers,
    )


def _handler_for(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, payload, extra = fake.handle(self.command, self.path, headers, body)
            data = b"" if status == 204 else json.dumps(payload).encode()
            self.send_response(status)
            if data:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

    return Handler
