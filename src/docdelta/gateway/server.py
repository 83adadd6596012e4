"""The gateway process: a small HTTP/1.1 reverse proxy that holds the real model API keys.

Run as `python3 -m docdelta.gateway.server` in its own container. It reads ONE line of
JSON from stdin — `{"config": GatewayConfig, "keys": {upstream: key}, "placeholder": str,
"ca_pem": str | null}` — and then never touches the keys again except to put them in an
upstream request header: they are not in its environment, argv, files or logs.

Per request: route `/<upstream>/<path>` to the configured upstream if the path is allowed
(anything else, including absolute-form proxy requests to other hosts, is refused with
403), drop every client auth header, add the real key, stream the response back byte for
byte (SSE passes through unchanged), then print one JSON line (a `ModelCall`) to stdout
with usage and cost, and with the instruction files whose fingerprints the request body
covers (`fingerprint`: hashes only, so neither the config nor the log holds their text).
Past the per-run budget (requests, tokens or dollars), calls are answered 402 with error
type `budget_exceeded`.

Stdlib + httpx only (no pydantic): the image it runs in is minimal.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import sys
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from docdelta.gateway.fingerprint import match, request_lines
from docdelta.gateway.usage import Usage, cost_usd, extract

READY = "docdelta-gateway listening"
"""Printed to stderr once the socket accepts connections; the host waits for it."""

MAX_HEAD = 64 * 1024
MAX_TAP = 16 * 1024 * 1024  # response bytes kept for reading usage; the client gets them all
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
}
_CLIENT_AUTH = {"authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization"}


class Refusal(Exception):
    """A request the gateway answers itself, with a JSON error the agent can read."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


@dataclass
class Route:
    name: str
    base_url: str
    paths: list[str]
    auth_header: str
    auth_prefix: str
    key: str


@dataclass
class Gateway:
    routes: dict[str, Route]
    budget: Mapping[str, float | None]
    prices: Mapping[str, Mapping[str, Any]]
    secrets: list[str]
    client: httpx.AsyncClient
    fingerprints: Mapping[str, list[str]] = field(default_factory=dict)
    requests: int = 0
    tokens: int = 0
    cost: float = 0.0
    log: Any = field(default=sys.stdout)

    # ----------------------------------------------------------- routing
    def route(self, target: str) -> tuple[Route, str]:
        """The route and upstream URL for a request target, or a Refusal."""
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or not target.startswith("/"):
            raise Refusal(403, "refused", f"{self.scrub(target)} is not on the gateway's allowlist")
        name, _, rest = parts.path.lstrip("/").partition("/")
        route = self.routes.get(name)
        path = "/" + rest
        if route is None or ".." in path.split("/") or not any(path.startswith(p) for p in route.paths):
            raise Refusal(403, "refused", f"{self.scrub(parts.path)} is not on the gateway's allowlist")
        return route, route.base_url.rstrip("/") + path + (f"?{parts.query}" if parts.query else "")

    def check_budget(self) -> None:
        max_requests, max_tokens = self.budget.get("max_requests"), self.budget.get("max_tokens")
        if max_requests is not None and self.requests >= max_requests:
            raise Refusal(402, "budget", f"run budget exhausted: {self.requests} of {max_requests} requests")
        if max_tokens is not None and self.tokens >= max_tokens:
            raise Refusal(402, "budget", f"run budget exhausted: {self.tokens} of {max_tokens} tokens")
        max_cost = self.budget.get("max_cost_usd")
        if max_cost is not None and self.cost >= max_cost:
            raise Refusal(402, "budget", f"run budget exhausted: ${self.cost:.4f} of ${max_cost:.4f}")

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def record(self, entry: dict[str, Any]) -> None:
        self.log.write(self.scrub(json.dumps(entry)) + "\n")
        self.log.flush()

    # ----------------------------------------------------------- serving
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started = time.monotonic()
        entry: dict[str, Any] = {"upstream": None, "method": "?", "path": "?", "status": 0}
        try:
            method, target, headers, body = await _read_request(reader)
            entry.update(method=method, path=self.scrub(urlsplit(target).path))
            route, url = self.route(target)
            entry["upstream"] = route.name
            self.check_budget()
            self.requests += 1
            if self.fingerprints:
                entry["instructions"] = match(self.fingerprints, *request_lines(body))
            request = self.client.build_request(
                method, url, headers=_upstream_headers(route, headers), content=body
            )
            await self.forward(request, writer, entry)
        except Refusal as refusal:
            entry.update(status=refusal.status, error=refusal.kind)
            await _respond_error(writer, refusal)
        except (httpx.HTTPError, OSError) as exc:
            entry.update(status=entry["status"] or 502, error="upstream")
            if not entry.get("streamed"):
                await _respond_error(writer, Refusal(502, "upstream", self.scrub(f"upstream failed: {exc}")))
        except asyncio.IncompleteReadError:
            return  # the client went away before sending a request: nothing to log
        finally:
            entry["latency_s"] = round(time.monotonic() - started, 6)
            if entry["method"] != "?":
                self.record(entry)
            writer.close()

    async def forward(
        self, request: httpx.Request, writer: asyncio.StreamWriter, entry: dict[str, Any]
    ) -> None:
        """Send upstream and stream the response back as it arrives, keeping a copy of up
        to MAX_TAP bytes to read usage from."""
        response = await self.client.send(request, stream=True)
        try:
            entry["status"] = response.status_code
            streamed = response.headers.get("content-type", "").startswith("text/event-stream")
            entry["streamed"] = streamed
            head = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
            head += [f"{k}: {v}" for k, v in response.headers.items() if k.lower() not in _HOP_BY_HOP]
            if "content-length" in response.headers:
                head.append(f"content-length: {response.headers['content-length']}")
            head.append("connection: close")  # the body ends when the connection does
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            tap = bytearray()
            async for chunk in response.aiter_raw():
                writer.write(chunk)
                await writer.drain()
                if len(tap) < MAX_TAP:
                    tap += chunk
        finally:
            await response.aclose()
        model, usage = extract(bytes(tap), streamed=streamed)
        entry["model"] = model or _request_model(request.content, request.url.path)
        self.account(entry, usage)

    def account(self, entry: dict[str, Any], usage: Usage) -> None:
        entry.update(usage)
        self.tokens += usage.get("tokens_in", 0) + usage.get("tokens_out", 0)
        entry["cost_usd"] = cost_usd(self.prices, entry["model"], usage)
        self.cost += entry["cost_usd"] or 0.0


