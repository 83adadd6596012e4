"""Pacing of the scripted model server: a script's `stream_interval_s` spaces a streamed
answer's SSE events as a model spaces its tokens (what bench/bench_gateway.py times the
gateway on), changes nothing but timing, and is off by default."""

from __future__ import annotations

import statistics
import time
from itertools import pairwise

import httpx
import pytest
from modelserver import ScriptedModelServer
from modelserver.script import Script, TextTurn

TEXT = "Paced like a model's tokens. " * 2  # 58 characters: 5 deltas of wire.CHUNK characters
INTERVAL = 0.05
REQUEST = {"model": "m", "stream": True, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def stream(script: Script) -> tuple[list[float], bytes]:
    """(seconds from sending the request to the arrival of each SSE event, the raw body)."""
    with ScriptedModelServer(script) as server, httpx.Client(timeout=10) as client:
        started = time.monotonic()
        arrivals: list[float] = []
        body = b""
        with client.stream("POST", f"{server.url}/v1/messages", json=REQUEST) as response:
            for chunk in response.iter_raw():
                body += chunk
                arrivals += [time.monotonic() - started] * (body.count(b"\n\n") - len(arrivals))
    return arrivals, body


def test_events_of_a_paced_stream_arrive_the_interval_apart() -> None:
    arrivals, _ = stream(Script(name="paced", stream_interval_s=INTERVAL, turns=[TextTurn(text=TEXT)]))

    assert len(arrivals) == 11  # message_start, ping, block start, 5 deltas, block stop, delta, stop
    # Event k cannot leave the server before k intervals have passed ...
    assert all(at >= k * INTERVAL for k, at in enumerate(arrivals))
    # ... and each reaches the client as it is sent, not batched at the end of the stream.
    gaps = [later - earlier for earlier, later in pairwise(arrivals)]
    assert statistics.median(gaps) >= 0.8 * INTERVAL
    assert arrivals[0] < arrivals[-1] - 5 * INTERVAL


def test_pacing_is_off_by_default_and_changes_only_the_timing() -> None:
    default = Script(name="same", turns=[TextTurn(text=TEXT)])
    assert default.stream_interval_s == 0
    unpaced, unpaced_body = stream(default)
    paced, paced_body = stream(default.model_copy(update={"stream_interval_s": INTERVAL}))

    assert paced_body == unpaced_body  # byte for byte the same stream
    assert unpaced[-1] < 0.5 * (len(paced) - 1) * INTERVAL <= paced[-1]


def test_the_pydantic_script_model_bounds_the_interval() -> None:
    with pytest.raises(ValueError, match="stream_interval_s"):
        Script(name="bad", stream_interval_s=-1, turns=[])
