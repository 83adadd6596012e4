"""The workflows tests/e2e/test_act.py runs under act are the shipped examples, edited only
as `actworkflow.ALLOWED` says: any other edit (another agent, fewer repeats, a dropped
input) fails here, before any container starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from actworkflow import ACTION, CA_FILE, WORKFLOWS, as_run, forbidden, load

ACTION_DIR = "docdelta-action-0123abcd"
SHIPPED = sorted(WORKFLOWS.glob("*.yml"))
KEY_SECRET = "${{ secrets.ANTHROPIC_API_KEY }}"
"""The one secret the act stage sets (`act -s ANTHROPIC_API_KEY=...`)."""


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_act_runs_each_shipped_workflow_with_only_the_allowed_edits(path: Path) -> None:
    shipped = path.read_text()
    run = as_run(shipped, ACTION_DIR)
    assert forbidden(shipped, run) == []
    steps = [s for job in load(run)["jobs"].values() for s in job["steps"]]
    ours = [s for s in steps if s.get("uses") == f"./{ACTION_DIR}"]
    assert ours and all(s["with"]["ca-bundle"] == CA_FILE for s in ours)
    assert not any(s.get("uses") == ACTION for s in steps)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_key_the_act_stage_sets_is_the_one_each_shipped_workflow_reads(path: Path) -> None:
    keys = {s["with"]["api-key"] for s in _docdelta_steps(path.read_text()) if "api-key" in s.get("with", {})}
    assert keys <= {KEY_SECRET}


@pytest.mark.parametrize(
    ("edit", "reported"),
    [
        (lambda w: w.update(agent="fake"), "with.agent: 'claude_code' -> 'fake'"),
        (lambda w: w.update(repeats=1), "with.repeats: 3 -> 1"),
        (lambda w: w.pop("api-key"), "with.api-key: removed"),
        (lambda w: w.update(tasks=".docdelta/few"), "with.tasks: added '.docdelta/few'"),
        (lambda w: w.update({"ca-bundle": "other.pem"}), "with.ca-bundle: added 'other.pem'"),
    ],
    ids=["agent", "repeats", "api-key", "tasks", "ca-bundle"],
)
def test_any_other_edit_is_reported_by_path(edit: object, reported: str) -> None:
    shipped = (WORKFLOWS / "docdelta-pr.yml").read_text()
    doc = load(as_run(shipped, ACTION_DIR))
    steps = doc["jobs"]["evaluate"]["steps"]
    (index,) = (i for i, s in enumerate(steps) if s.get("uses") == f"./{ACTION_DIR}")
    edit(steps[index]["with"])  # type: ignore[operator]
    assert forbidden(shipped, yaml.safe_dump(doc)) == [f"jobs.evaluate.steps[{index}].{reported}"]


def _docdelta_steps(text: str) -> list[dict[str, Any]]:
    return [s for job in load(text)["jobs"].values() for s in job["steps"] if s.get("uses") == ACTION]