def _upstream_headers(route: Route, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers minus hop-by-hop and ANY auth header, plus the real key; identity
    encoding so usage can be read from the bytes that pass through."""
    kept = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP | _CLIENT_AUTH | {route.auth_header}]
    return [*kept, (route.auth_header, route.auth_prefix + route.key), ("accept-encoding", "identity")]


def _request_model(body: bytes, path: str) -> str | None:
    """The model the client asked for: in the body (OpenAI, Anthropic) or, for Gemini,
    in the path (`.../models/<model>:generateContent`)."""
    try:
        model = json.loads(body).get("model")
    except (ValueError, AttributeError):
        model = None
    if isinstance(model, str):
        return model
    found = re.search(r"/models/([^/:]+):", path)
    return found.group(1) if found else None


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, list[tuple[str, str]], bytes]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise Refusal(431, "refused", "request head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        raise Refusal(400, "refused", "malformed request line") from None
    headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:] if line)]
    names = {k.lower(): v for k, v in headers}
    if "chunked" in names.get("transfer-encoding", "").lower():
        raise Refusal(411, "refused", "chunked request bodies are not supported; send Content-Length")
    body = await reader.readexactly(int(names.get("content-length", "0") or 0))
    return method, target, headers, body


async def _respond_error(writer: asyncio.StreamWriter, refusal: Refusal) -> None:
    kind = "budget_exceeded" if refusal.kind == "budget" else f"docdelta_gateway_{refusal.kind}"
    body = json.dumps({"error": {"type": kind, "message": refusal.message}}).encode()
    writer.write(
        f"HTTP/1.1 {refusal.status} Gateway\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )
    with suppress(ConnectionError):
        await writer.drain()


def setup_message(
    config: Mapping[str, Any], keys: Mapping[str, str], placeholder: str, ca_pem: str | None = None
) -> dict[str, Any]:
    """The one JSON object the gateway reads from stdin (config is GatewayConfig's dump)."""
    return {"config": dict(config), "keys": dict(keys), "placeholder": placeholder, "ca_pem": ca_pem}


def build(setup: Mapping[str, Any]) -> Gateway:
    """A Gateway from the stdin setup object (see the module docstring)."""
    config, keys = setup["config"], setup["keys"]
    routes = {
        u["name"]: Route(
            u["name"], u["base_url"], u["paths"], u["auth_header"], u["auth_prefix"], keys[u["name"]]
        )
        for u in config["upstreams"]
        if u["name"] in keys
    }
    ctx = ssl.create_default_context()
    if setup.get("ca_pem"):
        ctx.load_verify_locations(cadata=setup["ca_pem"])
    client = httpx.AsyncClient(verify=ctx, timeout=httpx.Timeout(600.0, connect=30.0), trust_env=False)
    secrets = [s for s in [*keys.values(), setup.get("placeholder", "")] if s]
    return Gateway(
        routes, config["budget"], config["prices"], secrets, client, config.get("fingerprints") or {}
    )


async def serve(setup: Mapping[str, Any], host: str = "0.0.0.0") -> None:  # noqa: S104 - container-only
    gateway = build(setup)
    server = await asyncio.start_server(gateway.handle, host, setup["config"]["port"], limit=MAX_HEAD)
    print(READY, file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    setup = json.loads(sys.stdin.readline())
    sys.stdin.close()
    asyncio.run(serve(setup))


if __name__ == "__main__":
    main()
