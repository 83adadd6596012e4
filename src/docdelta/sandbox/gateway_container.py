"""Host side of the gateway: its image, and one gateway container per run.

The gateway container sits on the run's internal network (as `gateway`, the agent's only
peer) and on an egress network, and listens only on its internal address. The real keys
reach it over the container's stdin, once: never as an environment variable, a label, a
command-line argument or a file, so `docker inspect` and the daemon's disk never hold them.
The agent gets a random per-run token instead, which the gateway checks on every request.

Stdin then stays open as a watchdog (`stdin_once`): when docdelta closes it, or dies and
Docker closes it, the gateway stops accepting, finishes calls in flight and exits. Its
stdout is the call log, read only after it has exited, so every call it took is in it.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.errors
import requests
from docker import DockerClient
from docker.models.networks import Network

from docdelta.errors import InfraError
from docdelta.gateway import server as gateway_server
from docdelta.gateway.config import GatewayConfig, ModelCall, new_run_token
from docdelta.gateway.server import DRAIN_S, READY, setup_message
from docdelta.keys import Keys
from docdelta.sandbox.dockerapi import (
    AGENT_USER,
    ROLE_LABEL,
    bounded_log,
    close_stdin,
    raw_socket,
    remove_container,
)
from docdelta.sandbox.images import BuiltImage, ensure_image

SITE = "/opt/docdelta-gateway"
_RUNTIME_PACKAGES = ("httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi", "typing_extensions")
_READY_TIMEOUT_S = 30.0
_EXIT_TIMEOUT_S = DRAIN_S + 15.0
"""How long a stopping gateway may take to drain and exit before it is killed."""
LOG_MAX_BYTES = 64 * 1024 * 1024
"""The call log's cap on the daemon's disk: thousands of calls (refusals are folded)."""


def gateway_image(client: DockerClient, base: str) -> BuiltImage:
    """`base` (any image with python3 >= 3.11) plus the gateway package and httpx with its
    pure-Python dependencies, copied from this interpreter: no registry is needed."""
    files: dict[str, bytes] = {}
    gateway_dir = Path(gateway_server.__file__).parent  # the gateway package, not this one
    files["site/docdelta/__init__.py"] = b""  # the gateway needs nothing else from docdelta
    for source in sorted(gateway_dir.glob("*.py")):
        files[f"site/docdelta/gateway/{source.name}"] = source.read_bytes()
    for name in _RUNTIME_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue  # an optional dependency this httpx version does not use
        origin = Path(spec.origin)
        if spec.submodule_search_locations:
            for path in sorted(origin.parent.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    files[f"site/{name}/{path.relative_to(origin.parent)}"] = path.read_bytes()
        else:
            files[f"site/{origin.name}"] = origin.read_bytes()
    steps = [
        f"COPY site {SITE}",
        f"ENV PYTHONPATH={SITE} PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1",
        'ENTRYPOINT ["python3", "-m", "docdelta.gateway.server"]',
    ]
    return ensure_image(client, name="docdelta-gateway", base=base, steps=steps, files=files)


@dataclass(frozen=True)
class GatewayContainer:
    """What a run's gateway needs; `keys` stay in this process until they are written to the
    gateway's stdin (it routes only the upstreams they name)."""

    config: GatewayConfig
    image: str
    keys: Keys
    ca_pem: str | None = field(default=None, repr=False)
    egress_network: str | None = None
    """An existing network to reach the upstreams on; default: a fresh bridge per run."""

    def start(self, client: DockerClient, internal: Network, labels: Mapping[str, str]) -> RunningGateway:
        """Start the gateway on `internal` (alias `gateway`) and an egress network, hand it
        the keys over stdin and wait until it listens."""
        running = RunningGateway(client, self.config)
        try:
            running.attach(self, internal, dict(labels))
        except BaseException:
            running.close()
            raise
        return running


