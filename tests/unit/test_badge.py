"""The shields.io endpoint badge, from summaries built of real result models."""

from __future__ import annotations

import json

import pytest
from factories import arm, result, summary_of

from docdelta.agents.models import RunStatus
from docdelta.errors import ConfigError
from docdelta.report import badge


def test_improvement_badge_message_and_color() -> None:
    runs = [
        *arm("a", "base", [0.5, 0.5], tokens=(900, 100)),
        *arm("a", "head", [1.0, 1.0], tokens=(800, 100)),
    ]
    runs += [*arm("b", "base", [1.0, 1.0]), *arm("b", "head", [0.98, 0.98])]  # -0.02: noise, not worse
    runs += [*arm("c", "base", [1.0, 1.0]), *arm("c", "head", [0.7, 0.7])]  # -0.3: worse
    data = badge(summary_of(runs, noise_band=0.05))  # a band the +0.06 lies outside
    # score: mean of +0.5, -0.02, -0.3 = +0.06; tokens: pooled medians are 150 in both arms
    assert data["schemaVersion"] == 1
    assert data["label"] == "agent docs"
    assert data["message"] == "+0.06 score | 0% tokens | 2/3 tasks"
    assert data["color"] == "green"
    json.dumps(data)  # endpoint JSON must serialize


def test_token_change_is_relative_to_base_median() -> None:
    runs = [
        *arm("a", "base", [0.5, 0.5], tokens=(900, 100)),
        *arm("a", "head", [0.5, 0.5], tokens=(800, 100)),
    ]
    data = badge(summary_of(runs))
    assert data["message"] == "0.00 score | -10% tokens | 1/1 tasks"
    assert data["color"] == "lightgrey"


def test_regression_is_red_and_tokens_left_out_when_unreported() -> None:
    runs = [*arm("a", "base", [1.0, 1.0], tokens=None), *arm("a", "head", [0.5, 0.5], tokens=None)]
    data = badge(summary_of(runs))
    assert data["message"] == "-0.50 score | 0/1 tasks"
    assert data["color"] == "red"


def test_refuses_fewer_than_two_graded_runs_in_any_arm() -> None:
    runs = [*arm("a", "base", [1.0, 1.0]), result("a", "head", 1.0, 1)]
    runs.append(result("a", "head", None, 2, status=RunStatus.infra_error))  # does not count as a repeat
    with pytest.raises(ConfigError) as err:
        badge(summary_of(runs))
    assert "task 'a', condition 'head' has 1 graded run(s)" in err.value.message
    assert "--repeats 2" in err.value.hint


def test_refuses_without_a_base_arm() -> None:
    with pytest.raises(ConfigError, match="condition 'base' has 0 graded run"):
        badge(summary_of(arm("a", "head", [1.0, 1.0])))
