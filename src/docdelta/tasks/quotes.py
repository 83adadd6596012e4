"""Where a quote stands in a text: the anchor of every gold citation.

A gold citation is a quote, never a line number: a PR that adds two lines above a rule
moves it, and matching fixed lines then scores identical, correct answers differently
per condition. So each condition's files are searched for the quote (whitespace
normalised, so re-wrapping does not move it) and the citation stands wherever it is.
"""

from __future__ import annotations

from pathlib import Path

from docdelta.tasks.models import LineRange


def normalize(text: str) -> str:
    return " ".join(text.split())


def locate(text: str, quote: str) -> LineRange | None:
    """The smallest range of lines (1-based) whose joined text holds `quote`, or None."""
    needle = normalize(quote)
    if not needle:
        return None
    lines = text.splitlines()
    for end in range(len(lines)):
        window = ""
        for start in range(end, -1, -1):
            window = normalize(f"{lines[start]} {window}")
            if needle in window:
                return LineRange(start=start + 1, end=end + 1)
            if len(window) > len(needle) + len(lines[end]) + 1:
                break  # any match ending on line `end` would already be inside the window
    return None


def read_inside(checkout: Path, rel: str) -> str | None:
    """The text of `rel` inside `checkout`, or None if it is not a file there (links out refused)."""
    root = checkout.resolve()
    target = (root / rel).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return None
    return target.read_bytes().decode("utf-8", "replace")
