"""The judge's one question to a model API: non-streaming, temperature 0, JSON out.

Two wire shapes: OpenAI Chat Completions (`<base>/chat/completions`, JSON mode) and
Anthropic Messages (`<base>/v1/messages`, JSON asked for in the prompt). The defaults
(base URL, key variable) are the gateway's upstream table, so pointing `base_url` at a
gateway route (`http://<gateway>/<upstream>`) with the placeholder key in the variable
sends the judge through the same key-holding, usage-logging proxy as the agents.

The key comes in `Keys` (resolved once by `docdelta.wiring`), is held out of `repr`, sent only in the auth
header, and scrubbed from any text that could reach an error message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from docdelta.errors import ConfigError, InfraError
from docdelta.gateway.config import ANTHROPIC, OPENAI, Upstream
from docdelta.keys import Keys
from docdelta.results.grades import JudgeInfo

if TYPE_CHECKING:
    import httpx

UPSTREAMS: dict[str, Upstream] = {"openai": OPENAI, "anthropic": ANTHROPIC}
ANTHROPIC_VERSION = "2023-06-01"
MAX_TOKENS = 2048
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
_BODY_SNIPPET = 300


@dataclass(frozen=True)
class Endpoint:
    judge: JudgeInfo
    base_url: str
    key: str = field(repr=False)
    role: str = "judge"
    """Who asks, in error messages: the judge, or suggest's model draft (`docdelta.improve.suggest_model`)."""
    hint: str = "check --base-url, the model name and the key; rerun to resume (judged runs are kept)"


def endpoint(judge: JudgeInfo, base_url: str | None, keys: Keys) -> Endpoint:
    """The judge's endpoint with its provider's key from `keys` (`wiring.resolve_keys` over
    `UPSTREAMS`); a ConfigError naming the variable when there is none."""
    upstream = UPSTREAMS[judge.provider]
    key = keys.get(upstream.name)
    if not key:
        raise ConfigError(
            f"the {judge.provider} judge needs an API key in the environment variable {upstream.key_from}",
            hint=f"export {upstream.key_from} (behind a gateway: its placeholder key)",
        )
    return Endpoint(judge=judge, base_url=(base_url or upstream.base_url).rstrip("/"), key=key)


@dataclass(frozen=True)
class Reply:
    text: str
    tokens_in: int | None
    tokens_out: int | None


class JudgeAPI:
    """A small synchronous client; transient failures (429, 5xx, timeouts) are retried.

    The HTTP client is passed in (`docdelta.wiring` builds it, with its timeout) and closed by `close`.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        client: httpx.Client,
        *,
        retries: int = 2,
        backoff_s: float = 1.0,
    ) -> None:
        self.endpoint = endpoint
        self._client = client
        self._retries = retries
        self._backoff_s = backoff_s

    @property
    def judge(self) -> JudgeInfo:
        return self.endpoint.judge

    def close(self) -> None:
        self._client.close()

    def ask(self, system: str, user: str) -> Reply:
        # httpx only here (the caller built the client, so it is loaded by now): every
        # scorecard imports this module, and most never call a judge.
        import httpx  # noqa: PLC0415

        url, headers, body = self._request(system, user)
        for attempt in range(self._retries + 1):
            last = attempt == self._retries
            try:
                response = self._client.post(url, headers=headers, json=body)
            except httpx.HTTPError as exc:
                if last:
                    raise self._failure(f"could not reach {url}: {type(exc).__name__}: {exc}") from None
                time.sleep(self._backoff_s * 2**attempt)
                continue
            if response.status_code in _RETRY_STATUSES and not last:
                time.sleep(self._backoff_s * 2**attempt)
                continue
            if response.status_code != httpx.codes.OK:
                snippet = response.text[:_BODY_SNIPPET]
                raise self._failure(f"{url} answered {response.status_code}: {snippet}")
            return self._parse(url, response)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _request(self, system: str, user: str) -> tuple[str, dict[str, str], dict[str, Any]]:
        ep = self.endpoint
        model = ep.judge.model
        if ep.judge.provider == "anthropic":
            headers = {"x-api-key": ep.key, "anthropic-version": ANTHROPIC_VERSION}
            body: dict[str, Any] = {
                "model": model,
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "system": system,
                "messages": [{"role": "user", "content": user}],
            }
            return f"{ep.base_url}/v1/messages", headers, body
        body = {
            "model": model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        return f"{ep.base_url}/chat/completions", {"authorization": f"Bearer {ep.key}"}, body

    def _parse(self, url: str, response: httpx.Response) -> Reply:
        try:
            data = response.json()
            usage = data.get("usage") or {}
            if self.endpoint.judge.provider == "anthropic":
                text = "".join(b.get("text", "") for b in data["content"] if b.get("type") == "text")
                return Reply(text, usage.get("input_tokens"), usage.get("output_tokens"))
            text = data["choices"][0]["message"].get("content") or ""
            return Reply(text, usage.get("prompt_tokens"), usage.get("completion_tokens"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            snippet = response.text[:_BODY_SNIPPET]
            raise self._failure(f"{url} answered in an unexpected shape ({exc!r}): {snippet}") from None

    def _failure(self, message: str) -> InfraError:
        """An InfraError whose text can never hold the key, whatever the upstream echoed."""
        safe = message.replace(self.endpoint.key, "[key]")
        return InfraError(f"{self.endpoint.role} {self.endpoint.judge}: {safe}", hint=self.endpoint.hint)
