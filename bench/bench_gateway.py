"""Gateway overhead on a streamed response: time to last byte through the gateway
against a direct connection to the same local upstream (the scripted model API on
127.0.0.1, sending its SSE events with a pause between them). Goal (issue 3): <= 1.2x.

    .venv/bin/python bench/bench_gateway.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import scripted_upstream
from docker_helpers import gateway_on_loopback

from docdelta.gateway.config import GatewayConfig, Upstream

REQUEST = {"model": "gpt-4o-mini", "stream": True, "delay": 0.02}


def time_to_last_byte(client: httpx.Client, url: str) -> float:
    started = time.monotonic()
    with client.stream("POST", url, json=REQUEST, headers={"authorization": "Bearer x"}) as response:
        for _ in response.iter_raw():
            pass
    return time.monotonic() - started


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    upstream = scripted_upstream.serve("127.0.0.1", 0)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{upstream.server_address[1]}"
    route = Upstream(name="openai", base_url=f"{base}/v1", paths=["/chat/completions"], key_from="K")
    gateway = gateway_on_loopback(GatewayConfig(upstreams=[route]), {"openai": "sk-bench"})
    with gateway as (url, _, _log), httpx.Client() as client:
        direct_url, proxied_url = f"{base}/v1/chat/completions", f"{url}/openai/chat/completions"
        time_to_last_byte(client, direct_url), time_to_last_byte(client, proxied_url)  # warm up
        direct = statistics.median(time_to_last_byte(client, direct_url) for _ in range(rounds))
        proxied = statistics.median(time_to_last_byte(client, proxied_url) for _ in range(rounds))
    upstream.shutdown()
    print(f"direct   : median time to last byte {direct * 1000:7.1f} ms over {rounds}")
    print(f"gateway  : median time to last byte {proxied * 1000:7.1f} ms over {rounds}")
    print(f"ratio    : {proxied / direct:.3f}x (goal <= 1.2x)")


if __name__ == "__main__":
    main()
