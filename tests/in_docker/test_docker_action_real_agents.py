"""The Action end to end with real agents: the action image runs `docdelta action` on a
pull_request event with `sandbox: docker` (sibling containers through the mounted socket),
and the pinned Claude Code and Codex CLIs from their agent images call the scripted model
server through the real gateway, holding only the placeholder while the gateway holds the
`api-key` input. The sticky comment and the check go to the fake GitHub server.

What a user would notice, asserted here: the comment's tokens, turns and cost per arm are
the gateway's figures; the injected-instruction audit says which changed file never reached
the model; the key canary reached the model API (the server logs a hash of each auth header)
and appears in no log, result, comment, check, summary, output or agent environment.

Set DOCDELTA_COMMENT_OUT to a directory to keep the comment each run posted."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from actionimage import build_action_image, container_args, runner_env, runner_home
from docker_helpers import UPSTREAM_PORT, anthropic_upstream, requests_seen
from fakegithub import FakeGitHub, event_path
from gitrepo import GitRepo
from modelserver.script import Script, TextTurn, ToolTurn, TurnUsage

from docdelta.agents.models import RunStatus
from docdelta.gateway.config import RUN_TOKEN_PREFIX
from docdelta.report.render import fmt_count, fmt_usd
from docdelta.results.models import RunResult
from docdelta.sandbox.dockerapi import LABEL, ROLE_LABEL, RUN_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

CANARY = f"sk-canary-{uuid.uuid4().hex}"
CA = Path("/etc/ssl/certs/ca-certificates.crt")
ANSWER = {"answer": "Run make check.", "commands": ["make check"]}
TASK = """\
id: test-cmd
prompt: How do I run the tests? End with the JSON answer.
gold:
  commands: ["make check"]
