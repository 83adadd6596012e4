"""Gateway overhead on a streamed response: time to last byte through the real gateway
container against a direct connection to the same upstream. Goal: <= 1.2x.

The layout is a run's: the scripted model server (the upstream) in a container on an
egress network, the gateway container on that network and on an internal one, and the
client in a container on both, so it reaches the upstream directly or through the
gateway over the same Docker bridges an agent uses. Each request opens a fresh
connection (the gateway closes every response's connection, and so does the upstream
after a stream), and direct and gateway requests alternate so drift hits both alike.

Two streams, each a Chat Completions answer with `stream_options.include_usage`:

- **paced**: 40 SSE events 25 ms apart (the scripted server's `stream_interval_s`), about
  one second to last byte. Hosted models stream roughly 20-100 tokens a second with about
  one token per event, so 25 ms is a mid-range model; 40 events is a *short* answer (tool
  calls and final answers run to hundreds of tokens), which makes the fixed per-request
  cost weigh more here than in a real run: the ratio printed is an upper bound for
  longer answers. This is the ratio the goal is about.
- **unpaced**: the same events sent at once, so time to last byte is almost all setup;
  its added milliseconds per request are the gateway's fixed cost (an extra hop, its
  connection to the upstream, usage accounting). Its ratio is printed but means little.

Needs Docker and the base image (DOCDELTA_TEST_IMAGE, default docdelta-base:latest);
everything it creates carries docdelta labels and is removed on exit.

    .venv/bin/python bench/bench_gateway.py [ROUNDS]    # paced requests per path (15)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

import docker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from docker_helpers import UPSTREAM_PORT, modelserver_image
from modelserver.script import Script, TextTurn
from modelserver.wire import CHUNK

from docdelta.gateway.config import GatewayConfig, Upstream
from docdelta.keys import Keys
from docdelta.sandbox.dockerapi import LABEL, RUN_LABEL
from docdelta.sandbox.gateway_container import GatewayContainer, gateway_image

SMOKE_ARGS = ["1"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

EVENTS = 40
INTERVAL_S = 0.025
UNPACED_PER_PACED = 4
"""Unpaced requests are cheap and their few milliseconds are noisy: take more of them."""
TEXT = ("The gateway passes every event through as it arrives. " * 10)[: (EVENTS - 4) * CHUNK]
"""Chat Completions framing adds 4 events to the text's deltas: role, finish, usage, [DONE]."""
REQUEST = {
    "model": "gpt-4o-mini",
    "stream": True,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "Say something."}],
}

CLIENT = r"""
import http.client, json, sys, time
from urllib.parse import urlsplit

spec = json.loads(sys.argv[1])
body = json.dumps(spec["request"]).encode()
headers = {"content-type": "application/json", "authorization": "Bearer " + spec["key"]}

def fetch(url):
    # Seconds from connecting to the last byte of the response, and its SSE event count.
    parts = urlsplit(url)
    started = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    connection.request("POST", parts.path, body, headers)
    response = connection.getresponse()
    data = response.read()
    elapsed = time.perf_counter() - started
    connection.close()
    if response.status != 200 or not data.rstrip().endswith(b"data: [DONE]"):
        sys.exit(f"{url}: HTTP {response.status}, incomplete stream: {data[-300:]!r}")
    return elapsed, data.count(b"\n\n")

results = []
for direct, gateway, rounds in spec["series"]:
    for url in (direct, gateway):  # wait until it listens; the first request also warms up
        for _ in range(100):
            try:
                fetch(url)
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit(f"{url}: not listening")
    times = {direct: [], gateway: []}
    for i in range(rounds):
        for url in ((direct, gateway) if i % 2 == 0 else (gateway, direct)):
            elapsed, events = fetch(url)
            times[url].append(elapsed)
    results.append({"direct": times[direct], "gateway": times[gateway], "events": events})
print(json.dumps(results))
"""


