"""Display symbol of every currency in currencies.CURRENCIES (kept in sync by a test)."""

SYMBOLS: dict[str, str] = {
    "EUR": "€",
    "GBP": "£",
    "JPY": "¥",
    "USD": "$",
}
