"""The composition root's pure parts: where the gateway's key comes from, what bounds a
run (the experiment's identity), and options named as each entry point spells them."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from docdelta.agents import get_agent
from docdelta.cli.main import COMMANDS, _parser
from docdelta.cli.options import RUN_FLAGS, run_options
from docdelta.errors import ConfigError
from docdelta.evaluation import RunOptions, run_bounds, run_keys
from docdelta.gateway.config import GatewayConfig

ENV = {"ANTHROPIC_API_KEY": "sk-env-anthropic", "OPENAI_API_KEY": "sk-env-openai", "HOME": "/root"}
GATEWAY = GatewayConfig()


def _options(**values: object) -> RunOptions:
    return RunOptions.model_validate(values)


@pytest.mark.parametrize(
    ("agent", "provider", "upstream"),
    [
        ("claude_code", None, "anthropic"),  # the agent implies its API
        ("codex", None, "openai"),
        ("gemini", None, "gemini"),
        ("opencode", "anthropic", "anthropic"),  # `provider` names another upstream
    ],
)
def test_an_api_key_goes_to_the_one_upstream_it_is_for_and_nothing_else(
    agent: str, provider: str | None, upstream: str
) -> None:
    options = _options(agent=agent, model="m", api_key=SecretStr(" sk-input "), provider=provider)
    keys = run_keys(options, get_agent(agent, model="m"), GATEWAY, ENV)
    assert keys.reveal() == {upstream: "sk-input"}  # not the environment's keys, not HOME


FROM_ENV = {"anthropic": "sk-env-anthropic", "openai": "sk-env-openai"}


def test_without_an_api_key_the_gateway_reads_the_environment_as_the_cli_does() -> None:
    agent = get_agent("claude_code", model="m")
    assert run_keys(_options(agent="claude_code"), agent, GATEWAY, ENV).reveal() == FROM_ENV
    blank = _options(agent="claude_code", api_key=SecretStr(""))
    assert run_keys(blank, agent, GATEWAY, ENV).reveal() == FROM_ENV
    # an agent that calls no model API never needs the key (the demo passes one anyway)
    fake = _options(agent="fake", api_key=SecretStr("sk-x"))
    assert run_keys(fake, get_agent("fake"), GATEWAY, ENV).reveal() == FROM_ENV


def test_a_provider_that_is_no_gateway_upstream_is_a_clear_error() -> None:
    options = _options(agent="codex", api_key=SecretStr("sk-secret-value"), provider="azure")
    with pytest.raises(ConfigError) as err:
        run_keys(options, get_agent("codex"), GATEWAY, ENV)
    assert "provider 'azure' is not one of the gateway's upstreams (openai, anthropic, gemini)" in str(
        err.value
    )
    assert "sk-secret-value" not in str(err.value)


def test_run_bounds_hold_the_effective_turn_cap_and_the_gateway_budget() -> None:
    claude = get_agent("claude_code", model="m")
    bounds = run_bounds(_options(agent="claude_code", reserve_usd=0.25), claude, GATEWAY)
    assert (bounds.turn_cap, bounds.run_budget_usd) == (50, 0.25)  # the adapter's default cap
    assert bounds.gateway_budget is not None and bounds.gateway_budget["max_cost_usd"] == 0.25
    assert bounds.upstreams == {u.name: u.base_url for u in GATEWAY.upstreams}
    assert run_bounds(_options(max_turns=7), claude, GATEWAY).turn_cap == 7
    assert run_bounds(_options(max_turns=7), get_agent("codex"), GATEWAY).turn_cap is None  # no cap
    fake = run_bounds(_options(), get_agent("fake"), GATEWAY)
    assert (fake.turn_cap, fake.gateway_budget, fake.upstreams) == (None, None, None)


def test_a_bad_cli_option_names_its_flag() -> None:
    base = ["run", "--base", "a", "--head", "b", "--tasks", "t", "--workdir", "w"]
    assert set(RUN_FLAGS) == set(RunOptions.model_fields) - {
        "api_key",
        "provider",
        "progress",
        "alpha",
        "stop_failed_alike",  # no flag: `docdelta run` always stops a first round that failed alike
    }
    with pytest.raises(ConfigError, match=r"--cap-usd = -1\.0: input should be greater than 0"):
        run_options(_parser().parse_args([*base, "--cap-usd", "-1"]))
    with pytest.raises(ConfigError, match=r"--timeout = 0\.0"):
        run_options(_parser().parse_args([*base, "--timeout", "0"]))


def test_every_subcommand_has_a_handler() -> None:
    sub = next(a for a in _parser()._actions if a.dest == "command")
    assert set(COMMANDS) == set(sub.choices or ())


def test_the_noise_band_flag_is_checked_and_passed_on() -> None:
    base = ["run", "--base", "a", "--head", "b", "--tasks", "t", "--workdir", "w"]
    assert run_options(_parser().parse_args(base)).noise_band is None  # .docdelta.yml's, else the default
    assert run_options(_parser().parse_args([*base, "--noise-band", "0.1"])).noise_band == 0.1
    for bad in ("1", "-0.1", "wide"):
        with pytest.raises(SystemExit) as exit_:
            _parser().parse_args([*base, "--noise-band", bad])
        assert exit_.value.code == 2
