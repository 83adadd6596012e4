"""The matrix example workflow, read statically (tests/e2e/test_act.py runs it under act):
plan -> run shards -> one aggregate job, reading only fields the plan writes and passing
only inputs action.yml declares."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from docdelta.experiment.shard import MatrixPlan

ROOT = Path(__file__).resolve().parents[2]


def test_the_matrix_workflow_plans_runs_shards_and_aggregates_once() -> None:
    text = (ROOT / "examples/workflows/docdelta-matrix.yml").read_text()
    jobs = yaml.safe_load(text)["jobs"]
    inputs = set(yaml.safe_load((ROOT / "action.yml").read_text())["inputs"])
    assert set(re.findall(r"outputs\.plan\)\.(\w+)", text)) <= set(MatrixPlan.model_fields)
    run, aggregate = jobs["run"], jobs["aggregate"]
    assert run["needs"] == "plan" and run["strategy"]["fail-fast"] is False
    assert "matrix" in run["strategy"]["matrix"] and "max_parallel" in run["strategy"]["max-parallel"]
    action = next(s for s in run["steps"] if s.get("uses", "").startswith("docdelta/"))
    assert action["with"]["shard"] == "${{ matrix.shard }}"
    assert any(s.get("uses", "").startswith("actions/upload-artifact") for s in run["steps"])
    assert set(aggregate["needs"]) == {"plan", "run"} and aggregate["if"].startswith("always()")
    download = next(
        s for s in aggregate["steps"] if s.get("uses", "").startswith("actions/download-artifact")
    )
    post = next(s for s in aggregate["steps"] if s.get("uses", "").startswith("docdelta/"))
    assert post["with"]["merge"] == download["with"]["path"]
    for step in (action, post):
        assert set(step["with"]) <= inputs