class RunningGateway:
    """One run's gateway container; `calls()` is its log, `close()` removes it."""

    def __init__(self, client: DockerClient, config: GatewayConfig) -> None:
        self._client = client
        self.config = config
        self.url = f"http://gateway:{config.port}"
        self.token = new_run_token()
        self._container: Any = None
        self._stdin: Any = None
        self._own_network: Network | None = None
        self._final_calls: list[ModelCall] | None = None

    def attach(self, gateway: GatewayContainer, internal: Network, labels: dict[str, str]) -> None:
        name = f"{internal.name}-gateway"
        if gateway.egress_network:
            egress = self._client.networks.get(gateway.egress_network)
        else:
            egress = self._client.networks.create(f"{internal.name}-egress", labels=labels)
            self._own_network = egress
        self._container = self._client.containers.create(
            gateway.image,
            name=name,
            # With stdin open, the SDK's create also sets StdinOnce: when our attach connection
            # closes, Docker closes the gateway's stdin. That is the watchdog.
            stdin_open=True,
            user=AGENT_USER,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            mem_limit="512m",
            pids_limit=64,
            network=egress.name,
            labels={**labels, ROLE_LABEL: "gateway"},
            environment={},
            log_config=bounded_log(LOG_MAX_BYTES),
        )
        internal.connect(self._container, aliases=["gateway"])
        self._stdin = self._container.attach_socket(params={"stdin": 1, "stream": 1})
        self._container.start()
        self._container.reload()
        listen = self._container.attrs["NetworkSettings"]["Networks"][internal.name]["IPAddress"]
        setup = setup_message(
            gateway.config.model_dump(mode="json"), gateway.keys.reveal(), self.token, gateway.ca_pem, listen
        )
        raw_socket(self._stdin).sendall(json.dumps(setup).encode() + b"\n")
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if READY in self._container.logs(stdout=False, stderr=True).decode(errors="replace"):
                return
            self._container.reload()
            if self._container.status == "exited":
                break
            time.sleep(0.05)
        log = self._container.logs(stdout=False, stderr=True).decode(errors="replace")[-2000:]
        raise InfraError(f"the model gateway did not start:\n{log}")

    def client_env(self) -> dict[str, str]:
        """What an agent needs to use the gateway: base URLs and the run token as its key."""
        env = {"DOCDELTA_GATEWAY_URL": self.url}
        for upstream in self.config.upstreams:
            env |= {var: f"{self.url}/{upstream.name}" for var in upstream.base_url_env}
            env |= {var: self.token for var in upstream.key_env}
        return env

    def calls(self) -> list[ModelCall]:
        """Every call the gateway took, oldest first. This stops the gateway first: the
        record is complete only once it accepts no more calls and has drained (a process
        the agent left behind can no longer spend), so read it once the agent is done."""
        self.stop()
        return list(self._final_calls or [])

    def budget_exceeded(self) -> bool:
        return any(call.error == "budget" for call in self.calls())

    def stop(self) -> None:
        """Close the gateway's stdin (it stops accepting, drains, logs the rest and exits),
        wait for it to exit, then read its whole log. A second call does nothing."""
        if self._final_calls is not None or self._container is None:
            return
        container = self._container
        close_stdin(self._stdin)
        with suppress(docker.errors.NotFound):
            try:
                container.wait(timeout=_EXIT_TIMEOUT_S)
            except requests.exceptions.RequestException:  # it did not exit in time
                container.kill()
                container.wait(timeout=_EXIT_TIMEOUT_S)
            self._final_calls = _read_calls(container)

    def close(self) -> None:
        self.stop()
        container, self._container = self._container, None
        network, self._own_network = self._own_network, None
        if container is not None:
            with suppress(docker.errors.NotFound):
                remove_container(container)
        if network is not None:
            with suppress(docker.errors.NotFound):
                network.remove()


def _read_calls(container: Any) -> list[ModelCall]:
    """The log of an exited container: the daemon has copied all its output by then."""
    out = container.logs(stdout=True, stderr=False).decode(errors="replace")
    return [ModelCall.model_validate_json(line) for line in out.splitlines() if line.startswith("{")]
