"""The gateway process: a small HTTP/1.1 reverse proxy that holds the real model API keys.

Run as `python3 -m docdelta.gateway.server` in its own container. It reads ONE line of
JSON from stdin — `{"config": GatewayConfig, "keys": {upstream: key}, "token": str,
"listen": str, "ca_pem": str | null}` — and then never touches the keys again except to put
them in an upstream request header: they are not in its environment, argv, files or logs.
Stdin stays open: it is the watchdog. When it closes (docdelta closed it, or docdelta died
and Docker closed it) the gateway stops accepting, lets calls in flight finish (at most
`DRAIN_S`), writes its last log line and exits.

Per request, in this order: limits (head, body, time, connections); the run token, which
only the run's agent holds (401 otherwise); the exact allowlist of `policy` (403); the
model pinned and priced (403); the budget, pre-authorised for the call's worst case
(402 `budget_exceeded`); then the client's auth headers are dropped, the real key added
and the response streamed back byte for byte. One JSON line (a `ModelCall`) per call goes
to stdout with usage and cost as settled, and with the instruction files whose
fingerprints the request covers (`fingerprint`: hashes only). Refusals are logged by
their first line, the first `MAX_REFUSALS_LOGGED` of them one by one and the rest as a
count, so a flood of them cannot flood the record.

Stdlib + httpx only (no pydantic): the image it runs in is minimal.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import ssl
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

from docdelta.gateway.fingerprint import match, request_lines
from docdelta.gateway.policy import Checked, Denied, Template, check_body, headers, normalise, query
from docdelta.gateway.usage import cost_usd, extract, price_for

READY = "docdelta-gateway listening"
"""Printed to stderr, with ` on HOST:PORT`, once the socket accepts connections; the host
waits for it (a gateway on the host asks for port 0 and learns its port from this line)."""

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
"""Larger request bodies are refused (413) before they are read: the gateway has 512 MB."""
HEAD_TIMEOUT_S = 30.0
BODY_TIMEOUT_S = 120.0
"""A client that opens a connection and sends nothing (or dribbles) is cut off."""
MAX_CONNECTIONS = 64
"""Connections served at once; more are answered 503 at once."""
DRAIN_S = 30.0
"""At shutdown, how long calls in flight may take to finish before they are cut."""
MAX_TAP = 16 * 1024 * 1024  # response bytes kept for reading usage; the client gets them all
MAX_REFUSALS_LOGGED = 20
MAX_LOGGED_TARGET = 200
BYTES_PER_TOKEN = 3
"""Input tokens are estimated from the body's size; real JSON runs ~4 bytes a token, so 3
over-estimates, as a worst case must."""
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade", "content-length", "te", "trailer"}
_CLIENT_AUTH = ("authorization", "x-api-key", "api-key", "x-goog-api-key")


class Refusal(Exception):
    """A request the gateway answers itself, with a JSON error the agent can read."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


@dataclass
class Route:
    name: str
    base_url: str
    templates: list[Template]
    query: list[str]
    auth_header: str
    auth_prefix: str
    key: str


@dataclass
class Hold:
    """What the ledger set aside for one call in flight."""

    tokens: int
    cost: float


@dataclass
class Ledger:
    """The run's one budget, shared by every concurrent call (the gateway is one event
    loop, so no lock is needed): a call is admitted only if its worst case fits in what
    is neither spent nor held by calls in flight, and settled from its real usage."""

    max_requests: int | None
    max_tokens: int | None
    max_cost: float | None
    requests: int = 0
    tokens: int = 0
    cost: float = 0.0
    held_tokens: int = 0
    held_cost: float = 0.0

    def authorise(self, tokens: int, cost: float) -> Hold:
        if self.max_requests is not None and self.requests >= self.max_requests:
            raise Refusal(
                402, "budget", f"run budget exhausted: {self.requests} of {self.max_requests} requests"
            )
        if self.max_tokens is not None and self.tokens + self.held_tokens + tokens > self.max_tokens:
            raise Refusal(
                402,
                "budget",
                f"run budget: this call may use {tokens} tokens and only "
                f"{self.max_tokens - self.tokens - self.held_tokens} of {self.max_tokens} are left",
            )
        if self.max_cost is not None and self.cost + self.held_cost + cost > self.max_cost:
            left = self.max_cost - self.cost - self.held_cost
            raise Refusal(
                402,
                "budget",
                f"run budget: this call may cost ${cost:.4f} and only ${max(left, 0):.4f} of "
                f"${self.max_cost:.4f} is left",
            )
        self.requests += 1
        self.held_tokens += tokens
        self.held_cost += cost
        return Hold(tokens, cost)

    def settle(self, hold: Hold, tokens: int, cost: float) -> None:
        self.held_tokens -= hold.tokens
        self.held_cost -= hold.cost
        self.tokens += tokens
        self.cost += cost


