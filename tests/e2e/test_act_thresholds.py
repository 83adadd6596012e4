"""Per-task pass thresholds gate the check on a real Actions runner (nektos/act), not only
in-process (tests/e2e/test_action_thresholds.py): the PR workflow as test_act.py stages it,
with `pass-threshold` set, on a PR that reverses the demo's docs change, so its head misses
tasks its base passes. The job stays green (a failed gate is the check's business) and the
check fails, even under `fail-on: never`.

The stage (the action's image, the fake GitHub, the git server, the demo repository) is
test_act.py's fixture; this file adds one workflow beside the ones it stages."""

from __future__ import annotations

from typing import Any

import yaml
from e2e.test_act import (  # the markers and timeout, and `stage`, the module's fixture the test takes
    Stage,
    _outputs,
    _payload,
    pytestmark,  # noqa: F401
    stage,  # noqa: F401
)

WORKFLOW = "docdelta-pr-threshold.yml"


def _threshold_workflow(staged: Stage, **inputs: Any) -> str:
    """The staged PR workflow with `inputs` added to the docdelta step, as WORKFLOW."""
    doc = yaml.safe_load((staged.workflows / "docdelta-pr.yml").read_text())
    # act names a job's container and volumes after the workflow and the job: a name of its
    # own keeps this run from meeting test_act.py's PR workflow when xdist runs both at once.
    doc["name"] = "docdelta-threshold"
    for job in doc["jobs"].values():
        for step in job["steps"]:
            if "with" in step and "fail-on" in step["with"]:
                step["with"].update(inputs)  # EDIT: the bar under test
    (staged.workflows / WORKFLOW).write_text(yaml.safe_dump(doc, sort_keys=False))
    return WORKFLOW


def test_a_task_under_the_bar_fails_the_check_under_fail_on_never(stage: Stage) -> None:  # noqa: F811
    demo, fake = stage.demo, stage.fake
    # The demo's change reversed: the PR's head has the old AGENTS.md, its base the better one.
    fake.add_pull(2, demo.head_sha, demo.base_sha, [("AGENTS.md", "modified")])
    workflow = _threshold_workflow(
        stage, **{"pass-threshold": 1, "fail-on": "never", "repeats": 2, "conditions": "base,head"}
    )

    log = stage.act(workflow, "pull_request", _payload("pull_request.opened", demo.head_sha, demo.base_sha))

    assert "Traceback" not in log
    (check,) = fake.check_runs
    assert (check["head_sha"], check["status"], check["conclusion"]) == (
        demo.base_sha,
        "completed",
        "failure",
    )
    assert _outputs(log)["conclusion"] == "failure"
    body = fake.comments[0]["body"]
    gate = next(line for line in body.splitlines() if line.startswith("**Gate** (`fail-on: never`): failure"))
    assert "pass threshold missed by head where base met it — " in gate
    assert "**fails the check**" in body
