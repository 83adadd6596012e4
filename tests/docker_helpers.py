"""Helpers of the Docker tests (a module of its own: `conftest` names are ambiguous)."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from docdelta.gateway.config import GatewayConfig
from docdelta.gateway.runtime import PLACEHOLDER_KEY
from docdelta.gateway.server import Gateway, build, setup_message
from docdelta.sandbox.dockerapi import LABEL, RUN_LABEL

UPSTREAM_PORT = 8000


def leftovers(client: Any, run_id: str) -> list[str]:
    """Names of every container, network and volume a run left behind."""
    run = {"label": f"{RUN_LABEL}={run_id}"}
    return [
        *(c.name for c in client.containers.list(all=True, filters=run)),
        *(n.name for n in client.networks.list(filters=run)),
        *(v.name for v in client.volumes.list(filters=run)),
    ]


def control(client: Any, image: str, network: str, url: str) -> str:
    """GET url from an unrestricted container on `network` (retrying while the server starts)."""
    probe = (
        "import sys, time, urllib.request\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()); break\n"
        "    except OSError:\n"
        "        time.sleep(0.1)\n"
    )
    out: bytes = client.containers.run(
        image, ["python3", "-c", probe, url], network=network, remove=True, labels={LABEL: "1"}
    )
    return out.decode()


def wait_gone(client: Any, run_id: str, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := leftovers(client, run_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@contextmanager
def gateway_on_loopback(
    config: GatewayConfig, keys: Mapping[str, str]
) -> Iterator[tuple[str, Gateway, io.StringIO]]:
    """The gateway process's handler served on 127.0.0.1 from a thread: (url, gateway, log)."""
    gateway = build(setup_message(config.model_dump(mode="json"), keys, PLACEHOLDER_KEY))
    gateway.log = log = io.StringIO()
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(gateway.handle, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", gateway, log
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        server.close()
        loop.run_until_complete(gateway.client.aclose())
        loop.close()
