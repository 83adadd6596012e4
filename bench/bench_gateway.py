"""Gateway overhead on a streamed response: time to last byte through the gateway
against a direct connection to the same local upstream (the scripted model server on
127.0.0.1, streaming a long answer in many SSE events). Goal (issue 3): <= 1.2x on a
real model's stream. The scripted server sends its events without the pauses a model
makes, so the ratio printed here is an upper bound; the added milliseconds per request
are the number to watch.

    .venv/bin/python bench/bench_gateway.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from docker_helpers import gateway_on_loopback

from docdelta.gateway.config import GatewayConfig, Upstream
from docdelta.modelserver import ScriptedModelServer
from docdelta.modelserver.script import Script, TextTurn

REQUEST = {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True}}
ANSWER = "The gateway passes every event through as it arrives. " * 40


def time_to_last_byte(client: httpx.Client, url: str) -> float:
    started = time.monotonic()
    with client.stream("POST", url, json=REQUEST, headers={"authorization": "Bearer x"}) as response:
        for _ in response.iter_raw():
            pass
    return time.monotonic() - started


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    script = Script(name="bench", turns=[TextTurn(text=ANSWER)] * (2 * rounds + 2))
    upstream = ScriptedModelServer(script)
    base = upstream.start()
    route = Upstream(name="openai", base_url=f"{base}/v1", paths=["/chat/completions"], key_from="K")
    gateway = gateway_on_loopback(GatewayConfig(upstreams=[route]), {"openai": "sk-bench"})
    with gateway as (url, _, _log), httpx.Client() as client:
        direct_url, proxied_url = f"{base}/v1/chat/completions", f"{url}/openai/chat/completions"
        time_to_last_byte(client, direct_url), time_to_last_byte(client, proxied_url)  # warm up
        direct = statistics.median(time_to_last_byte(client, direct_url) for _ in range(rounds))
        proxied = statistics.median(time_to_last_byte(client, proxied_url) for _ in range(rounds))
    upstream.stop()
    print(f"direct   : median time to last byte {direct * 1000:7.1f} ms over {rounds}")
    print(f"gateway  : median time to last byte {proxied * 1000:7.1f} ms over {rounds}")
    print(f"added    : {(proxied - direct) * 1000:7.1f} ms per request")
    print(f"ratio    : {proxied / direct:.3f}x (unpaced stream: an upper bound for a model's)")


if __name__ == "__main__":
    main()
