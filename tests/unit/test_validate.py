"""The validators behind every number flag: NaN, infinity and out-of-range values are
refused with a message, because a NaN cap or timeout switches a safeguard off silently."""

from __future__ import annotations

import math

import pytest

from docdelta import validate


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e999", "x", ""])
def test_finite_number_refuses_what_is_not_a_real_amount(text: str) -> None:
    with pytest.raises(ValueError, match="expected a"):
        validate.finite_number(text)


def test_ranges() -> None:
    assert validate.non_negative("0") == 0.0 and validate.positive("0.5") == 0.5
    with pytest.raises(ValueError, match=">= 0"):
        validate.non_negative("-0.01")
    with pytest.raises(ValueError, match="> 0"):
        validate.positive("0")
    assert validate.whole_at_least(1, "3") == 3
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
