from pricebook.currencies import CURRENCIES
from pricebook.symbols import SYMBOLS


def test_every_currency_has_a_symbol() -> None:
    assert set(SYMBOLS) == set(CURRENCIES)
