"""The gateway's container side attacked: only its own run can use it, and
nothing of a run outlives a `kill -9` of docdelta.

The attacks: a container on the egress network (where, with `gateway.egress_network`, any
other container of the project may sit) and a container on the run's internal network
without the run token try the gateway; docdelta is SIGKILLed mid-run while the agent
sleeps. Synchronised on Docker's own state (`wait` on the containers), never on sleeps.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import UPSTREAM_PORT, leftovers
from modelserver.script import Script, TextTurn, TurnUsage
from toolchain import CheckoutFactory

from docdelta.gateway.config import OPENAI, GatewayConfig
from docdelta.keys import Keys
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider, DockerSandbox
from docdelta.sandbox.dockerapi import LABEL
from docdelta.sandbox.gateway_container import GatewayContainer

pytestmark = pytest.mark.docker

KEY = f"sk-docdelta-hostile-{uuid.uuid4().hex}"
KILL_BOUND_S = 30.0
"""After docdelta is SIGKILLed, the agent's container stops as soon as Docker notices the
attach connection is gone (about a second here) and the gateway once it has drained
(at most its DRAIN_S, 30 s, with calls in flight; about a second without)."""

PROBE = """
import json, socket, sys
host, token = sys.argv[1], sys.argv[2]
try:
    s = socket.create_connection((host, 8080), timeout=5)
except OSError as error:
    print(json.dumps({"connect": type(error).__name__})); raise SystemExit
auth = ("authorization: Bearer " + token + "\\r\\n") if token else ""
s.sendall(("GET /openai/models HTTP/1.1\\r\\nhost: x\\r\\n" + auth + "\\r\\n").encode())
reply = b""
while chunk := s.recv(65536):  # to the end (the gateway closes): a served call, not a hang-up
    reply += chunk
print(json.dumps({"status": reply.split(b"\\r\\n")[0].decode()}))
"""


CALLS = """
import json, os, sys, urllib.request
def call():
    body = {"model": "gpt-4o-mini", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    return urllib.request.urlopen(request, timeout=30).status
if sys.argv[1] == "later":  # left behind by the agent: calls once the host says so (fifos)
    open("go").read()
    open("done", "w").write(str(call()))
else:
    print([call() for _ in range(int(sys.argv[1]))])
"""


@pytest.fixture(scope="module")
def modelserver_script() -> Script:
    return Script(
        name="hostile", turns=[TextTurn(text="ok", usage=TurnUsage(input_tokens=5, output_tokens=1))] * 12
    )


def gateway_for(egress: str, image: str) -> GatewayContainer:
    route = OPENAI.model_copy(update={"base_url": f"http://{egress}-modelserver:{UPSTREAM_PORT}/v1"})
    return GatewayContainer(
        config=GatewayConfig(upstreams=[route]),
        image=image,
        keys=Keys({"openai": KEY}),
        egress_network=egress,
    )


@pytest.fixture
def checkout(tmp_checkout: CheckoutFactory) -> Path:
    return tmp_checkout({"README.md": "hi\n"})


@pytest.fixture
def gated(
    client: Any, base_image: str, gateway_image: str, egress: str, checkout: Path
) -> Iterator[DockerSandbox]:
    provider = DockerProvider(client, base_image, gateway=gateway_for(egress, gateway_image))
    with provider.create(checkout, SandboxSpec(network="gateway")) as sandbox:
        yield sandbox


def probe(client: Any, image: str, network: str, host: str, token: str = "") -> dict[str, str]:
    out = client.containers.run(
        image, ["python3", "-c", PROBE, host, token], network=network, remove=True, labels={LABEL: "1"}
    )
    result: dict[str, str] = json.loads(out)
    return result


def test_only_the_runs_own_agent_can_use_the_gateway(
    gated: DockerSandbox, client: Any, base_image: str, egress: str
) -> None:
    assert gated.gateway is not None
    gateway = client.containers.get(f"docdelta-{gated.run_id}-internal-gateway")
    networks = gateway.attrs["NetworkSettings"]["Networks"]
    internal = f"docdelta-{gated.run_id}-internal"
    # From the egress network, even with the token: the gateway does not listen there.
    on_egress = probe(client, base_image, egress, networks[egress]["IPAddress"], gated.gateway.token)
    assert on_egress == {"connect": "ConnectionRefusedError"}
    # On the run's internal network, a client without the token (or with a guessed one) gets 401.
    assert probe(client, base_image, internal, "gateway") == {"status": "HTTP/1.1 401 Gateway"}
    assert probe(client, base_image, internal, "gateway", "docdelta-placeholder-key") == {
        "status": "HTTP/1.1 401 Gateway"
    }
    # The agent, with the token it was given, is served.
    assert probe(client, base_image, internal, "gateway", gated.gateway.token) == {
        "status": "HTTP/1.1 200 OK"
    }
    calls = gated.gateway.calls()
    assert [(c.status, c.error) for c in calls] == [(401, "unauthorized")] * 2 + [(200, None)]
    assert all(KEY not in json.dumps(c.model_dump()) for c in calls)


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import docker
    from docdelta.gateway.config import OPENAI, GatewayConfig
    from docdelta.keys import Keys
    from docdelta.sandbox.gateway_container import GatewayContainer
    from docdelta.sandbox.base import SandboxSpec
    from docdelta.sandbox.docker import DockerProvider
    image, checkout, egress, gateway_image, url = sys.argv[1:6]
    route = OPENAI.model_copy(update={"base_url": url})
    config = GatewayConfig(upstreams=[route])
    gateway = GatewayContainer(config, gateway_image, Keys({"openai": "sk-x"}), egress_network=egress)
    provider = DockerProvider(docker.from_env(), image, gateway=gateway)
    with provider.create(Path(checkout), SandboxSpec(network="gateway")) as sb:
        sb.exec(["sleep", "60"], timeout=0.5)  # timed out: the restart brings the workspace holder
        print(sb.run_id, flush=True)
        sb.exec(["sh", "-c", "sleep 600 & sleep 600"], timeout=900)
    """
)


