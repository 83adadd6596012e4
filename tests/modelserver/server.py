"""The scripted model server: HTTP on top of a `Replay`, recording every request it gets.

Stdlib only, so it runs as `python3 -m modelserver` in a container that holds
nothing but python3 and this package. Routes (a leading `/v1` is optional, so both an
Anthropic base URL `http://host:port` and an OpenAI one `http://host:port/v1` work):

- `POST /v1/messages` (Anthropic), `POST /v1/chat/completions`, `POST /v1/responses`:
  the next script turn, as JSON or as SSE when the body says `"stream": true`;
- `POST /v1beta/models/<model>:generateContent` and `:streamGenerateContent?alt=sse`
  (Gemini; also under `/v1/` and `/v1alpha/`): the next turn, with Google's error bodies;
- `POST /v1/messages/count_tokens`, `POST /v1beta/models/<model>:countTokens`,
  `GET /v1/models`: answered without using a turn;
- `GET /_docdelta/requests`: `{"script": name, "remaining": n, "requests": [...]}`, every
  request so far as `{"method", "path", "headers", "auth", "body", "turn"}` with auth headers
  dropped from `headers`; `auth` lists them as `[name, sha256 of the value]`, so a test can
  check which key arrived (through a gateway, say) without the log holding any key.

Streams end by closing the connection (no content-length), which every client and the
gateway handle; JSON answers keep the connection alive. A script's `stream_interval_s`
spaces a stream's events that many seconds apart, as a model's tokens arrive, so a client
or proxy can be timed on a stream that takes as long as a real one (bench/bench_gateway.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from modelserver import wire
from modelserver.replay import CHARS_PER_TOKEN, Failure, Replay, check

READY = "docdelta-modelserver listening on"
"""Printed to stderr (followed by the base URL) once the socket accepts connections."""

LOG_PATH = "/_docdelta/requests"
_SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization", "cookie"}

Body = Callable[[wire.Reply], dict[str, Any]]
Events = Callable[[wire.Reply, Mapping[str, Any]], Iterator[wire.Event]]
_APIS: dict[str, tuple[Body, Events]] = {
    "/messages": (wire.anthropic_body, lambda reply, _: wire.anthropic_events(reply)),
    "/chat/completions": (
        wire.chat_body,
        lambda reply, body: wire.chat_events(
            reply, include_usage=bool((body.get("stream_options") or {}).get("include_usage"))
        ),
    ),
    "/responses": (wire.responses_body, lambda reply, _: wire.responses_events(reply)),
}

_GEMINI = re.compile(
    r"/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent|countTokens)"
)
"""A Gemini API call: the model and the method are in the path, not in the body."""


class _Dumpable(Protocol):
    """A pydantic script model (`script.Script`), accepted without importing pydantic here."""

    def model_dump(self, *, mode: str, exclude_none: bool) -> dict[str, Any]: ...


class ModelHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], replay: Replay) -> None:
        super().__init__(address, _Handler)
        self.replay = replay
        self.log: list[dict[str, Any]] = []
        self.log_lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ModelHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return  # the request log is the record; stderr stays for the READY line and crashes

    def do_GET(self) -> None:
        if self.path.split("?")[0] == LOG_PATH:
            with self.server.log_lock:
                log = list(self.server.log)
            replay = self.server.replay
            self._json(200, {"script": replay.name, "remaining": replay.remaining, "requests": log})
            return
        self._handle(None)

    def do_POST(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self._handle(body)

    def _handle(self, body: Any) -> None:
        entry = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items() if k.lower() not in _SECRET_HEADERS},
            "auth": [
                [k.lower(), hashlib.sha256(v.encode()).hexdigest()]
                for k, v in self.headers.items()
                if k.lower() in _SECRET_HEADERS
            ],
            "body": body,
            "turn": None,
        }
        with self.server.log_lock:
            self.server.log.append(entry)
        path, _, query = self.path.partition("?")
        route = path.removeprefix("/v1")
        gemini = _GEMINI.fullmatch(path) if self.command == "POST" and isinstance(body, dict) else None
        if gemini is not None:
            self._gemini(gemini["model"], gemini["method"], "alt=sse" in query.split("&"), body, entry)
        elif self.command == "GET" and route == "/models":
            self._json(200, _models(self.server.replay))
        elif self.command == "POST" and route == "/messages/count_tokens":
            self._json(200, {"input_tokens": max(1, len(json.dumps(body)) // CHARS_PER_TOKEN)})
        elif self.command == "POST" and route in _APIS and isinstance(body, dict):
            turn, outcome = self.server.replay.answer(self.path, body)
            entry["turn"] = turn
            self._answer(route, body, outcome)
        else:
            message = f"docdelta scripted model server: no route for {self.command} {self.path}"
            self._failure(Failure(404, "not_found_error", message))

    def _answer(self, route: str, body: Mapping[str, Any], outcome: wire.Reply | Failure) -> None:
        if isinstance(outcome, Failure):
            self._failure(outcome)
            return
        whole, events = _APIS[route]
        if not body.get("stream"):
            self._json(200, whole(outcome))
            return
        self._stream(events(outcome, body))

    def _gemini(
        self, model: str, method: str, sse: bool, body: dict[str, Any], entry: dict[str, Any]
    ) -> None:
        if method == "countTokens":
            self._json(200, {"totalTokens": max(1, len(json.dumps(body)) // CHARS_PER_TOKEN)})
            return
        if method == "streamGenerateContent" and not sse:
            message = "docdelta scripted model server: streamGenerateContent is served only with ?alt=sse"
            self._gemini_failure(Failure(400, "invalid_request_error", message))
            return
        turn, outcome = self.server.replay.answer(self.path, body, model)
        entry["turn"] = turn
        if isinstance(outcome, Failure):
            self._gemini_failure(outcome)
        elif method == "generateContent":
            self._json(200, wire.gemini_body(outcome))
        else:
            self._stream(wire.gemini_events(outcome))

    def _stream(self, events: Iterator[wire.Event]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        interval = self.server.replay.stream_interval_s
        for index, frame in enumerate(wire.sse(events)):
            if index and interval:
                time.sleep(interval)
            self.wfile.write(frame)
            self.wfile.flush()

    def _failure(self, failure: Failure) -> None:
        """One error body both SDK families parse: Anthropic reads `type` + `error.type`,
        OpenAI reads `error.message` / `error.type` / `error.code`."""
        error = {"type": failure.kind, "message": failure.message, "code": failure.kind}
        self._json(failure.status, {"type": "error", "error": error}, _retry_header(failure))

    def _gemini_failure(self, failure: Failure) -> None:
        body = wire.gemini_error(failure.status, failure.message, failure.retry_after)
        self._json(failure.status, body, _retry_header(failure))

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("content-length") or 0))


def _retry_header(failure: Failure) -> dict[str, str]:
    return {} if failure.retry_after is None else {"retry-after": str(failure.retry_after)}


def _models(replay: Replay) -> dict[str, Any]:
    """A model list in the OpenAI and the Anthropic shape at once (their fields do not clash)."""
    model = replay.script.get("model") or "docdelta-scripted"
    entry = {
        "id": model,
        "object": "model",
        "type": "model",
        "created": 0,
        "created_at": "1970-01-01T00:00:00Z",
        "owned_by": "docdelta",
        "display_name": model,
    }
    return {"object": "list", "data": [entry], "has_more": False, "first_id": model, "last_id": model}


def make_server(script: Mapping[str, Any] | _Dumpable, host: str, port: int) -> ModelHTTPServer:
    """A bound (not yet serving) server for a script; ScriptError if the script is malformed."""
    plain = script if isinstance(script, Mapping) else script.model_dump(mode="json", exclude_none=True)
    return ModelHTTPServer((host, port), Replay(check(plain)))


class ScriptedModelServer:
    """The server in a background thread of this process, for tests::

    with ScriptedModelServer(script) as server:
        anthropic.Anthropic(base_url=server.url, ...)
        openai.OpenAI(base_url=server.url + "/v1", ...)
        assert "AGENTS.md" in json.dumps(server.requests[0]["body"])
    """

    def __init__(self, script: Mapping[str, Any] | _Dumpable, host: str = "127.0.0.1", port: int = 0) -> None:
        self._httpd = make_server(script, host, port)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request received so far (the same list `GET /_docdelta/requests` returns)."""
        with self._httpd.log_lock:
            return list(self._httpd.log)

    @property
    def remaining(self) -> int:
        """Script turns not yet used."""
        return self._httpd.replay.remaining

    def start(self) -> str:
        """Serve in a daemon thread; returns the base URL."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, args=(0.05,), name="modelserver", daemon=True
            )  # a short poll interval makes stop() (shutdown) quick
            self._thread.start()
        return self.url

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
