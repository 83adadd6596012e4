"""A model API key lives in one `Keys` from where it is resolved to where it is used: nothing
that prints, logs, serialises or pickles that holder shows the value, and the one rule of which
upstream gets which key gives each upstream only its own."""

from __future__ import annotations

import copy
import json
import logging
import pickle
from dataclasses import dataclass

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr

from docdelta.errors import ConfigError
from docdelta.gateway.config import ANTHROPIC, GEMINI, OPENAI, Upstream
from docdelta.grading.judge_api import endpoint
from docdelta.keys import Keys
from docdelta.redaction import REDACTED, redact
from docdelta.results.grades import JudgeInfo
from docdelta.wiring import resolve_keys

SECRET = "sk-test-0123456789abcdef"
UPSTREAMS = [OPENAI, ANTHROPIC, GEMINI]


def test_no_view_of_the_holder_shows_a_key(caplog: pytest.LogCaptureFixture) -> None:
    keys = Keys({"openai": SECRET, "anthropic": "sk-ant-second"})

    @dataclass
    class Holder:
        keys: Keys

    class Model(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        keys: Keys

    with caplog.at_level(logging.DEBUG):
        logging.getLogger("docdelta.test").warning("keys: %s %r", keys, keys)
    views = [
        repr(keys),
        str(keys),
        f"{keys}",
        repr(Holder(keys)),
        repr(Model(keys=keys)),
        str(Model(keys=keys).model_dump()),
        json.dumps(Model(keys=keys).model_dump(), default=str),
        json.dumps({"keys": keys}, default=str),
        caplog.text,
    ]
    for view in views:
        assert SECRET not in view and "sk-ant-second" not in view, view
    assert repr(keys) == "Keys(anthropic, openai)"  # names are what is safe to say
    with pytest.raises(TypeError, match="never pickled"):
        pickle.dumps(keys)
    with pytest.raises(TypeError):
        copy.deepcopy(keys)


def test_the_values_leave_only_by_name() -> None:
    keys = Keys({"openai": SECRET, "gemini": ""})
    assert keys.upstreams == ["openai"] and keys  # an empty value is no key
    assert keys.get("openai") == SECRET and keys.get("gemini") is None
    assert keys.reveal() == {"openai": SECRET}
    assert redact(f"echoed {SECRET}", keys.secrets()) == f"echoed {REDACTED}"
    assert not Keys()


def test_each_upstream_gets_the_key_of_its_own_variable() -> None:
    env = {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": "sk-ant", "HOME": "/root"}
    assert resolve_keys(UPSTREAMS, env).reveal() == {"openai": SECRET, "anthropic": "sk-ant"}
    # a given key (the Action's input) is its provider's variable alone: no environment key joins it
    given = resolve_keys(UPSTREAMS, env, SecretStr(" sk-given "), "gemini").reveal()
    assert given == {"gemini": "sk-given"}
    # an upstream of the project's that reads the same variable reads the same key
    local = Upstream(name="local", base_url="http://llm:8000/v1", paths=["/chat/completions"], key_from="K")
    same = Upstream(name="same", base_url="http://llm:8001/v1", paths=["/chat/completions"], key_from="K")
    routes = resolve_keys([OPENAI, local, same], env, SecretStr("sk-k"), "local").reveal()
    assert routes == {"local": "sk-k", "same": "sk-k"}


def test_a_given_key_for_no_upstream_is_an_error_that_never_quotes_it() -> None:
    for provider in (None, "azure"):
        with pytest.raises(ConfigError) as err:
            resolve_keys(UPSTREAMS, {}, SecretStr(SECRET), provider, asker="the codex agent")
        assert SECRET not in f"{err.value} {err.value.hint}"


def test_the_judge_takes_its_providers_key_from_keys() -> None:
    judge = JudgeInfo(provider="anthropic", model="m")
    point = endpoint(judge, None, Keys({"anthropic": SECRET, "openai": "sk-other"}))
    assert point.key == SECRET and SECRET not in repr(point)
    assert point.base_url == ANTHROPIC.base_url
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        endpoint(judge, None, Keys({"openai": SECRET}))
