"""Action inputs that would hand the key to an agent: refused before anything runs, naming the
input in the workflow's words."""

from __future__ import annotations

from pathlib import Path

import pytest
from actionenv import action_env

from docdelta.action.settings import ActionSettings
from docdelta.errors import ConfigError


def _env(tmp_path: Path, **inputs: str) -> dict[str, str]:
    return action_env(tmp_path, agent="command", **inputs)


def test_the_action_refuses_to_run_an_agent_unsandboxed(tmp_path: Path) -> None:
    """Under `none` the agent would be the Action's own (root) user, in its PID namespace:
    /proc/<docdelta>/environ holds INPUT_API-KEY and INPUT_GITHUB-TOKEN."""
    with pytest.raises(ConfigError) as err:
        ActionSettings.from_env(_env(tmp_path, sandbox="none", **{"api-key": "sk-secret"}))
    assert err.value.message.startswith(
        "input 'sandbox' = 'none': the Action never runs an agent unsandboxed"
    )
    assert "`sandbox: docker`" in err.value.hint and "sk-secret" not in str(err.value)
    assert ActionSettings.from_env(_env(tmp_path, sandbox="local")).options.sandbox == "local"


def test_allowed_actors_is_a_list_of_logins(tmp_path: Path) -> None:
    settings = ActionSettings.from_env(_env(tmp_path, **{"allowed-actors": " renovate[bot], alice ,"}))
    assert settings.allowed_actors == ("renovate[bot]", "alice")
    assert ActionSettings.from_env(_env(tmp_path)).allowed_actors == ()
