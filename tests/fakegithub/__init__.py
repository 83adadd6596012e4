"""A faithful fake GitHub REST server for tests, plus real webhook payloads to drive the Action.

`FakeGitHub` (see `server.py`) is what tests point PyGithub at; `event_path(name)` gives
a real recorded webhook payload (e.g. 'pull_request.opened') for `GITHUB_EVENT_PATH`.
"""

from __future__ import annotations

from pathlib import Path

from fakegithub.server import FakeGitHub, Request, blob_sha

EVENTS = Path(__file__).parent / "events"


def event_path(name: str) -> Path:
    """The recorded payload `events/<name>.json` (pull_request.opened, push, workflow_run.completed, ...)."""
    path = EVENTS / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no recorded event {name!r} in {EVENTS}")
    return path


__all__ = ["EVENTS", "FakeGitHub", "Request", "blob_sha", "event_path"]
