"""The task sets under examples/real/<name>/ run end to end on their real repositories:
real git history, sealed checkouts per condition, the local sandbox, grading, the scorecard.

The `command` agent (answer_agent.py) answers from whatever its checkout holds, so its
scores are exactly what each condition's instruction files support: a rule only head's
AGENTS.md states scores 1/0/0, a rule base's CLAUDE.md already had (at other lines) scores
1/1/0 because citations are anchored by content, and the README control ties."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from realenvs import adopt

from docdelta.agents.models import RunStatus
from docdelta.cli.main import main
from docdelta.results.models import RunResult
from docdelta.scorecard.models import Summary

RealRepo = Callable[[str], Path]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "real"
AGENT = Path(__file__).with_name("answer_agent.py")
DOCKER_BASE = os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")

PRS = {
    # name: (base, head) — an instruction-file change with code changes in the range
    "minijinja": ("53e2787985f0", "eb17be5752d2"),
    "genai-prices": ("1a5e71b9745d", "47df840a5ab1"),
    "logfire-js": ("b6e76c29474f", "eb3a2723c364"),
}
CONTROLS = {"minijinja": "cli-install", "genai-prices": "slim-schema", "logfire-js": "install-node"}
EXPECTED = {  # command agent: task -> (base, head, none)
    "minijinja": {
        "accept-snapshots": (1 / 3, 1.0, 1 / 3),  # base's CLAUDE.md lacks the accept command
        "cli-install": (1.0, 1.0, 1.0),
        "core-tests": (1.0, 1.0, 0.0),  # base's CLAUDE.md had it, at other lines
        "msrv": (0.0, 1.0, 0.0),
        "v2-branch": (0.0, 1.0, 0.0),
    },
    "genai-prices": {
        "build-target": (0.0, 1.0, 0.0),
        "kcount": (0.0, 1.0, 0.0),
        "price-history": (0.0, 1.0, 0.0),
        "slim-schema": (1.0, 1.0, 1.0),
        "usages-json": (0.0, 1.0, 0.0),
    },
    "logfire-js": {
        "changeset": (1.0, 1.0, 0.0),
        "exact-assertions": (1.0, 1.0, 0.0),
        "install-node": (1.0, 1.0, 1.0),
        "package-tests": (0.0, 1.0, 0.0),
    },
}


def _run(
    repo: Path,
    name: str,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    *agent: str,
    sandbox: str = "local",
    base: str | None = None,
) -> Summary:
    base, head = base or PRS[name][0], PRS[name][1]
    tasks = str(EXAMPLES / name / "tasks")
    args = [
        "run",
        "--repo",
        str(repo),
        "--base",
        base,
        "--head",
        head,
        "--tasks",
        tasks,
        "--workdir",
        str(workdir),
    ]
    assert main([*args, "--repeats", "1", "--sandbox", sandbox, *agent]) == 0
    results = [
        RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r*/result.json")
    ]
    assert len(results) == 3 * len(EXPECTED[name])
    assert all(r.status is not RunStatus.infra_error and r.score is not None for r in results)
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    return Summary.model_validate_json(capsys.readouterr().out)


def _means(summary: Summary) -> dict[str, tuple[float, ...]]:
    return {
        t.task: tuple(round(t.conditions[c].mean_score or 0.0, 2) for c in ("base", "head", "none"))
        for t in summary.tasks
    }


@pytest.mark.parametrize("name", sorted(PRS))
def test_command_agent_scores_what_each_condition_holds(
    real_repo: RealRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # The system interpreter, which every sandbox's read-only root holds, runs the agent's
    # source inline: the sandbox shows nothing of the host outside its allowlist, so neither
    # this venv nor tests/real/ is there (these repositories have no .docdelta.yml to name them).
    agent = ("--agent", "command", "--agent-cmd", f"/usr/bin/python3 -c {shlex.quote(AGENT.read_text())}")
    summary = _run(real_repo(name), name, tmp_path / "w", capsys, *agent)
    got = _means(summary)
    assert got == {task: tuple(round(x, 2) for x in means) for task, means in EXPECTED[name].items()}
    assert summary.confounds.code_changes > 0 and summary.confounds.source == "head"


@pytest.mark.docker
def test_command_agent_scores_the_same_in_the_docker_sandbox(
    real_repo: RealRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same answer tasks under Docker: the checkout the container sees holds what each
    condition's files hold, so the scores are bubblewrap's. One repository (about a minute);
    the project adopts docdelta with `.docdelta.yml` naming the local base image."""
    repo = real_repo("genai-prices")
    adopted = adopt(repo, PRS["genai-prices"][0], f"docker:\n  base: {DOCKER_BASE}\n")
    agent = ("--agent", "command", "--agent-cmd", f"/usr/bin/python3 -c {shlex.quote(AGENT.read_text())}")
    summary = _run(repo, "genai-prices", tmp_path / "w", capsys, *agent, sandbox="docker", base=adopted)
    assert _means(summary) == {
        task: tuple(round(x, 2) for x in m) for task, m in EXPECTED["genai-prices"].items()
    }
    assert summary.confounds.weak_isolation == []


@pytest.mark.parametrize("name", sorted(PRS))
def test_fake_agent_runs_them_and_the_control_ties(
    real_repo: RealRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    summary = _run(real_repo(name), name, tmp_path / "w", capsys, "--agent", "fake")
    control = _means(summary)[CONTROLS[name]]
    assert control[0] == control[1] == control[2]
    assert len(summary.tasks) == len(EXPECTED[name])
