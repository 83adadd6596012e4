"""What the gateway forwards, to whom, for how much: the pydantic side, read on the host.

The gateway process itself is stdlib + httpx (it runs in a minimal image), so it
receives `GatewayConfig.model_dump()` as plain JSON on stdin together with the keys,
and writes one `ModelCall` JSON object per line to its stdout, which the host reads back.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from docdelta.gateway.models import ModelCall
from docdelta.gateway.policy import Template

__all__ = ["DEFAULT_RUN_BUDGET_USD", "Budget", "GatewayConfig", "ModelCall", "Price", "Upstream"]

DEFAULT_RUN_BUDGET_USD = 2.0
"""Every run's dollar budget at the gateway unless the project (`gateway.budget`) or the
run (`--reserve-usd`, the Action's budget input) sets another: no run is unbounded."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Upstream(_Model):
    """One model API the gateway may reach, mounted at `/<name>/` on the gateway."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$", description="route prefix on the gateway")
    base_url: str = Field(pattern=r"^https?://", description="upstream URL the route maps to")
    paths: list[str] = Field(
        min_length=1,
        description="the exact calls allowed below base_url, each `METHOD /path` (a bare `/path` "
        "means POST); `{model}` stands for one path segment, which must be the run's model. No "
        "prefixes: anything else is refused",
    )
    query: list[str] = Field(default=[], description="query parameters a client may send (others: refused)")
    auth_header: str = Field(default="authorization", description="header that carries the real key")
    auth_prefix: str = Field(default="Bearer ", description="text before the key in that header")
    base_url_env: list[str] = Field(default=[], description="agent env vars set to this route's URL")
    key_env: list[str] = Field(default=[], description="agent env vars set to the placeholder key")
    key_from: str = Field(description="host env var holding the real key (read by the CLI only)")

    @field_validator("paths", mode="after")
    @classmethod
    def _known_calls(cls, paths: list[str]) -> list[str]:
        for spec in paths:
            Template.parse(spec)  # ValueError names a path whose body the gateway cannot check
        return paths


class Price(_Model):
    """USD per million tokens. `input` and `output` must be given: `{input: 0, output: 0}` is
    how a project says a model is free (a local server); an unpriced model is refused."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(default=0.0, ge=0)
    cache_write: float = Field(default=0.0, ge=0)
    cached_in_input: bool = Field(
        default=False, description="True when the API counts cache reads inside input tokens (OpenAI)"
    )


class Budget(_Model):
    """Per-run caps; a call past any of them is refused with a `budget` error."""

    max_requests: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1, description="input + output tokens")
    max_cost_usd: float = Field(
        default=DEFAULT_RUN_BUDGET_USD,
        gt=0,
        description="each call is pre-authorised for its worst case against what is left, then "
        "settled from its real usage",
    )


OPENAI = Upstream(
    name="openai",
    base_url="https://api.openai.com/v1",
    paths=["POST /chat/completions", "POST /responses", "GET /models"],
    base_url_env=["OPENAI_BASE_URL"],
    key_env=["OPENAI_API_KEY"],
    key_from="OPENAI_API_KEY",
)
ANTHROPIC = Upstream(
    name="anthropic",
    base_url="https://api.anthropic.com",
    paths=["POST /v1/messages", "POST /v1/messages/count_tokens", "GET /v1/models"],
    query=["beta"],  # Claude Code calls /v1/messages?beta=true
    auth_header="x-api-key",
    auth_prefix="",
    base_url_env=["ANTHROPIC_BASE_URL"],
    key_env=["ANTHROPIC_API_KEY"],
    key_from="ANTHROPIC_API_KEY",
)

GEMINI = Upstream(
    name="gemini",
    base_url="https://generativelanguage.googleapis.com",
    paths=[
        "POST /v1beta/models/{model}:generateContent",
        "POST /v1beta/models/{model}:streamGenerateContent",
        "POST /v1beta/models/{model}:countTokens",
    ],
    query=["alt"],  # streamGenerateContent?alt=sse
    auth_header="x-goog-api-key",
    auth_prefix="",
    base_url_env=["GOOGLE_GEMINI_BASE_URL"],
    key_env=["GEMINI_API_KEY"],
    key_from="GEMINI_API_KEY",
)
"""Google's Gemini API, as Gemini CLI calls it (key in `x-goog-api-key`)."""

