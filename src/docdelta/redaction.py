"""Secret values replaced by a mark before text is stored, logged or posted.

One function for every place that holds secrets docdelta knows by value (the API keys, as
`docdelta.keys.Keys.secrets` hands them out, and the GitHub token): the PR comment and job
summary, and what proposed commands printed."""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[redacted]"


def redact(text: str, secrets: Iterable[str], mark: str = REDACTED) -> str:
    """`text` with every non-empty value of `secrets` replaced by `mark`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, mark)
    return text
