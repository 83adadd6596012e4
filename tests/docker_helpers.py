"""Helpers of the Docker tests (a module of its own: `conftest` names are ambiguous)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import socket
import tarfile
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelserver.script import Script

from docdelta.agents.base import Agent, AgentContext
from docdelta.agents.images import CLI_PREFIX, LAYER_LABEL, NODE, NPM_LABEL
from docdelta.agents.models import AgentOutcome
from docdelta.gateway.config import GatewayConfig, Upstream
from docdelta.gateway.models import ModelCall
from docdelta.gateway.server import Gateway, build, setup_message
from docdelta.keys import Keys
from docdelta.sandbox.base import ExecResult, SandboxSpec
from docdelta.sandbox.dockerapi import LABEL, OWNER_LABEL, RUN_LABEL

UPSTREAM_PORT = 8000
ANTHROPIC_UPSTREAM = """\
    - name: anthropic
      base_url: http://{network}-modelserver:{port}
      paths: ["POST /v1/messages", "GET /v1/models"]
      query: [beta]
      auth_header: x-api-key
      auth_prefix: ""
      base_url_env: [ANTHROPIC_BASE_URL]
      key_env: [ANTHROPIC_API_KEY]
      key_from: ANTHROPIC_API_KEY
"""
"""An item of `.docdelta.yml`'s `gateway.upstreams` (indented for it): Anthropic's API served
by the scripted model server of `model_server_network` (`anthropic_upstream` fills it in).
One copy for the Action's tests that write it (the act test, the real-agents test)."""


def anthropic_upstream(network: str) -> str:
    """`ANTHROPIC_UPSTREAM` for the model server on `network`."""
    return ANTHROPIC_UPSTREAM.format(network=network, port=UPSTREAM_PORT)


RUN_TOKEN = "docdelta-run-test-token"
"""The run token of gateways the tests start in-process (a real run draws a random one)."""


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
        "        body = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()\n"
        # A last line without a newline can be lost from the container's log: end with one.
        "        sys.stdout.write(body if body.endswith('\\n') else body + '\\n'); break\n"
        "    except OSError:\n"
        "        time.sleep(0.1)\n"
    )
    out: bytes = client.containers.run(
        image, ["python3", "-c", probe, url], network=network, remove=True, labels={LABEL: "1"}
    )
    return out.decode()


def requests_seen(client: Any, image: str, network: str) -> list[dict[str, Any]]:
    """Every request the egress network's scripted model server received (conftest `egress`)."""
    url = f"http://{network}-modelserver:{UPSTREAM_PORT}/_docdelta/requests"
    log: list[dict[str, Any]] = json.loads(control(client, image, network, url))["requests"]
    return log


async def _drain(gateway: Gateway) -> None:
    if gateway.active:
        await asyncio.wait(set(gateway.active))