def run_client(
    client: Any, image: str, networks: list[str], spec: dict[str, Any], labels: dict[str, str]
) -> Any:
    """Run CLIENT in a container attached to every network in `networks`; its JSON output."""
    container = client.containers.create(
        image, ["python3", "-c", CLIENT, json.dumps(spec)], network=networks[0], labels=labels
    )
    try:
        for name in networks[1:]:
            client.networks.get(name).connect(container)
        container.start()
        status = container.wait(timeout=600)
        out = container.logs(stdout=True, stderr=False).decode()
        if status["StatusCode"] != 0:
            sys.exit(f"bench client failed: {container.logs(stdout=False, stderr=True).decode()[-2000:]}")
        return json.loads(out)
    finally:
        container.remove(force=True)


def report(title: str, times: dict[str, Any], goal: bool) -> None:
    """Print one stream's medians, the added time per request and the ratio."""
    direct, gateway = times["direct"], times["gateway"]
    d, g = statistics.median(direct), statistics.median(gateway)
    added = statistics.median(b - a for a, b in zip(direct, gateway, strict=True))
    ratio = g / d
    verdict = f"   (goal <= 1.2x: {'met' if ratio <= 1.2 else 'NOT met'})" if goal else ""
    print(title)
    print(f"  direct   : median time to last byte {d * 1000:8.1f} ms over {len(direct)}")
    print(f"  gateway  : median time to last byte {g * 1000:8.1f} ms over {len(gateway)}")
    print(f"  added    : {added * 1000:8.1f} ms per request (median of paired differences)")
    print(f"  ratio    : {ratio:.3f}x{verdict}")


def start_upstream(
    client: Any, image: str, network: str, name: str, script: Script, labels: dict[str, str]
) -> Any:
    """The scripted model server replaying `script` as `name` on `network` (not yet waited for:
    the client retries until it listens)."""
    command = f'printf %s "$SCRIPT" | python3 -m modelserver --host 0.0.0.0 --port {UPSTREAM_PORT}'
    return client.containers.run(
        image,
        ["sh", "-c", command],
        environment={"SCRIPT": script.model_dump_json(exclude_none=True)},
        name=name,
        network=network,
        labels=labels,
        detach=True,
    )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    client = docker.from_env()
    base = os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")
    server_image, proxy_image = modelserver_image(client, base), gateway_image(client, base).tag
    name = f"docdelta-bench-{uuid.uuid4().hex[:8]}"
    egress_name = f"{name}-egress"
    labels = {LABEL: "1", RUN_LABEL: name}
    egress = client.networks.create(egress_name, labels=labels)
    internal = client.networks.create(name, internal=True, labels=labels)
    servers: list[Any] = []
    running = None
    try:
        series = []
        for route, interval, n in (
            ("paced", INTERVAL_S, rounds),
            ("unpaced", 0.0, rounds * UNPACED_PER_PACED),
        ):
            turns = [TextTurn(text=TEXT)] * (2 * n + 2)  # n per path, + one warm-up each
            script = Script(name=route, stream_interval_s=interval, turns=turns)
            servers.append(
                start_upstream(client, server_image, egress_name, f"{name}-{route}", script, labels)
            )
            series.append((route, f"http://{name}-{route}:{UPSTREAM_PORT}/v1", n))
        routes = [
            Upstream(name=r, base_url=url, paths=["POST /chat/completions"], key_from="K")
            for r, url, _ in series
        ]
        config = GatewayConfig(upstreams=routes)
        gateway = GatewayContainer(
            config, proxy_image, Keys({r.name: "sk-bench" for r in routes}), egress_network=egress_name
        )
        running = gateway.start(client, internal, labels)
        paths = [
            [f"{url}/chat/completions", f"{running.url}/{r}/chat/completions", n] for r, url, n in series
        ]
        spec = {"request": REQUEST, "key": running.token, "series": paths}
        paced, unpaced = run_client(client, base, [name, egress_name], spec, labels)
    finally:
        if running is not None:
            running.close()
        for server in servers:
            server.remove(force=True)
        internal.remove()
        egress.remove()
    interval_ms = INTERVAL_S * 1000
    report(f"paced stream: {paced['events']} SSE events {interval_ms:.0f} ms apart", paced, goal=True)
    report(f"unpaced stream: the same {unpaced['events']} events at once", unpaced, goal=False)


if __name__ == "__main__":
    main()
