"""Turn an amount and a currency code into a display string."""

from pricebook.currencies import CURRENCIES
from pricebook.symbols import SYMBOLS


def format_price(amount: float, currency: str) -> str:
    """Format `amount` in `currency` with its symbol and minor units.

    >>> format_price(1234.5, "EUR")
    '€1,234.50'
    >>> format_price(1234.5, "JPY")
    '¥1,234'
    """
    try:
        digits = CURRENCIES[currency]
    except KeyError:
        raise ValueError(f"unsupported currency {currency!r}") from None
    return f"{SYMBOLS[currency]}{amount:,.{digits}f}"
