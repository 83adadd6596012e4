"""Format prices for people."""

from pricebook.format import format_price

__all__ = ["format_price"]
