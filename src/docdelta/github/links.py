"""URLs into github.com that the comment and the check link to, built from the Actions
environment (`GITHUB_SERVER_URL`, `GITHUB_REPOSITORY`), never asked of the API."""

from __future__ import annotations

from collections.abc import Iterable

from docdelta.vocabulary import sha256_hex


def pr_files_url(server_url: str, repository: str, pr_number: int | None) -> str | None:
    """The PR's "Files changed" tab (None outside a pull request)."""
    if pr_number is None:
        return None
    return f"{server_url.rstrip('/')}/{repository}/pull/{pr_number}/files"


def diff_links(files_url: str | None, paths: Iterable[str]) -> dict[str, str]:
    """Each path's diff in the "Files changed" tab `files_url` (GitHub anchors a file's diff
    as `diff-` + the sha256 of its path)."""
    if files_url is None:
        return {}
    return {path: f"{files_url}#diff-{sha256_hex(path.encode())}" for path in paths}


def artifacts_url(run_url: str) -> str:
    """The workflow run's artifacts (where `results-path`, with report.html, is uploaded)."""
    return f"{run_url}#artifacts"