def test_nothing_of_a_run_outlives_kill_9_of_docdelta(
    client: Any, base_image: str, gateway_image: str, egress: str, checkout: Path
) -> None:
    url = f"http://{egress}-modelserver:{UPSTREAM_PORT}/v1"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, base_image, str(checkout), egress, gateway_image, url],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    run_id = child.stdout.readline().strip()
    agent = client.containers.get(f"docdelta-{run_id}")
    gateway = client.containers.get(f"docdelta-{run_id}-internal-gateway")
    holder = client.containers.get(f"docdelta-{run_id}-disk")
    assert (agent.status, gateway.status, holder.status) == ("running",) * 3
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    # Docker's wait returns when each container has stopped; past the bound it raises.
    agent.wait(timeout=KILL_BOUND_S)
    gateway.wait(timeout=KILL_BOUND_S)
    holder.wait(timeout=KILL_BOUND_S)
    for container in (agent, gateway, holder):
        container.reload()
    assert (agent.status, gateway.status, holder.status) == ("exited",) * 3
    assert leftovers(client, run_id), "stopped, but still there until the next start"
    DockerProvider(client, base_image)  # every start removes what dead owners left
    assert leftovers(client, run_id) == []


def test_the_call_log_has_every_call_including_those_after_the_agent_exits(gated: DockerSandbox) -> None:
    assert gated.gateway is not None
    left = gated.exec(
        ["sh", "-c", 'mkfifo go done && (nohup python3 -c "$0" later >/dev/null 2>&1 &)', CALLS]
    )
    assert left.exit_code == 0, left.stderr
    ran = gated.exec(["python3", "-c", CALLS, "10"], timeout=120)
    assert ran.stdout.strip() == b"[" + b", ".join([b"200"] * 10) + b"]", ran.stderr
    # The agent has exited; the process it left behind calls now, and the host reads the
    # record once that call is answered (both sides wait on fifos, not on time).
    assert gated.exec(["sh", "-c", "echo go > go"], timeout=60).exit_code == 0
    assert gated.exec(["cat", "done"], timeout=60).stdout == b"200"
    calls = gated.gateway.calls()
    assert [c.status for c in calls] == [200] * 11, "every call is in the record, the late one too"
    assert all(c.cost_usd for c in calls), "and billed"
