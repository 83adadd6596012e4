"""The validators beside RunOptions: repeats, conditions named once, and which reported
costs the spend cap can add up (NaN compares False with everything)."""

from __future__ import annotations

import math

import pytest

from docdelta import validate


def test_whole_numbers() -> None:
    assert validate.whole_at_least(1, "3") == 3
    with pytest.raises(ValueError, match=">= 1"):
        validate.whole_at_least(1, "0")
    with pytest.raises(ValueError, match="whole number"):
        validate.whole_at_least(1, "2.5")


def test_conditions_are_named_once() -> None:
    assert validate.condition_list(" base, head ,none") == ["base", "head", "none"]
    with pytest.raises(ValueError, match="head is listed more than once"):
        validate.condition_list("base,head,head")
    with pytest.raises(ValueError, match="comma-separated"):
        validate.condition_list(" , ")


@pytest.mark.parametrize(
    ("cost", "valid"),
    [(None, True), (0.0, True), (0.3, True), (-1.0, False), (math.nan, False), (math.inf, False)],
)
def test_valid_cost(cost: float | None, valid: bool) -> None:
    assert validate.valid_cost(cost) is valid
