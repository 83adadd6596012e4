"""What the gateway forwards, to whom, for how much: the pydantic side, read on the host.

The gateway process itself is stdlib + httpx (it runs in a minimal image), so it
receives `GatewayConfig.model_dump()` as plain JSON on stdin together with the keys,
and writes one `ModelCall` JSON object per line to its stdout, which the host reads back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from docdelta.models import ModelCall

__all__ = ["Budget", "GatewayConfig", "ModelCall", "Price", "Upstream"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Upstream(_Model):
    """One model API the gateway may reach, mounted at `/<name>/` on the gateway."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$", description="route prefix on the gateway")
    base_url: str = Field(pattern=r"^https?://", description="upstream URL the route maps to")
    paths: list[str] = Field(
        default=["/"], description="allowed path prefixes below base_url; anything else is refused"
    )
    auth_header: str = Field(default="authorization", description="header that carries the real key")
    auth_prefix: str = Field(default="Bearer ", description="text before the key in that header")
    base_url_env: list[str] = Field(default=[], description="agent env vars set to this route's URL")
    key_env: list[str] = Field(default=[], description="agent env vars set to the placeholder key")
    key_from: str = Field(description="host env var holding the real key (read by the CLI only)")


class Price(_Model):
    """USD per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    cached_in_input: bool = Field(
        default=False, description="True when the API counts cache reads inside input tokens (OpenAI)"
    )


class Budget(_Model):
    """Per-run caps; a call past any of them is refused with a `budget` error."""

    max_requests: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1, description="input + output tokens")
    max_cost_usd: float | None = Field(
        default=None, gt=0, description="priced calls only: an unpriced model's calls cost nothing here"
    )


OPENAI = Upstream(
    name="openai",
    base_url="https://api.openai.com/v1",
    paths=["/chat/completions", "/responses", "/models"],
    base_url_env=["OPENAI_BASE_URL"],
    key_env=["OPENAI_API_KEY"],
    key_from="OPENAI_API_KEY",
)
ANTHROPIC = Upstream(
    name="anthropic",
    base_url="https://api.anthropic.com",
    paths=["/v1/messages", "/v1/models"],
    auth_header="x-api-key",
    auth_prefix="",
    base_url_env=["ANTHROPIC_BASE_URL"],
    key_env=["ANTHROPIC_API_KEY"],
    key_from="ANTHROPIC_API_KEY",
)

GEMINI = Upstream(
    name="gemini",
    base_url="https://generativelanguage.googleapis.com",
    paths=["/v1beta/models/"],
    auth_header="x-goog-api-key",
    auth_prefix="",
    base_url_env=["GOOGLE_GEMINI_BASE_URL"],
    key_env=["GEMINI_API_KEY"],
    key_from="GEMINI_API_KEY",
)
"""Google's Gemini API, as Gemini CLI calls it (key in `x-goog-api-key`)."""

DEFAULT_PRICES = {
    # Public list prices (USD per million tokens); override them in the project config.
    "gpt-4o-mini": Price(input=0.15, output=0.60, cache_read=0.075, cached_in_input=True),
    "gpt-4o": Price(input=2.50, output=10.00, cache_read=1.25, cached_in_input=True),
    "gpt-4.1-mini": Price(input=0.40, output=1.60, cache_read=0.10, cached_in_input=True),
    "gpt-4.1": Price(input=2.00, output=8.00, cache_read=0.50, cached_in_input=True),
    "claude-3-5-haiku": Price(input=0.80, output=4.00, cache_read=0.08, cache_write=1.00),
    "claude-sonnet-4": Price(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75),
    "claude-opus-4": Price(input=15.00, output=75.00, cache_read=1.50, cache_write=18.75),
}


class GatewayConfig(_Model):
    upstreams: list[Upstream] = [OPENAI, ANTHROPIC, GEMINI]
    budget: Budget = Budget()
    prices: dict[str, Price] = DEFAULT_PRICES
    port: int = Field(default=8080, ge=1, le=65535)
    egress_network: str | None = Field(
        default=None,
        description="an existing Docker network the gateway reaches the model APIs on, e.g. one "
        "holding a local llama.cpp / vLLM / ollama server; default: a fresh bridge per run",
    )
    fingerprints: dict[str, list[str]] = Field(
        default={},
        description="set per run, not in .docdelta.yml: audit id -> hashed distinctive lines of one "
        "instruction file (docdelta.audit); the gateway logs which of them each request holds",
    )

    def for_run(self, max_cost_usd: float | None, fingerprints: Mapping[str, Sequence[str]]) -> GatewayConfig:
        """This config with one run's dollar budget (the runner's per-run reserve; None keeps
        the configured one) and the experiment's instruction-file fingerprints."""
        budget = self.budget
        if max_cost_usd is not None:
            budget = budget.model_copy(update={"max_cost_usd": max_cost_usd})
        prints = {k: list(v) for k, v in fingerprints.items()}
        return self.model_copy(update={"budget": budget, "fingerprints": prints})
