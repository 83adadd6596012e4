"""Action settings from the environment: every input of action.yml, parsed or named in an error."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from docdelta.errors import ConfigError
from docdelta.settings import INPUTS, ActionSettings, StoreSpec

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **inputs: str) -> dict[str, str]:
    env = {
        "GITHUB_REPOSITORY": "octo/repo",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_WORKSPACE": str(tmp_path),
        "GITHUB_RUN_ID": "42",
        "INPUT_GITHUB_TOKEN": "ghs_token",
        "INPUT_AGENT": "fake",
    }
    env.update({f"INPUT_{k.upper()}": v for k, v in inputs.items()})
    return env


def test_action_yml_maps_every_input_to_the_variable_settings_read() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "docker" and action["runs"]["image"] == "Dockerfile"
    env = action["runs"]["env"]
    assert set(action["inputs"]) == set(INPUTS)
    for name in INPUTS:
        assert env[f"INPUT_{name.upper().replace('-', '_')}"] == f"${{{{ inputs.{name} }}}}"


def test_defaults_and_explicit_values_parse(tmp_path: Path) -> None:
    s = ActionSettings.from_env(_env(tmp_path))
    assert (s.repeats, s.fail_on, s.comment, s.conditions) == (
        3,
        "regression",
        True,
        ("base", "head", "none"),
    )
    assert s.results_path == tmp_path / ".docdelta-results"
    assert s.github.run_url == "https://github.com/octo/repo/actions/runs/42"

    s = ActionSettings.from_env(
        _env(
            tmp_path, repeats="5", fail_on="never", comment="false", conditions="base, head",
            cap_usd="1.5", results_store="branch:docdelta-results", check_name="docdelta / api docs",
        )
    )  # fmt: skip
    assert (s.repeats, s.fail_on, s.comment, s.cap_usd) == (5, "never", False, 1.5)
    assert s.conditions == ("base", "head")
    assert s.results_store == StoreSpec(kind="branch", location="docdelta-results")
    auto = ActionSettings.from_env(_env(tmp_path, repeats="auto"))
    assert (auto.repeats, auto.max_repeats) == ("auto", 20)
    assert s.config_id == "docdelta/api-docs"


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"repeats": "0"}, "input 'repeats' = '0'"),
        ({"repeats": "three"}, "input 'repeats' = 'three'"),
        ({"fail_on": "sometimes"}, "input 'fail-on' = 'sometimes'"),
        ({"conditions": "head,none"}, "input 'conditions'"),
        ({"comment": "maybe"}, "input 'comment'"),
        ({"results_store": "s3:bucket"}, "input 'results-store'"),
        ({"ca_bundle": "missing.pem"}, "input 'ca-bundle'"),
        ({"agent": ""}, "input 'agent'"),
        ({"github_token": ""}, "input 'github-token' is empty"),
    ],
)
def test_a_bad_input_is_named_in_the_error(tmp_path: Path, inputs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        ActionSettings.from_env(_env(tmp_path, **inputs))
    assert message in err.value.message
    assert err.value.hint


def test_secrets_never_show_in_errors_or_reprs(tmp_path: Path) -> None:
    env = _env(tmp_path, api_key="sk-very-secret", github_token="ghs_secret_token")
    s = ActionSettings.from_env(env)
    assert "sk-very-secret" not in repr(s) and "ghs_secret_token" not in repr(s)
    assert s.secrets() == ["ghs_secret_token", "sk-very-secret"]
    with pytest.raises(ConfigError) as err:
        ActionSettings.from_env(env | {"INPUT_REPEATS": "x"})
    assert "sk-very-secret" not in str(err.value)


def test_outside_actions_the_missing_variable_is_named(tmp_path: Path) -> None:
    env = _env(tmp_path)
    del env["GITHUB_REPOSITORY"]
    with pytest.raises(ConfigError, match="GITHUB_REPOSITORY"):
        ActionSettings.from_env(env)
