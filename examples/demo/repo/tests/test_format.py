import pytest
from pricebook import format_price


def test_formats_minor_units() -> None:
    assert format_price(9.99, "USD") == "$9.99"
    assert format_price(500, "JPY") == "¥500"


def test_rejects_unknown_currency() -> None:
    with pytest.raises(ValueError, match="XXX"):
        format_price(1, "XXX")