reviewed: true
"""
AGENTS = {"claude_code": "claude-sonnet-4-5", "codex": "gpt-4.1-mini"}
AUTH = {"claude_code": ("x-api-key", CANARY), "codex": ("authorization", f"Bearer {CANARY}")}
UNREAD = {"claude_code": "AGENTS.md", "codex": "CLAUDE.md"}
"""The changed file each CLI does not load: the audit must say it never reached the model."""
RUNS_PER_AGENT = 2  # base and head, one repeat


@pytest.fixture(scope="module")
def modelserver_script() -> Script:
    """Every run: print the environment (so the agent's env reaches the model, where the
    server's log shows it), then answer. Generic turns serve Anthropic and Responses alike."""
    run = [
        ToolTurn.shell("env", usage=TurnUsage(input_tokens=300, output_tokens=10)),
        TextTurn(text=json.dumps(ANSWER), usage=TurnUsage(input_tokens=400, output_tokens=20)),
    ]
    return Script(name="action-real-agents", turns=run * RUNS_PER_AGENT * len(AGENTS))


@pytest.fixture(scope="module")
def image() -> str:
    return build_action_image()


def _project(path: Path, egress: str, base_image: str) -> GitRepo:
    server = f"http://{egress}-modelserver:{UPSTREAM_PORT}"
    # docker.base: the Action's default sandbox base is one a GitHub runner pulls; here, the local one.
    config = f"""\
docker:
  base: {base_image}
gateway:
  egress_network: {egress}
  upstreams:
{anthropic_upstream(egress)}    - name: openai
      base_url: {server}/v1
      paths: ["POST /responses", "GET /models"]
      base_url_env: [OPENAI_BASE_URL]
      key_env: [OPENAI_API_KEY]
      key_from: OPENAI_API_KEY
"""
    repo = GitRepo.init(path)
    repo.commit(
        {
            ".docdelta.yml": config,
            ".docdelta/tasks/t.yaml": TASK,
            "README.md": "# proj\n",
            "AGENTS.md": "# Agents\nBe kind to reviewers.\n",
            "CLAUDE.md": "# Claude\nKeep answers short.\n",
        }
    )
    # Distinct lines per file: the audit tells files apart by their distinctive lines.
    repo.commit(
        {
            "AGENTS.md": "# Agents\nRun `make check` before you push.\n",
            "CLAUDE.md": "# Claude\nAlways run `make check` first; it lints and tests.\n",
        }
    )
    return repo


@dataclass
class Started:
    """docdelta containers as they started: role, run id, networks and environment."""

    seen: list[dict[str, Any]] = field(default_factory=list)

    def of_runs_on(self, network: str) -> dict[str, list[dict[str, Any]]]:
        """By run id, the containers of the runs whose gateway sat on `network` (ours: other
        tests share the engine)."""
        ours = {c["run"] for c in self.seen if c["role"] == "gateway" and network in c["networks"]}
        runs: dict[str, list[dict[str, Any]]] = {run: [] for run in ours}
        for c in self.seen:
            if c["run"] in ours:
                runs[c["run"]].append(c)
        return runs


@contextmanager
def watch_starts(client: Any) -> Iterator[Started]:
    """Inspect every docdelta container when the engine reports it started (an event, not
    a poll): the gateway and agent containers live for a whole run, long after that."""
    import docker.errors  # noqa: PLC0415 - docker tests only

    started = Started()
    events = client.events(decode=True, filters={"type": "container", "event": "start", "label": LABEL})

    def watch() -> None:
        for event in events:
            try:
                attrs = client.api.inspect_container(event["id"])
            except docker.errors.NotFound:
                continue
            labels = attrs["Config"]["Labels"] or {}
            started.seen.append(
                {
                    "run": labels.get(RUN_LABEL, ""),
                    "role": labels.get(ROLE_LABEL, ""),
                    "networks": set(attrs["NetworkSettings"]["Networks"] or {}),
                    "env": attrs["Config"]["Env"] or [],
                }
            )

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield started
    finally:
        events.close()
        thread.join(10)


def _git(repo: GitRepo, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo.path), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _usage_row(body: str, arm: str) -> list[str]:
    """The cells of an arm's row in the comment's "Tokens, turns, cost" table, without the
    change against base some cells carry (`730 (+0%)`)."""
    table = body[body.index("| arm | runs | median tokens") :]
    row = next(line for line in table.splitlines() if line.startswith(f"| {arm} |"))
    return [re.sub(r" \([+-]\d+%\)$", "", c.strip()) for c in row.strip("|").split("|")]


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_a_real_agent_runs_through_the_action_image_and_the_gateway(
    agent: str, image: str, egress: str, client: Any, base_image: str, tmp_path: Path
) -> None:
    repo = _project(tmp_path / "workspace", egress, base_image)
    base, head = _git(repo, "rev-parse", "HEAD~1"), _git(repo, "rev-parse", "HEAD")
    (repo.path / "ca.pem").write_bytes(CA.read_bytes())  # untracked: the `ca-bundle` input
    payload = json.loads(event_path("pull_request.opened").read_text())
    payload["pull_request"]["base"]["sha"] = base  # EDIT: this test repository's commits
    payload["pull_request"]["head"]["sha"] = head
    home = tmp_path / "home"
    runner_home(home, payload)
    seen_before = len(requests_seen(client, base_image, egress))

    with FakeGitHub() as fake:
        fake.add_pull(2, base, head, [("AGENTS.md", "modified"), ("CLAUDE.md", "modified")])
        env = runner_env(
            fake,
            {
                "INPUT_AGENT": agent,
                "INPUT_MODEL": AGENTS[agent],
                "INPUT_API-KEY": CANARY,
                "INPUT_CONDITIONS": "base,head",
                "INPUT_REPEATS": "1",
                "INPUT_INFRA-RETRIES": "0",
                "INPUT_TIMEOUT": "300",
                "INPUT_SANDBOX": "docker",
                "INPUT_CA-BUNDLE": "ca.pem",
                "INPUT_RESULTS-PATH": "/github/home/results",
            },
        )
        args = container_args(repo.path, home)
        for key in env:
            args += ["-e", key]
        with watch_starts(client) as started:
            proc = subprocess.run(
                [*args, image],
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                timeout=1500,
                check=False,
            )
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, log[-4000:]
        comments, checks = list(fake.comments), list(fake.check_runs)

    results = [RunResult.model_validate_json(p.read_text()) for p in home.glob("results/**/result.json")]
    assert len(results) == RUNS_PER_AGENT, log[-3000:]
    for r in results:
        assert r.status is RunStatus.ok, (r.cell.key, r.outcome.error, log[-3000:])
        assert r.isolation == "docker-internal" and r.outcome.agent == agent
        assert r.score is not None and r.score.value == 1.0

    # The sticky comment and a completed check.
    assert len(comments) == 1 and comments[0]["body"].startswith("<!-- docdelta:docdelta -->")
    body = comments[0]["body"]
    assert checks[-1]["status"] == "completed" and checks[-1]["conclusion"] in ("success", "neutral")
    if out := os.environ.get("DOCDELTA_COMMENT_OUT"):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"real-agent-comment-{agent}.md").write_text(body)

    # Tokens, turns and cost per arm: the gateway's log of each run (kept in the result).
    for r in results:
        calls = [c for c in r.model_calls if c.error is None and c.status == 200]
        assert len(calls) == 2 and sum(c.tokens_in or 0 for c in calls) == 700
        assert (r.outcome.metrics.tokens_in, r.outcome.metrics.tokens_out) == (700, 30)
        cost = sum(c.cost_usd or 0.0 for c in calls)
        assert cost > 0 and r.outcome.metrics.cost_usd == pytest.approx(cost)
        row = _usage_row(body, r.cell.condition)
        assert row[1:6] == ["1", fmt_count(730), fmt_usd(cost), fmt_usd(cost), "2"], row

    # The injected-instruction audit: the changed file this CLI never loads did not reach it.
    unread = UNREAD[agent]
    assert re.search(rf"`head`'s `{unread}` did not reach the model in 1 of 1 audited run", body), body
    head_run = next(r for r in results if r.cell.condition == "head")
    assert head_run.instructions_seen is not None and unread in head_run.instructions_seen.missing

    # The key reached the model API through the gateway, and nowhere else.
    requests = requests_seen(client, base_image, egress)[seen_before:]
    header, value = AUTH[agent]
    model_calls = [r for r in requests if r.get("turn") is not None]
    assert len(model_calls) == 2 * RUNS_PER_AGENT
    assert all([header, hashlib.sha256(value.encode()).hexdigest()] in r["auth"] for r in model_calls)
    # Anything else is docdelta's own model-server identity probe (llama-server's /props,
    # asked on the egress network before the matrix): it carries no key at all.
    others = [r for r in requests if r.get("turn") is None]
    assert all(r["path"] == "/props" and not r["auth"] for r in others), others
    bodies = json.dumps([r["body"] for r in requests])
    assert RUN_TOKEN_PREFIX in bodies  # the agent's `env` output reached the model: it held a run token
    assert CANARY not in json.dumps(requests)
    assert log.count(CANARY) == 1 and f"::add-mask::{CANARY}" in log
    assert CANARY not in json.dumps(comments) + json.dumps(checks)
    assert CANARY not in (home / "summary.md").read_text() + (home / "output").read_text()
    runs = started.of_runs_on(egress)  # every run's gateway and agent container, as they started
    assert len(runs) == RUNS_PER_AGENT, started.seen
    for containers in runs.values():
        assert {c["role"] for c in containers} >= {"gateway", "agent"}
        assert all(CANARY not in json.dumps(c["env"]) for c in containers)
    for path in home.glob("results/**/*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
