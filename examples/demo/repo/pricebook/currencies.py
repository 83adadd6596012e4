"""Supported currencies: ISO 4217 code -> number of minor-unit digits."""

CURRENCIES: dict[str, int] = {
    "EUR": 2,
    "GBP": 2,
    "JPY": 0,
    "USD": 2,
}
