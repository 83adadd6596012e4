"""gold.execute under Docker: the proposals of a run whose agent sits behind a gateway with an
egress network still run with network "none", so a server on that network that an
unrestricted control container reaches never sees them; and `docdelta run --sandbox docker`
with the fake agent gives the same evidence as under bubblewrap, leaving nothing behind."""

from __future__ import annotations

import os
import secrets
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import run_args
from docker_helpers import UPSTREAM_PORT, control, owned_by, requests_seen
from proposals import SNOOP_AGENT, check_fake_run, check_redacted, execute_project

from docdelta.agents.models import AgentAnswer
from docdelta.cli.main import main
from docdelta.gateway.config import OPENAI, GatewayConfig
from docdelta.grading.execute import execute_proposals
from docdelta.keys import Keys
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider
from docdelta.sandbox.gateway_container import GatewayContainer
from docdelta.tasks.models import Gold, Task

pytestmark = pytest.mark.docker


def test_a_proposal_cannot_reach_the_egress_network_of_a_gateway_run(
    client: Any, base_image: str, gateway_image: str, egress: str, tmp_path: Path
) -> None:
    route = OPENAI.model_copy(update={"base_url": f"http://{egress}-modelserver:{UPSTREAM_PORT}/v1"})
    gateway = GatewayContainer(
        config=GatewayConfig(upstreams=[route]),
        image=gateway_image,
        keys=Keys({"openai": "k"}),
        egress_network=egress,
    )
    provider = DockerProvider(client, base_image, gateway=gateway)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    token = secrets.token_hex(8)
    url = f"http://{egress}-modelserver:{UPSTREAM_PORT}/{token}"
    fetch = f"python3 -c \"import urllib.request; urllib.request.urlopen('{url}', timeout=10)\""
    task = Task(id="t", prompt="p", gold=Gold(commands=["python3"], execute=True))
    try:
        executed = execute_proposals(
            task, checkout, AgentAnswer(commands=[fetch]), provider, spec=SandboxSpec(network="gateway")
        )
    finally:
        provider.close()
    [run] = executed.commands
    assert executed.isolation == "docker-none"
    assert run.exit_code == 1 and run.first_error is not None and "URLError" in run.output_tail
    control(client, base_image, egress, f"{url}-control")  # the control reaches the server
    paths = [r["path"] for r in requests_seen(client, base_image, egress)]
    assert f"/{token}-control" in paths and f"/{token}" not in paths


def test_the_fake_agents_stale_command_is_a_miss_with_evidence_under_docker(
    client: Any, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = execute_project(tmp_path / "proj", yaml.safe_dump({"docker": {"base": base_image}}))
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "fake", "--sandbox", "docker", "--repeats", "1",
    ]  # fmt: skip
    assert main(args) == 0
    check_fake_run(workdir, capsys.readouterr().out)
    assert owned_by(client, os.getpid()) == []


def test_the_command_agents_proposal_has_the_runs_key_redacted_under_docker(
    client: Any, base_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-planted-" + secrets.token_hex(12)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    config = yaml.safe_dump({"docker": {"base": base_image}})
    repo = execute_project(tmp_path / "proj", config, {".env": f"OPENAI_API_KEY={secret}\n"})
    workdir = tmp_path / "work"
    agent = shlex.join(["python3", "-c", SNOOP_AGENT])
    assert main(run_args(repo, workdir, agent, "--sandbox", "docker", "--repeats", "1")) == 0
    check_redacted(workdir, secret, "docker-none")
    assert owned_by(client, os.getpid()) == []
