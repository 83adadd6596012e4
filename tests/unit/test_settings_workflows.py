"""The example workflows say what the README promises: explicit permissions, no paths filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "workflows").glob("*.yml"))


def _load(path: Path) -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def test_there_are_the_six_examples() -> None:
    names = {"docdelta-pr", "docdelta-fork-safe", "docdelta-push", "docdelta-matrix", "docdelta-ablate"}
    names.add("docdelta-receipt")
    assert {p.stem for p in EXAMPLES} == names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_explicit_permissions_and_no_paths_filter(path: Path) -> None:
    workflow = _load(path)
    assert isinstance(workflow["permissions"], dict) and workflow["permissions"]
    for trigger in (workflow["on"] or {}).values():
        assert not (trigger or {}).get("paths"), "a paths filter leaves a required check pending forever"
    assert "concurrency" in workflow


def test_the_fork_workflow_never_checks_out_the_forks_head() -> None:
    workflow = _load(ROOT / "examples" / "workflows" / "docdelta-fork-safe.yml")
    assert set(workflow["on"]) == {"pull_request_target"}
    steps = workflow["jobs"]["evaluate"]["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert workflow["permissions"].get("contents") == "read"
