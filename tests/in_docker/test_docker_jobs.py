"""`docdelta run --sandbox docker --jobs 4` through the real CLI and engine: no container,
network or volume of the run is left after success, failure, timeout or SIGINT; on SIGINT
the blocked agents are killed at once, finished results are kept and a rerun resumes.

Other runs share the engine, so "nothing left" means nothing whose owner label names the
docdelta process of this test (`owned_by`)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import BlockingAgent, agent_processes, run_args, saved_results
from docker_helpers import owned_by
from gitrepo import GitRepo

from docdelta.agents.models import RunStatus
from docdelta.errors import ExitCode
from docdelta.experiment.plan import plan_order

pytestmark = pytest.mark.docker

OUTCOMES = """\
import json, sys, time
prompt = sys.stdin.read()
if "Fail" in prompt:
    sys.exit(3)
if "Slow" in prompt:
    time.sleep(3600)
print(json.dumps({"answer": "run make check", "commands": ["make check"]}))
"""


def _project(tmp_path: Path, base_image: str, prompts: dict[str, str], sync: Path | None = None) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    tasks = {
        f".docdelta/tasks/{tid}.yaml": f'id: {tid}\nprompt: "{prompt}"\ngold:\n  commands: ["make check"]\n'
        "reviewed: true\n"
        for tid, prompt in prompts.items()
    }
    config: dict[str, Any] = {"docker": {"base": base_image}}
    if sync is not None:
        config["sandbox"] = {"paths": [str(sync)]}  # the agents' fifos, bound read-only
    repo.commit({"AGENTS.md": "# Agents\n", ".docdelta.yml": yaml.safe_dump(config), **tasks})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    return repo


def test_success_failure_and_timeout_at_jobs_4_leave_nothing(
    client: Any, base_image: str, tmp_path: Path
) -> None:
    prompts = {"quick": "How do I run the tests?", "fail": "Fail please.", "slow": "Slow please."}
    repo = _project(tmp_path, base_image, prompts)
    agent = f"python3 -c '{OUTCOMES}'"
    args = run_args(
        repo,
        tmp_path / "work",
        agent,
        "--sandbox",
        "docker",
        "--jobs",
        "4",
        "--timeout",
        "10",
        "--repeats",
        "1",
    )
    proc = subprocess.Popen([sys.executable, "-m", "docdelta", *args], stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate()
    # Two runs in three failed for the agent's reasons: a finished matrix without a verdict.
    assert proc.returncode == ExitCode.INFRA, err
    statuses = {(r.cell.task, r.status) for r in saved_results(tmp_path / "work")}
    assert statuses == {("quick", RunStatus.ok), ("fail", RunStatus.agent_error), ("slow", RunStatus.timeout)}
    assert len(saved_results(tmp_path / "work")) == 9
    assert owned_by(client, proc.pid) == []


def test_sigint_at_jobs_4_kills_the_agents_removes_their_containers_and_resumes(
    client: Any, base_image: str, tmp_path: Path
) -> None:
    agent = BlockingAgent(tmp_path / "sync")
    prompts = {"quick": "How do I run the tests?", "hang": "Hang forever please."}
    repo = _project(tmp_path, base_image, prompts, sync=tmp_path / "sync")
    args = run_args(repo, tmp_path / "work", agent.cmd("python3"), "--repeats", "2", "--seed", "4")
    cmd = [sys.executable, "-m", "docdelta", *args, "--sandbox", "docker", "--jobs", "4", "--timeout", "3600"]
    plan = plan_order(["hang", "quick"], ["base", "head", "none"], 2, 4)
    hangs = [i for i, cell in enumerate(plan) if cell.task == "hang"]
    finished = hangs[3] - 3  # the quick cells ahead of the fourth hang cell (see test_jobs.py)

    def interrupt_when_four_run() -> list[str]:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        agent.wait_running(4)
        assert len(owned_by(client, proc.pid)) >= 4 * 2, "four live runs: container, volume"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)  # a guard against a hang; the runs' timeout is an hour
        assert proc.returncode == ExitCode.INTERRUPTED, err
        assert owned_by(client, proc.pid) == [], "every in-flight run's objects are removed"
        assert agent_processes(agent.started) == [], "every blocked agent was killed"
        return [line for line in err.splitlines() if line.startswith("[")]

    try:
        interrupt_when_four_run()
        saved = saved_results(tmp_path / "work")
        assert len(saved) == finished
        assert {(r.cell.task, r.status) for r in saved} == {("quick", RunStatus.ok)}
        progress = interrupt_when_four_run()
        assert [line.rsplit(": ", 1)[-1] for line in progress] == ["reused"] * hangs[0]
        assert saved_results(tmp_path / "work") == saved, "a complete result is never rewritten"
    finally:
        agent.close()