DEFAULT_PRICES = {
    # Public list prices (USD per million tokens), keyed by model-name prefix (the longest
    # prefix wins); the project's `gateway.prices` extend and override them.
    "gpt-4o-mini": Price(input=0.15, output=0.60, cache_read=0.075, cached_in_input=True),
    "gpt-4o": Price(input=2.50, output=10.00, cache_read=1.25, cached_in_input=True),
    "gpt-4.1-mini": Price(input=0.40, output=1.60, cache_read=0.10, cached_in_input=True),
    "gpt-4.1": Price(input=2.00, output=8.00, cache_read=0.50, cached_in_input=True),
    "gpt-5": Price(input=1.25, output=10.00, cache_read=0.125, cached_in_input=True),
    "gpt-5-mini": Price(input=0.25, output=2.00, cache_read=0.025, cached_in_input=True),
    "o1-pro": Price(input=150.00, output=600.00, cached_in_input=True),
    "o3": Price(input=2.00, output=8.00, cache_read=0.50, cached_in_input=True),
    "o4-mini": Price(input=1.10, output=4.40, cache_read=0.275, cached_in_input=True),
    "claude-3-5-haiku": Price(input=0.80, output=4.00, cache_read=0.08, cache_write=1.00),
    "claude-haiku-4-5": Price(input=1.00, output=5.00, cache_read=0.10, cache_write=1.25),
    "claude-opus-4-5": Price(input=5.00, output=25.00, cache_read=0.50, cache_write=6.25),
    "claude-sonnet-4": Price(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75),
    "claude-opus-4": Price(input=15.00, output=75.00, cache_read=1.50, cache_write=18.75),
    "gemini-2.5-pro": Price(input=1.25, output=10.00, cache_read=0.31, cached_in_input=True),
    "gemini-2.5-flash": Price(input=0.30, output=2.50, cache_read=0.075, cached_in_input=True),
    "gemini-2.5-flash-lite": Price(input=0.10, output=0.40, cache_read=0.025, cached_in_input=True),
}
DEFAULT_MAX_OUTPUT_TOKENS = 32_000
"""A request's worst-case output when it names no limit (`max_tokens` and the like)."""


class GatewayConfig(_Model):
    upstreams: list[Upstream] = [OPENAI, ANTHROPIC, GEMINI]
    budget: Budget = Budget()
    prices: dict[str, Price] = Field(
        default=DEFAULT_PRICES, description="model-name prefix -> price; merged over the defaults"
    )
    model: str | None = Field(
        default=None,
        description="set per run, not in .docdelta.yml: the only model the run's requests may "
        "name (None: any priced model)",
    )
    server_tools: list[str] = Field(
        default=[],
        description="provider-side tools a project enables explicitly (`web_search`, `mcp`, "
        "`code_execution`, `googleSearch`, ...; a name enables every tool type it prefixes); "
        "all are refused by default, since they reach the network from the provider's side",
    )
    max_output_tokens: int = Field(default=DEFAULT_MAX_OUTPUT_TOKENS, ge=1, description="worst case per call")
    port: int = Field(default=8080, ge=1, le=65535)
    egress_network: str | None = Field(
        default=None,
        description="an existing Docker network the gateway reaches the model APIs on, e.g. one "
        "holding a local llama.cpp / vLLM / ollama server; default: a fresh bridge per run",
    )
    fingerprints: dict[str, list[str]] = Field(
        default={},
        description="set per run, not in .docdelta.yml: audit id -> hashed distinctive lines of one "
        "instruction file (docdelta.instructions.audit); the gateway logs which of them each request holds",
    )

    @field_validator("prices", mode="after")
    @classmethod
    def _over_defaults(cls, prices: dict[str, Price]) -> dict[str, Price]:
        return {**DEFAULT_PRICES, **prices}

    def for_run(self, max_cost_usd: float | None, fingerprints: Mapping[str, Sequence[str]]) -> GatewayConfig:
        """This config with one run's dollar budget (the runner's per-run reserve; None keeps
        the configured one) and the experiment's instruction-file fingerprints."""
        budget = self.budget
        if max_cost_usd is not None:
            budget = budget.model_copy(update={"max_cost_usd": max_cost_usd})
        prints = {k: list(v) for k, v in fingerprints.items()}
        return self.model_copy(update={"budget": budget, "fingerprints": prints})


RUN_TOKEN_PREFIX = "docdelta-run-"  # noqa: S105 - a label, not a secret


def new_run_token() -> str:
    """What a run's agent holds instead of a key: random, so no other client can use the gateway."""
    return RUN_TOKEN_PREFIX + secrets.token_urlsafe(24)