@dataclass
class Gateway:
    routes: dict[str, Route]
    ledger: Ledger
    prices: Mapping[str, Mapping[str, Any]]
    secrets: list[str]
    token: str
    client: httpx.AsyncClient
    pinned: str | None = None
    server_tools: Sequence[str] = ()
    max_output_tokens: int = 32_000
    fingerprints: Mapping[str, list[str]] = field(default_factory=dict)
    log: Any = field(default=sys.stdout)
    refused: int = 0
    active: set[asyncio.Task[None]] = field(default_factory=set)

    # ----------------------------------------------------------- checks
    def authenticate(self, client_headers: Sequence[tuple[str, str]], query_keys: Sequence[str]) -> None:
        """The run token, in any header or `key=` parameter an SDK puts a key in; 401 otherwise."""
        offered = [*query_keys]
        for name, value in client_headers:
            if name.lower() in _CLIENT_AUTH:
                offered.append(value.removeprefix("Bearer ").strip())
        if not any(hmac.compare_digest(o.encode(), self.token.encode()) for o in offered):
            raise Refusal(401, "unauthorized", "this gateway serves only its own run: no valid run token")

    def route(self, method: str, target: str) -> tuple[Route, Template, str, str | None]:
        """(route, template, upstream URL, model named in the path) for an allowed call."""
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or not target.startswith("/") or parts.fragment:
            raise Refusal(403, "refused", "only origin-form requests to the gateway's routes are allowed")
        try:
            path = normalise(parts.path)
        except (Denied, UnicodeDecodeError) as exc:
            raise Refusal(403, "refused", f"not on the gateway's allowlist: {exc}") from None
        name, _, rest = path.lstrip("/").partition("/")
        route = self.routes.get(name)
        rest = "/" + rest
        for template in route.templates if route else []:
            found = template.match(method, rest)
            if found is not None:
                assert route is not None
                try:
                    forwarded_query, _ = query(parts.query, route.query)
                except Denied as exc:
                    raise Refusal(403, "refused", f"not on the gateway's allowlist: {exc}") from None
                url = route.base_url.rstrip("/") + rest + (f"?{forwarded_query}" if forwarded_query else "")
                return route, template, url, found.groupdict().get("model")
        raise Refusal(
            403,
            "refused",
            f"{method} {self.scrub(path)[:MAX_LOGGED_TARGET]} is not on the gateway's allowlist",
        )

    def worst_case(self, template: Template, checked: Checked, body: bytes) -> tuple[int, float]:
        """The most tokens and dollars this call can cost before its usage is known."""
        if template.free or checked.model is None:
            return 0, 0.0
        price = price_for(self.prices, checked.model)
        if price is None:
            raise Refusal(
                403,
                "refused",
                f"model {checked.model[:80]!r} has no price, so its cost cannot be held to the budget; "
                "give it one in .docdelta.yml (gateway.prices; {input: 0, output: 0} for a free local model)",
            )
        tokens_in = math.ceil(len(body) / BYTES_PER_TOKEN)
        tokens_out = max(
            checked.max_output_tokens or 0, self.max_output_tokens if checked.max_output_tokens is None else 0
        )
        per_in = max(price.get("input", 0.0), price.get("cache_write", 0.0))
        return tokens_in + tokens_out, (
            tokens_in * per_in + tokens_out * price.get("output", 0.0)
        ) / 1_000_000

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def record(self, entry: dict[str, Any]) -> None:
        if entry.get("error") in ("refused", "unauthorized", "budget", "too_large", "timeout", "busy"):
            self.refused += 1
            if self.refused > MAX_REFUSALS_LOGGED:
                return
        self.log.write(self.scrub(json.dumps(entry)) + "\n")
        self.log.flush()

    def finish(self) -> None:
        """The last log line: how many refusals were counted but not logged one by one."""
        unlogged = self.refused - MAX_REFUSALS_LOGGED
        if unlogged > 0:
            entry: dict[str, Any] = {
                "upstream": None,
                "method": "*",
                "path": "(refused, not logged one by one)",
            }
            entry |= {"status": 403, "latency_s": 0.0, "error": "refused", "count": unlogged}
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()
        self.refused = min(self.refused, MAX_REFUSALS_LOGGED)

    # ----------------------------------------------------------- serving
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self.active) >= MAX_CONNECTIONS:
            await _respond_error(writer, Refusal(503, "busy", "too many connections to the gateway"))
            writer.close()
            return
        assert task is not None
        self.active.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            self.active.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started = time.monotonic()
        entry: dict[str, Any] = {"upstream": None, "method": "?", "path": "?", "status": 0}
        hold: Hold | None = None
        try:
            method, target, client_headers, body = await _read_request(reader, entry)
            entry.update(method=method[:16], path=self.scrub(target)[:MAX_LOGGED_TARGET])
            self.authenticate(client_headers, _query_keys(target))
            route, template, url, path_model = self.route(method, target)
            entry.update(upstream=route.name, path=self.scrub(urlsplit(target).path)[:MAX_LOGGED_TARGET])
            try:
                checked = check_body(
                    template.api, body, path_model, pinned=self.pinned, enabled=self.server_tools
                )
            except Denied as exc:
                raise Refusal(403, "refused", str(exc)) from None
            entry["model"] = checked.model
            hold = self.ledger.authorise(*self.worst_case(template, checked, body))
            if self.fingerprints:
                entry["instructions"] = match(self.fingerprints, *request_lines(body))
            request = self.client.build_request(
                method,
                url,
                headers=_upstream_headers(route, client_headers),
                content=checked.body if checked.body is not None else body,
            )
            await self.forward(request, writer, entry, template)
        except Refusal as refusal:
            entry.update(status=refusal.status, error=refusal.kind)
            await _respond_error(writer, refusal)
        except (httpx.HTTPError, OSError) as exc:
            entry.update(status=entry["status"] or 502, error="upstream")
            if not entry.get("streamed"):
                await _respond_error(writer, Refusal(502, "upstream", self.scrub(f"upstream failed: {exc}")))
        except asyncio.CancelledError:
            entry.update(status=entry["status"] or 499, error="unfinished")
            raise
        except asyncio.IncompleteReadError:
            entry["method"] = "?"  # the client went away before sending a request: nothing to log
        finally:
            if hold is not None:
                self.settle(hold, entry)
            entry["latency_s"] = round(time.monotonic() - started, 6)
            if entry["method"] != "?":
                self.record(entry)
            writer.close()

    def settle(self, hold: Hold, entry: dict[str, Any]) -> None:
        """Book the call's real cost; a success that reported no usage is booked at its
        worst case (never at zero), a failure that reported none at zero."""
        reported = entry.get("tokens_in") is not None or entry.get("tokens_out") is not None
        if reported:
            tokens = (entry.get("tokens_in") or 0) + (entry.get("tokens_out") or 0)
            cost = entry.get("cost_usd") or 0.0
        elif 200 <= entry.get("status", 0) < 300 or entry.get("error") == "unfinished":
            tokens, cost = hold.tokens, hold.cost
            entry["cost_usd"] = round(cost, 8)
        else:
            tokens, cost = 0, 0.0
        self.ledger.settle(hold, tokens, cost)

    async def forward(
        self, request: httpx.Request, writer: asyncio.StreamWriter, entry: dict[str, Any], template: Template
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
            client_gone = not await _send(writer, ("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            tap = bytearray()
            # An agent that hangs up mid-reply does not stop the upstream's work or its bill:
            # the rest is still read, so usage is booked from what the upstream reported.
            async for chunk in response.aiter_raw():
                client_gone = client_gone or not await _send(writer, chunk)
                if len(tap) < MAX_TAP:
                    tap += chunk
        finally:
            await response.aclose()
        if client_gone:
            entry["error"] = "client_gone"
        model, usage = extract(bytes(tap), streamed=streamed)
        entry.update(usage)
        if template.free:
            entry["cost_usd"] = 0.0
        elif usage:  # priced as the model the run pinned and asked for, whatever the reply says
            entry["cost_usd"] = cost_usd(self.prices, entry.get("model") or model, usage)
        entry["model"] = model or entry.get("model")


async def _send(writer: asyncio.StreamWriter, data: bytes) -> bool:
    """Write to the client; False once it has hung up (a client's failure, never logged as
    the upstream's)."""
    if writer.is_closing():
        return False
    try:
        writer.write(data)
        await writer.drain()
    except (ConnectionError, OSError):
        writer.close()
        return False
    return True


def _query_keys(target: str) -> list[str]:
    return [value for name, value in parse_qsl(urlsplit(target).query) if name == "key"]


def _upstream_headers(route: Route, client: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's allowlisted headers (no auth: the token stays here), plus the real key;
    identity encoding so usage can be read from the bytes that pass through."""
    kept = headers(client)
    return [*kept, (route.auth_header, route.auth_prefix + route.key), ("accept-encoding", "identity")]


async def _read_request(
    reader: asyncio.StreamReader, entry: dict[str, Any]
) -> tuple[str, str, list[tuple[str, str]], bytes]:
    """One request, within the size and time limits; `entry` gets its first line early so a
    refusal is logged by it."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
    except asyncio.LimitOverrunError:
        entry.update(method="*", path="(request head over the size limit)")
        raise Refusal(431, "too_large", "request head too large") from None
    except TimeoutError:
        entry.update(method="*", path="(no request head in time)")
        raise Refusal(408, "timeout", "no request within the gateway's time limit") from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        entry.update(method="*", path=lines[0][:MAX_LOGGED_TARGET])
        raise Refusal(400, "refused", "malformed request line") from None
    entry.update(method=method[:16], path=target[:MAX_LOGGED_TARGET])
    client_headers = [
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:] if line)
    ]
    names = {k.lower(): v for k, v in client_headers}
    if "chunked" in names.get("transfer-encoding", "").lower():
        raise Refusal(411, "refused", "chunked request bodies are not supported; send Content-Length")
    try:
        length = int(names.get("content-length", "0") or 0)
    except ValueError:
        raise Refusal(400, "refused", "malformed content-length") from None
    if length < 0 or length > MAX_BODY:
        raise Refusal(413, "too_large", f"request body over the gateway's limit of {MAX_BODY} bytes")
    try:
        body = await asyncio.wait_for(reader.readexactly(length), BODY_TIMEOUT_S)
    except TimeoutError:
        raise Refusal(408, "timeout", "request body not received within the gateway's time limit") from None
    return method, target, client_headers, body


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
    config: Mapping[str, Any],
    keys: Mapping[str, str],
    token: str,
    ca_pem: str | None = None,
    listen: str = "0.0.0.0",  # noqa: S104 - the host passes the internal network's address
) -> dict[str, Any]:
    """The one JSON object the gateway reads from stdin (config is GatewayConfig's dump)."""
    return {"config": dict(config), "keys": dict(keys), "token": token, "ca_pem": ca_pem, "listen": listen}


def build(setup: Mapping[str, Any]) -> Gateway:
    """A Gateway from the stdin setup object (see the module docstring)."""
    config, keys = setup["config"], setup["keys"]
    routes = {
        u["name"]: Route(
            u["name"],
            u["base_url"],
            [Template.parse(p) for p in u["paths"]],
            list(u.get("query") or []),
            u["auth_header"],
            u["auth_prefix"],
            keys[u["name"]],
        )
        for u in config["upstreams"]
        if u["name"] in keys
    }
    ctx = ssl.create_default_context()
    if setup.get("ca_pem"):
        ctx.load_verify_locations(cadata=setup["ca_pem"])
    client = httpx.AsyncClient(verify=ctx, timeout=httpx.Timeout(600.0, connect=30.0), trust_env=False)
    secrets = [s for s in [*keys.values(), setup["token"]] if s]
    budget = config["budget"]
    return Gateway(
        routes,
        Ledger(budget.get("max_requests"), budget.get("max_tokens"), budget.get("max_cost_usd")),
        config["prices"],
        secrets,
        setup["token"],
        client,
        pinned=config.get("model"),
        server_tools=list(config.get("server_tools") or []),
        max_output_tokens=int(config.get("max_output_tokens") or 32_000),
        fingerprints=config.get("fingerprints") or {},
    )


async def serve(setup: Mapping[str, Any], stdin_closed: asyncio.Future[Any]) -> None:
    """Serve until `stdin_closed` resolves; then stop accepting, drain and log the rest."""
    gateway = build(setup)
    server = await asyncio.start_server(
        gateway.handle, setup["listen"], setup["config"]["port"], limit=MAX_HEAD
    )
    host, port = server.sockets[0].getsockname()[:2]
    print(f"{READY} on {host}:{port}", file=sys.stderr, flush=True)
    await stdin_closed
    server.close()
    if gateway.active:
        _done, late = await asyncio.wait(set(gateway.active), timeout=DRAIN_S)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=5)
    gateway.finish()
    await gateway.client.aclose()


async def _main(setup: Mapping[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    # Reading stdin to its end blocks, so a thread waits for EOF: docdelta closing it, or
    # Docker closing it when docdelta's attach connection goes away (docdelta died).
    stdin_closed = loop.run_in_executor(None, sys.stdin.buffer.read)
    await serve(setup, stdin_closed)


def main() -> None:
    setup = json.loads(sys.stdin.buffer.readline())
    asyncio.run(_main(setup))


if __name__ == "__main__":
    main()
