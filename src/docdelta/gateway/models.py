"""One model call as the gateway logged it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from docdelta.vocabulary import Frozen


class ModelCall(Frozen):
    """One forwarded (or refused) call, as logged by the gateway; keys never appear here."""

    upstream: str | None
    method: str
    path: str
    status: int
    latency_s: float
    streamed: bool = False
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = Field(
        default=None,
        description="None, or why the gateway did not complete it: 'budget', 'refused', "
        "'unauthorized', 'too_large', 'timeout', 'busy', 'upstream', 'unfinished', "
        "'client_gone' (the agent hung up mid-reply; the call is still booked)",
    )
    count: int = Field(
        default=1, ge=1, description="refusals past the first few are logged as one entry with their count"
    )
    instructions: dict[str, Literal["injected", "tool"]] = Field(
        default={},
        description="audit fingerprint id -> how that file's text reached this request: in the "
        "prompt the agent built ('injected') or only in a tool's output ('tool')",
    )

    @property
    def answered(self) -> bool:
        """The upstream answered in full and billed it (even if the agent hung up meanwhile)."""
        return self.error in (None, "client_gone")