@contextmanager
def gateway_on_loopback(
    config: GatewayConfig, keys: Mapping[str, str]
) -> Iterator[tuple[str, Gateway, io.StringIO]]:
    """The gateway process's handler served on 127.0.0.1 from a thread: (url, gateway, log)."""
    gateway = build(setup_message(config.model_dump(mode="json"), keys, RUN_TOKEN))
    gateway.log = log = io.StringIO()
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(gateway.handle, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", gateway, log
    finally:
        # As the gateway program does when stopped: every call in flight finishes and is logged.
        asyncio.run_coroutine_threadsafe(_drain(gateway), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        server.close()
        loop.run_until_complete(gateway.client.aclose())
        loop.close()


# ------------------------------------------------- real agent CLIs
SCRIPTED_CHAT = Upstream(
    name="openai",
    base_url="http://scripted/v1",
    paths=["/chat/completions"],
    base_url_env=["OPENAI_BASE_URL"],
    key_env=["OPENAI_API_KEY"],
    key_from="OPENAI_API_KEY",
).model_copy(update={"base_url": "{server}/v1"})
"""The gateway's OpenAI route to `run_scripted_agent`'s server (`{server}` is filled in
there), Chat Completions only: what the OpenAI-compatible agents (openai, copilot,
opencode) speak."""


@contextmanager
def own_network(client: Any) -> Iterator[str]:
    """A bridge network of this test only, labelled so a leftover is found, removed after."""
    name = f"docdelta-test-{uuid.uuid4().hex[:8]}"
    network = client.networks.create(name, labels={LABEL: "1", RUN_LABEL: name})
    try:
        yield name
    finally:
        network.remove()


@dataclass(frozen=True)
class ScriptedRun:
    """One agent run against the scripted model server through a real gateway."""

    outcome: AgentOutcome
    result: ExecResult
    calls: list[ModelCall]
    requests: list[dict[str, Any]]
    """Every request the scripted server received (its `/_docdelta/requests` log)."""


def modelserver_image(client: Any, base_image: str) -> str:
    """`base_image` plus the stdlib scripted model server (`python3 -m modelserver`)."""
    from modelserver.script import site_files  # noqa: PLC0415

    from docdelta.sandbox.images import ensure_image  # noqa: PLC0415

    files = {f"site/{rel}": data for rel, data in site_files().items()}
    steps = ["COPY site /opt/docdelta-modelserver", "ENV PYTHONPATH=/opt/docdelta-modelserver"]
    return ensure_image(client, name="docdelta-modelserver", base=base_image, steps=steps, files=files).tag


def with_home_files(client: Any, image: str, files: Mapping[str, str]) -> str:
    """`image` with `files` (paths relative to the agent user's home, /home/agent) planted,
    owned by the agent user: what a developer's machine would hold in ~."""
    from docdelta.sandbox.images import ensure_image  # noqa: PLC0415

    steps = ["USER root", "COPY home /home/agent", "RUN chown -R 1000:1000 /home/agent"]
    context = {f"home/{rel}": text.encode() for rel, text in files.items()}
    return ensure_image(client, name="docdelta-test-home", base=image, steps=steps, files=context).tag


def run_scripted_agent(
    client: Any,
    *,
    agent: Agent,
    image: str,
    server_image: str,
    gateway_image: str,
    network: str,
    upstream: Upstream,
    script: Script,
    checkout: Path,
    prompt: str,
    key: str,
    prepare: Sequence[str] = (),
    ctx: AgentContext | None = None,
    fingerprints: Mapping[str, Sequence[str]] | None = None,
) -> ScriptedRun:
    """Serve `script` on `network` as `<network>-scripted:8000`, route `upstream` (whose
    base_url may use `{server}` for that address) through a real gateway holding `key`,
    run `agent` in a gateway-mode sandbox of `image` (after the shell commands `prepare`)
    and return what it did, what the gateway logged and what the server received. With
    `fingerprints` (docdelta.instructions.audit's, id -> line hashes) the gateway audits each request
    for them, as in a matrix run."""
    from docdelta.sandbox.docker import DockerProvider  # noqa: PLC0415
    from docdelta.sandbox.gateway_container import GatewayContainer  # noqa: PLC0415

    name = f"{network}-scripted"
    server = client.containers.run(
        server_image,
        ["sh", "-c", 'printf %s "$SCRIPT" | python3 -m modelserver --host 0.0.0.0 --port 8000'],
        environment={"SCRIPT": script.model_dump_json(exclude_none=True)},
        name=name,
        network=network,
        labels={LABEL: "1", RUN_LABEL: name},
        detach=True,
    )
    try:
        base_url = f"http://{name}:8000"
        _server_log(server)  # waits until it listens
        route = upstream.model_copy(update={"base_url": upstream.base_url.format(server=base_url)})
        gateway = GatewayContainer(
            config=GatewayConfig(upstreams=[route], model=agent.model),
            image=gateway_image,
            keys=Keys({route.name: key}),
            egress_network=network,
        )
        ctx = ctx or AgentContext(seed=1, timeout_s=300)
        with DockerProvider(client, image, gateway=gateway).create(
            checkout, SandboxSpec(network="gateway", fingerprints=fingerprints or {})
        ) as sandbox:
            for command in prepare:
                done = sandbox.exec(["sh", "-c", command])
                assert done.exit_code == 0, done.stderr
            invocation = agent.invocation(prompt, sandbox, ctx)
            for path, data in invocation.files.items():
                sandbox.write_file(path, data)
            result = sandbox.exec(
                invocation.argv, stdin=invocation.stdin, env=invocation.env, timeout=ctx.timeout_s
            )
            outcome = agent.parse(result, sandbox, ctx)
            assert sandbox.gateway is not None
            calls = sandbox.gateway.calls()
        return ScriptedRun(outcome=outcome, result=result, calls=calls, requests=_server_log(server))
    finally:
        server.remove(force=True)


def _server_log(server: Any) -> list[dict[str, Any]]:
    """The scripted server's request log, read inside its container (retrying while it starts)."""
    fetch = (
        "import time, urllib.request\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        url = 'http://127.0.0.1:8000/_docdelta/requests'\n"
        "        print(urllib.request.urlopen(url).read().decode()); break\n"
        "    except OSError:\n"
        "        time.sleep(0.1)\n"
    )
    done = server.exec_run(["python3", "-c", fetch])
    assert done.exit_code == 0 and done.output.startswith(b"{"), done.output
    requests: list[dict[str, Any]] = json.loads(done.output)["requests"]
    return requests


def _owned(client: Any, pid: int) -> list[Any]:
    """Every container, network and volume whose owner label names the docdelta process
    `pid` on this host (in our PID namespace), containers first (they hold the rest)."""
    prefix = f"{socket.gethostname()}/{os.readlink('/proc/self/ns/pid')}/{pid}/"
    label = {"label": OWNER_LABEL}

    def mine(labels: dict[str, str] | None) -> bool:
        return (labels or {}).get(OWNER_LABEL, "").startswith(prefix)

    return [
        *(c for c in client.containers.list(all=True, filters=label, ignore_removed=True) if mine(c.labels)),
        *(n for n in client.networks.list(filters=label) if mine(n.attrs.get("Labels"))),
        *(v for v in client.volumes.list(filters=label) if mine(v.attrs.get("Labels"))),
    ]


def owned_by(client: Any, pid: int) -> list[str]:
    """Names of what the docdelta process `pid` left: what that one run left, whatever
    other runs share the engine."""
    return [thing.name for thing in _owned(client, pid)]


def remove_owned_by(client: Any, pid: int) -> None:
    """Remove what the process `pid` left, so a leak fails only the test that made it."""
    for thing in _owned(client, pid):
        if hasattr(thing, "kill"):
            thing.remove(force=True, v=True)
        else:
            thing.remove()


@contextmanager
def model_server_network(client: Any, base_image: str, script: Script) -> Iterator[str]:
    """A bridge network made here holding the scripted model server that replays `script`,
    as `<network>-modelserver` (it doubles as an HTTP server egress tests try to reach);
    yields the network's name once the server answers, removes both after."""
    name = f"docdelta-test-{uuid.uuid4().hex[:8]}"
    labels = {LABEL: "1", RUN_LABEL: name}
    network = client.networks.create(name, labels=labels)
    try:
        command = f'printf %s "$SCRIPT" | python3 -m modelserver --host 0.0.0.0 --port {UPSTREAM_PORT}'
        server = client.containers.run(
            modelserver_image(client, base_image),
            ["sh", "-c", command],
            environment={"SCRIPT": script.model_dump_json(exclude_none=True)},
            name=f"{name}-modelserver",
            network=name,
            labels=labels,
            detach=True,
        )
        try:
            models = control(client, base_image, name, f"http://{server.name}:{UPSTREAM_PORT}/v1/models")
            assert models.startswith("{"), f"the model server did not answer: {server.logs().decode()}"
            yield name
        finally:
            server.remove(force=True)
    finally:
        network.remove()


def stand_in_npm() -> list[str]:
    """Pinned npm packages no other test's layer holds, so no layer already on the shared
    engine is found for them (`agent_image` looks there first)."""
    return [f"docdelta-stand-in@1.0.{uuid.uuid4().int % 10**9}"]


def stand_in_layer(client: Any, tag: str, node_version: str, npm: list[str]) -> str:
    """A layer of `npm` as the release workflow publishes it, FROM scratch, whose `node` is a
    shell script that says it came from the registry (no npm, no Node: built in a second)."""
    files = {
        "Dockerfile": (
            f"FROM scratch\nCOPY node {NODE}\nCOPY claude {CLI_PREFIX}/bin/claude\n"
            f"LABEL {LAYER_LABEL}={node_version} {NPM_LABEL}={','.join(sorted(npm))}\n"
        ).encode(),
        "node": b'#!/bin/sh\necho "published layer: $(basename "$1") $2"\n',
        "claude": b"#!/usr/bin/env node\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    image, _ = client.images.build(fileobj=io.BytesIO(buf.getvalue()), custom_context=True, tag=tag)
    return str(image.id)


def dockerfile_context(dockerfile: str) -> io.BytesIO:
    """A build context of `dockerfile` alone, for `client.images.build(custom_context=True)`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as archive:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf
