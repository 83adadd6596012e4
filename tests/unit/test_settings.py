"""Action settings from the environment: every input of action.yml, parsed or named in an error."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from actionenv import action_env

from docdelta.action.activity import Activity
from docdelta.action.settings import INPUTS, ActionSettings, Output, StoreSpec, input_variable
from docdelta.errors import ConfigError
from docdelta.evaluation import RunOptions
from docdelta.validate import DEFAULT_MAX_REPEATS

ROOT = Path(__file__).resolve().parents[2]


def test_action_yml_declares_every_input_settings_read_and_leaves_the_mapping_to_the_runner() -> None:
    """A container action's `runs.env` reaches the container unevaluated (`${{ inputs.x }}`
    as literal text); the runner sets INPUT_* itself, so action.yml must have no runs.env."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "docker" and action["runs"]["image"] == "Dockerfile"
    assert "env" not in action["runs"]
    assert set(action["inputs"]) == set(INPUTS)
    assert action["inputs"]["max-repeats"]["default"] == str(DEFAULT_MAX_REPEATS)


def test_inputs_are_read_under_the_names_the_runner_sets(tmp_path: Path) -> None:
    """GitHub's runner and act keep the hyphen: `api-key` arrives as INPUT_API-KEY."""
    assert input_variable("api-key") == "INPUT_API-KEY"
    env = action_env(tmp_path) | {"INPUT_API-KEY": "sk-1", "INPUT_FAIL-ON": "never", "INPUT_FAIL_ON": "bogus"}
    s = ActionSettings.from_env(env)
    assert s.options.api_key is not None and s.options.api_key.get_secret_value() == "sk-1"
    assert s.fail_on == "never"  # the underscore spelling is nobody's: ignored


def test_every_run_option_is_an_action_input_and_every_output_is_declared() -> None:
    """What `docdelta run` can set, the Action can set (RunOptions fields are inputs, but
    `progress`, which a CI log fixes to lines, and `stop_failed_alike`, which a required check
    must not have: its broken evaluation is the documented neutral); what the Action writes,
    action.yml declares."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    mapped = {v.removeprefix("options.") for v in INPUTS.values() if v.startswith("options.")}
    assert set(RunOptions.model_fields) - mapped == {"progress", "stop_failed_alike"}
    request_knobs = {"source", "patch", "repeats", "max-repeats", "seed", "conditions"}
    assert request_knobs <= set(INPUTS)
    assert set(action["outputs"]) == {o.value for o in Output}
    for activity in Activity:  # the activity output's description lists every value
        assert activity.value in action["outputs"]["activity"]["description"]


def test_run_limits_and_the_key_source_parse_from_inputs(tmp_path: Path) -> None:
    s = ActionSettings.from_env(
        action_env(
            tmp_path, max_turns="7", reserve_usd="0.25", infra_retries="0", rate_limit="wait",
            source="base", api_key="sk-xyz", provider="anthropic", timeout="90",
        )
    )  # fmt: skip
    o = s.options
    assert (o.max_turns, o.reserve_usd, o.infra_retries, o.rate_limit, o.timeout_s) == (
        7,
        0.25,
        0,
        "wait",
        90,
    )
    assert o.api_key is not None and o.api_key.get_secret_value() == "sk-xyz" and o.provider == "anthropic"
    assert (s.source, o.sandbox) == ("base", "docker")
    assert "sk-xyz" not in repr(s) and s.secrets() == ["ghs_token", "sk-xyz"]


def test_a_patch_input_is_a_file_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "fix.diff").write_text("--- a/AGENTS.md\n+++ b/AGENTS.md\n")
    s = ActionSettings.from_env(action_env(tmp_path, patch="fix.diff", conditions="base,head,patched"))
    assert s.patch == tmp_path / "fix.diff" and s.conditions == ("base", "head", "patched")
    with pytest.raises(ConfigError, match=r"input 'patch'.*is not a readable file"):
        ActionSettings.from_env(action_env(tmp_path, patch="missing.diff"))


def test_defaults_and_explicit_values_parse(tmp_path: Path) -> None:
    s = ActionSettings.from_env(action_env(tmp_path))
    assert (s.repeats, s.fail_on, s.comment, s.conditions) == (
        "auto",
        "regression",
        True,
        ("base", "head", "none"),
    )
    assert s.results_path == tmp_path / ".docdelta-results"
    assert s.github.run_url == "https://github.com/octo/repo/actions/runs/42"

    s = ActionSettings.from_env(
        action_env(
            tmp_path, repeats="5", fail_on="never", comment="false", conditions="base, head",
            cap_usd="1.5", results_store="branch:docdelta-results", check_name="docdelta / api docs",
        )
    )  # fmt: skip
    assert (s.repeats, s.fail_on, s.comment, s.options.cap_usd) == (5, "never", False, 1.5)
    assert s.conditions == ("base", "head")
    assert s.results_store == StoreSpec(kind="branch", location="docdelta-results")
    auto = ActionSettings.from_env(action_env(tmp_path, repeats="auto"))
    assert (auto.repeats, auto.max_repeats) == ("auto", DEFAULT_MAX_REPEATS)
    capped = ActionSettings.from_env(action_env(tmp_path, repeats="auto", max_repeats="12"))
    assert (capped.repeats, capped.max_repeats) == ("auto", 12)
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
        ({"max_turns": "0"}, "input 'max-turns' = '0'"),
        ({"repeats": "auto", "max_repeats": "1"}, "input 'max-repeats' = '1'"),
        ({"rate_limit": "sometimes"}, "input 'rate-limit' = 'sometimes'"),
        ({"infra_retries": "-1"}, "input 'infra-retries'"),
        ({"sandbox": "vm"}, "input 'sandbox' = 'vm'"),
        ({"agent": " "}, "input 'agent' is empty"),
        ({"ca_bundle": "missing.pem"}, "input 'ca-bundle'"),
        ({"agent": ""}, "input 'agent'"),
        ({"github_token": ""}, "input 'github-token' is empty"),
        (
            {"suggest_model": "gpt-4o-mini"},
            "input 'suggest-model' = 'gpt-4o-mini' is set, but 'suggest' is not",
        ),
        ({"suggest": "true", "suggest_provider": "gemini"}, "input 'suggest-provider' = 'gemini'"),
        ({"suggest": "true", "suggest_base_url": "ftp://x"}, "input 'suggest-base-url' = 'ftp://x'"),
    ],
)
def test_a_bad_input_is_named_in_the_error(tmp_path: Path, inputs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        ActionSettings.from_env(action_env(tmp_path, **inputs))
    assert message in err.value.message
    assert err.value.hint


def test_secrets_never_show_in_errors_or_reprs(tmp_path: Path) -> None:
    env = action_env(tmp_path, api_key="sk-very-secret", github_token="ghs_secret_token")
    s = ActionSettings.from_env(env)
    assert "sk-very-secret" not in repr(s) and "ghs_secret_token" not in repr(s)
    assert s.secrets() == ["ghs_secret_token", "sk-very-secret"]
    with pytest.raises(ConfigError) as err:
        ActionSettings.from_env(env | {"INPUT_REPEATS": "x"})
    assert "sk-very-secret" not in str(err.value)


def test_outside_actions_the_missing_variable_is_named(tmp_path: Path) -> None:
    env = action_env(tmp_path)
    del env["GITHUB_REPOSITORY"]
    with pytest.raises(ConfigError, match="GITHUB_REPOSITORY"):
        ActionSettings.from_env(env)


def test_the_model_draft_inputs_parse_and_default_to_no_model(tmp_path: Path) -> None:
    plain = ActionSettings.from_env(action_env(tmp_path, suggest="true"))
    assert (plain.suggest_model, plain.suggest_provider, plain.suggest_base_url) == (None, "openai", None)
    asked = ActionSettings.from_env(
        action_env(
            tmp_path,
            suggest="true",
            suggest_model="claude-haiku-4-5",
            suggest_provider="anthropic",
            suggest_base_url="https://llm.example.invalid",
        )
    )
    assert (asked.suggest_model, asked.suggest_provider) == ("claude-haiku-4-5", "anthropic")
    assert asked.suggest_base_url == "https://llm.example.invalid"
