"""A scripted model API for the gateway tests and benches: fixed JSON and SSE answers
with usage blocks, and headers that tell the test what auth the upstream saw.

Stdlib only and self-contained: it runs in-process on 127.0.0.1 and, as
`python3 -c SOURCE PORT`, inside a container on the test's egress network.
It reports a sha256 of the auth it received, never the value itself, so the test can
check the real key arrived while the upstream holds no key anywhere.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-4o-mini-2024-07-18"
SSE_EVENTS: list[dict[str, Any]] = [
    {"id": "c1", "model": MODEL, "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
    {"id": "c1", "model": MODEL, "choices": [{"index": 0, "delta": {"content": "lo"}}]},
    {
        "id": "c1",
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}},
    },
]
JSON_ANSWER: dict[str, Any] = {
    "id": "c2",
    "model": MODEL,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 20},
}


def sse_body() -> bytes:
    events = [b"data: " + json.dumps(event).encode() + b"\n\n" for event in SSE_EVENTS]
    return b"".join(events) + b"data: [DONE]\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self._auth_headers()
        self.end_headers()
        self.wfile.write(body)

    def _auth_headers(self) -> None:
        auth = self.headers.get("authorization", "")
        self.send_header("x-auth-sha256", hashlib.sha256(auth.encode()).hexdigest())
        self.send_header("x-auth-headers", str(len(self.headers.get_all("authorization") or [])))
        self.send_header("x-api-key-seen", "yes" if self.headers.get("x-api-key") else "no")

    def do_GET(self) -> None:
        if self.path == "/":
            self._send(200, b"target ok\n", "text/plain")
        else:
            self._send(200, json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode())

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        if not request.get("stream"):
            self._send(200, json.dumps(JSON_ANSWER).encode())
            return
        delay = float(request.get("delay", 0.0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self._auth_headers()
        self.end_headers()
        for chunk in sse_body().split(b"\n\n")[:-1]:
            self.wfile.write(chunk + b"\n\n")
            self.wfile.flush()
            time.sleep(delay)
        self.close_connection = True


def serve(host: str, port: int) -> ThreadingHTTPServer:
    return ThreadingHTTPServer((host, port), Handler)


if __name__ == "__main__":
    serve("0.0.0.0", int(sys.argv[1])).serve_forever()
