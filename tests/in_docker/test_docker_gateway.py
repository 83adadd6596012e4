"""The agent container in gateway mode, against containers this module created: it
reaches the gateway and nothing else, and the real key never leaves the gateway."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import UPSTREAM_PORT, control, leftovers, requests_seen
from toolchain import CheckoutFactory

from docdelta.gateway.config import Budget, GatewayConfig, Upstream
from docdelta.keys import Keys
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider, DockerSandbox
from docdelta.sandbox.gateway_container import GatewayContainer

pytestmark = pytest.mark.docker

KEY = f"sk-docdelta-test-{uuid.uuid4().hex}"

EGRESS_PROBE = """
import concurrent.futures, json, os, socket, sys, urllib.request
def reach(host):
    try:
        socket.create_connection((host, int(sys.argv[2])), timeout=3).close(); return True
    except OSError:
        return False
def resolves(name):
    try:
        socket.getaddrinfo(name, 80); return True
    except OSError:
        return False
def via_gateway(raw_target, token=os.environ["OPENAI_API_KEY"]):
    s = socket.create_connection(("gateway", 8080), timeout=5)
    head = "GET " + raw_target + " HTTP/1.1\\r\\nhost: x\\r\\nx-api-key: " + token + "\\r\\n\\r\\n"
    s.sendall(head.encode())
    return s.recv(100).split(b"\\r\\n")[0].decode()
