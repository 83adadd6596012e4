"""The ablate example workflow, read statically (tests/e2e/test_act.py runs it under act):
a manual (`workflow_dispatch`) job that is the Action with `ablate`, passing only inputs
action.yml declares, its dispatch inputs' defaults valid Action settings, and uploading the
results-path it writes."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from docdelta.action.settings import ActionSettings, input_variable

ROOT = Path(__file__).resolve().parents[2]


def test_the_ablate_workflow_is_the_action_with_ablate_and_uploads_its_results(tmp_path: Path) -> None:
    workflow = yaml.safe_load((ROOT / "examples/workflows/docdelta-ablate.yml").read_text())
    dispatch = workflow[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads the key `on` as True
    steps = workflow["jobs"]["ablate"]["steps"]
    assert not [s for s in steps if "run" in s or "setup-python" in s.get("uses", "")]  # no pip, no setup
    step = next(s for s in steps if s.get("uses", "").startswith("docdelta/"))
    assert set(step["with"]) <= set(yaml.safe_load((ROOT / "action.yml").read_text())["inputs"])

    def value(text: str) -> str:  # the dispatch's defaults; secrets stand in as a value
        found = re.fullmatch(r"\$\{\{ (inputs|secrets)\.(\w+) }}", str(text))
        if found is None:
            return str(text)
        return str(dispatch[found.group(2)]["default"]) if found.group(1) == "inputs" else "a-secret"

    env = {input_variable(k): value(v) for k, v in step["with"].items()} | {
        "INPUT_GITHUB-TOKEN": "t",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_EVENT_NAME": "workflow_dispatch",
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    settings = ActionSettings.from_env(env)
    assert (settings.ablate, settings.ablate_unit, settings.repeats) == ("AGENTS.md", "heading", 4)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert tmp_path / upload["with"]["path"] == settings.results_path
    assert upload["with"]["include-hidden-files"] is True and upload["if"] == "always()"
