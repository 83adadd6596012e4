"""The environment GitHub gives the Action, as the settings tests build it."""

from __future__ import annotations

from pathlib import Path

from docdelta.action.settings import input_variable


def action_env(workspace: Path, **inputs: str) -> dict[str, str]:
    """A pull-request run in `workspace` with the fake agent, plus `inputs` (`fail_on` and
    `fail-on` both name the input `fail-on`; `agent=` replaces the fake one)."""
    env = {
        "GITHUB_REPOSITORY": "octo/repo",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(workspace / "event.json"),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_RUN_ID": "42",
        "INPUT_GITHUB-TOKEN": "ghs_token",
        "INPUT_AGENT": "fake",
    }
    env.update({input_variable(k.replace("_", "-")): v for k, v in inputs.items()})
    return env