def models():
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/models",
        headers={"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    return urllib.request.urlopen(request, timeout=10).status
server_ip, server_name = sys.argv[1], sys.argv[3]
# Failed lookups wait out resolver timeouts, so the probes run side by side.
probes = {
    "by_ip": lambda: reach(server_ip),
    "by_name": lambda: reach(server_name),
    "resolves_server": lambda: resolves(server_name),
    "resolves_outside": lambda: resolves("example.com"),
    "gateway": models,
    "no_token": lambda: via_gateway("/openai/models", token="docdelta-placeholder-key"),
    "absolute_form": lambda: via_gateway("http://" + server_ip + ":" + sys.argv[2] + "/"),
    "unknown_route": lambda: via_gateway("/elsewhere/v1/chat"),
}
with concurrent.futures.ThreadPoolExecutor(len(probes)) as pool:
    futures = {name: pool.submit(probe) for name, probe in probes.items()}
print(json.dumps({name: future.result() for name, future in futures.items()}))
"""

AGENT_CALLS = """
import json, os, urllib.request, urllib.error
def call(stream):
    body = {"model": "gpt-4o-mini", "stream": stream, "stream_options": {"include_usage": True}}
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
            "x-api-key": os.environ["OPENAI_API_KEY"],
            "content-type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
results = [call(True), call(False), call(False)]
open("agent-output.json", "w").write(json.dumps(results))
print(json.dumps(results))
"""


def gateway(egress: str, image: str, budget: Budget) -> GatewayContainer:
    route = Upstream(
        name="openai",
        base_url=f"http://{egress}-modelserver:{UPSTREAM_PORT}/v1",
        paths=["POST /chat/completions", "GET /models"],
        base_url_env=["OPENAI_BASE_URL"],
        key_env=["OPENAI_API_KEY"],
        key_from="OPENAI_API_KEY",
    )
    config = GatewayConfig(upstreams=[route], budget=budget)
    return GatewayContainer(config=config, image=image, keys=Keys({"openai": KEY}), egress_network=egress)


@pytest.fixture
def checkout(tmp_checkout: CheckoutFactory) -> Path:
    return tmp_checkout({"README.md": "hi\n"})


@pytest.fixture
def gated(
    client: Any,
    base_image: str,
    gateway_image: str,
    egress: str,
    checkout: Path,
    request: pytest.FixtureRequest,
) -> Iterator[DockerSandbox]:
    budget = getattr(request, "param", Budget())
    provider = DockerProvider(client, base_image, gateway=gateway(egress, gateway_image, budget))
    sandbox = provider.create(checkout, SandboxSpec(network="gateway"))
    with sandbox:
        yield sandbox
    provider.close()  # removal is off the run's path; closing the provider waits for it
    assert leftovers(client, sandbox.run_id) == [], "gateway, networks and volume are removed"


def test_the_agent_reaches_the_gateway_and_nothing_else(
    gated: DockerSandbox, client: Any, base_image: str, egress: str
) -> None:
    server = client.containers.get(f"{egress}-modelserver")
    server_ip = server.attrs["NetworkSettings"]["Networks"][egress]["IPAddress"]
    # The server is up and reachable from an unrestricted container on the same network...
    assert '"object": "list"' in control(
        client, base_image, egress, f"http://{server_ip}:{UPSTREAM_PORT}/v1/models"
    )
    # ...but not from the agent's container.
    out = gated.exec(["python3", "-c", EGRESS_PROBE, server_ip, str(UPSTREAM_PORT), server.name], timeout=60)
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout) == {
        "by_ip": False,
        "by_name": False,
        "resolves_server": False,
        "resolves_outside": False,
        "gateway": 200,
        "no_token": "HTTP/1.1 401 Gateway",
        "absolute_form": "HTTP/1.1 403 Gateway",
        "unknown_route": "HTTP/1.1 403 Gateway",
    }
    assert gated.isolation == "docker-internal"


@pytest.mark.parametrize("gated", [Budget(max_requests=2)], indirect=True)
def test_the_key_never_leaves_the_gateway_and_calls_are_logged(
    gated: DockerSandbox, client: Any, base_image: str, egress: str
) -> None:
    assert gated.gateway is not None
    out = gated.exec(["python3", "-c", AGENT_CALLS], timeout=60)
    assert out.exit_code == 0, out.stderr
    (s_status, s_body), (j_status, j_body), (b_status, b_body) = json.loads(out.stdout)
    events = [json.loads(line[6:]) for line in s_body.splitlines() if line.startswith("data: {")]
    assert s_status == 200 and s_body.endswith("data: [DONE]\n\n")
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"]) == "Hello"
    assert (j_status, json.loads(j_body)["choices"][0]["message"]["content"]) == (200, "Hello")
    assert b_status == 402 and json.loads(b_body)["error"]["type"] == "budget_exceeded"
    # The upstream got the real key, once, in the configured header, and not the run token.
    real_auth = hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()
    forwarded = [r for r in requests_seen(client, base_image, egress) if r["method"] == "POST"]
    assert [r["auth"] for r in forwarded] == [[["authorization", real_auth]]] * 2
    assert gated.gateway.budget_exceeded()

    calls = gated.gateway.calls()
    assert [(c.status, c.streamed, c.tokens_in, c.tokens_out, c.error) for c in calls] == [
        (200, True, 11, 2, None),
        (200, False, 100, 20, None),
        (402, False, None, None, "budget"),
    ]
    gateway_name = f"docdelta-{gated.run_id}-internal-gateway"
    places = {
        "agent inspect": json.dumps(client.api.inspect_container(f"docdelta-{gated.run_id}")),
        "gateway inspect": json.dumps(client.api.inspect_container(gateway_name)),
        "gateway logs": client.containers.get(gateway_name).logs().decode(),
        "agent environ": gated.exec(
            ["sh", "-c", "cat /proc/[0-9]*/environ | tr '\\0' '\\n'"]
        ).stdout.decode(),
        "agent result file": gated.read_file("agent-output.json").decode(),
        "call log": json.dumps([c.model_dump() for c in calls]),
    }
    assert gated.gateway.token in places["agent environ"], "the probe does read the agent's environments"
    assert [where for where, text in places.items() if KEY in text] == []
    gated.close()
    assert gated.gateway.calls() == calls, "the call log outlives the gateway container"
