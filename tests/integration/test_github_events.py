"""Webhook payloads (real recorded ones, copied and visibly edited) into an EventContext."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakegithub import event_path

from docdelta.errors import ConfigError
from docdelta.github.events import load_event


def edited(tmp_path: Path, name: str, edit: Any) -> Path:
    payload = json.loads(event_path(name).read_text())
    edit(payload)
    out = tmp_path / f"{name}.json"
    out.write_text(json.dumps(payload))
    return out


def test_pull_request_from_the_same_repository() -> None:
    ctx = load_event("pull_request", event_path("pull_request.opened"))

    assert (ctx.repo, ctx.pr_number, ctx.action, ctx.sender) == (
        "Codertocat/Hello-World",
        2,
        "opened",
        "Codertocat",
    )
    assert (ctx.base_ref, ctx.base_sha) == ("master", "f95f852bd8fca8fcc58a9a2d6c842781e32a215e")
    assert (ctx.head_ref, ctx.head_sha) == ("changes", "ec26c3e57ca3a959ca5aad62de7213c562f8c821")
    assert ctx.labels == ["bug"]
    assert not ctx.is_fork


def test_a_pull_request_from_a_fork_is_detected(tmp_path: Path) -> None:
    def make_fork(p: dict[str, Any]) -> None:
        p["pull_request"]["head"]["repo"]["full_name"] = "mallory/Hello-World"  # the edit

    ctx = load_event("pull_request_target", edited(tmp_path, "pull_request.synchronize", make_fork))
    assert ctx.is_fork and ctx.head_repo == "mallory/Hello-World"


def test_a_pull_request_whose_fork_was_deleted_counts_as_a_fork(tmp_path: Path) -> None:
    def delete_fork(p: dict[str, Any]) -> None:
        p["pull_request"]["head"]["repo"] = None  # the edit

    ctx = load_event("pull_request", edited(tmp_path, "pull_request.opened", delete_fork))
    assert ctx.is_fork and ctx.head_repo is None


def test_push_workflow_dispatch_and_workflow_run() -> None:
    push = load_event("push", event_path("push"))
    assert (push.head_ref, push.pr_number, push.default_branch) == ("refs/tags/simple-tag", None, "master")

    dispatch = load_event("workflow_dispatch", event_path("workflow_dispatch"))
    assert dispatch.inputs == {"name": "Mona the Octocat"} and dispatch.repo == "octo-org/octo-repo"

    run = load_event("workflow_run", event_path("workflow_run.completed"))
    assert (run.pr_number, run.head_sha) == (2, "3484a3fb816e0859fd6e1cea078d76385ff50625")


def test_a_malformed_payload_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = edited(tmp_path, "pull_request.opened", lambda p: p["pull_request"]["head"].pop("sha"))

    with pytest.raises(ConfigError) as caught:
        load_event("pull_request", path)

    assert str(path) in caught.value.message
    assert "'pull_request.head.sha'" in caught.value.message
    assert "GITHUB_EVENT_NAME" in caught.value.hint


def test_a_payload_of_another_event_is_reported(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"field 'action': field required \(3 problem\(s\) for a pull_request"
    ):
        load_event("pull_request", event_path("push"))


def test_unsupported_unreadable_and_non_json_payloads(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'issues' is not supported"):
        load_event("issues", event_path("push"))
    with pytest.raises(ConfigError, match="cannot read the event payload"):
        load_event("push", tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="is not JSON"):
        load_event("push", bad)
