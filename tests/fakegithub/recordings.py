"""Response-body templates taken from real recorded GitHub REST exchanges.

Each recording file holds exchanges of 10 lines (scheme, method, host, port, path,
request headers, request body, status, response headers, response body) separated by a
blank line. The fake server answers with copies of these bodies with its own state filled
in, so PyGithub parses the shapes GitHub really sends.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).parent / "recordings"


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str
    status: int
    body: Any
    request: Any
    """The request's JSON body (None for a GET or DELETE)."""


def exchanges(name: str) -> list[Exchange]:
    """All exchanges of one recording file (e.g. 'PullRequest.setUp')."""
    lines = (RECORDINGS / f"{name}.txt").read_text(encoding="utf-8").split("\n")
    out: list[Exchange] = []
    i = 0
    while i + 10 <= len(lines):
        rec = lines[i : i + 10]
        body = json.loads(rec[9]) if rec[9] else None  # a 204 (DELETE) records no body
        request = None if rec[6] == "None" else json.loads(rec[6])
        out.append(Exchange(rec[1], rec[4], int(rec[7]), body, request))
        i += 11  # ten lines and the blank separator
    return out


@cache
def _templates() -> dict[str, Any]:
    pulls = exchanges("PullRequest.setUp")
    return {
        "repo": pulls[0].body,
        "pull": next(e.body for e in pulls if e.path.endswith("/pulls/31")),
        "file": exchanges("PullRequest.testGetFiles")[0].body[0],
        "comment": exchanges("PullRequest.testCreateIssueComment")[0].body,
        "check_run": exchanges("CheckRun.testCreateCheckRunCompleted")[0].body,
        "status": exchanges("Commit.testCreateStatusWithAllParameters")[0].body,
        "content": exchanges("Repository.testGetContentsWithRef")[-1].body,
        "compare": exchanges("Repository.testCompare")[0].body,
        "review_comment": exchanges("PullRequest.testGetReviewComments")[0].body[0],
    }


def template(kind: str) -> dict[str, Any]:
    """A fresh deep copy of the recorded body for `kind` (repo, pull, file, comment, ...)."""
    body: dict[str, Any] = copy.deepcopy(_templates()[kind])
    return body
