"""Change tasks from real past commits, with their real tests, run end to end on the real
repositories: each task's own source commit (the fix's parent), the project's own test
command in its own environment (built once, cached by the lock's hash: `envs.py`), hidden
tests graded in a fresh offline sandbox, under bubblewrap and under Docker.

The fake agent changes nothing, so the real tests fail in every condition (0); the command
agent applies the real fix (the non-test part of the commit), so they pass in every
condition (1). Neither reads the docs, so the conditions tie: what this proves is that the
task runs and grades correctly on a real project, not an effect of the docs."""

from __future__ import annotations

import base64
import os
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from realenvs import CA_BUNDLE, NodeEnv, PythonEnv, adopt, config_yaml, node_toolchain, uv_env

from docdelta.cli.main import main
from docdelta.git import Repo
from docdelta.grading.checks import parse_diff
from docdelta.grading.hidden import TEST_FILES
from docdelta.instructions.globs import GlobSet
from docdelta.results.models import Manifest, RunResult
from docdelta.scorecard.models import Summary

pytestmark = pytest.mark.timeout(1800)
"""Each test runs the selftest (the reference three times for flakes, the parent, two
tamperings) and three graded cells of a real suite: 6-10 minutes measured on two cores
shared with seven other sessions, past the suite's default 600 s."""

RealRepo = Callable[[str], Path]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "real"
PRS = {"genai-prices": ("1a5e71b9745d", "47df840a5ab1"), "logfire-js": ("b6e76c29474f", "eb3a2723c364")}
"""The same PRs as the answer tasks (test_real_tasks.py): their instruction files are the conditions."""
TASKS = {"genai-prices": ("validate-inputs", "9682d06bc296"), "logfire-js": ("invalid-date", "7c294b89a694")}
"""name -> (task id, the fix commit it was drafted from)."""
MIN_CASES = {"genai-prices": 100, "logfire-js": 10}
"""Test cases the hidden files hold (133 and 15): the real suites ran, not an empty one."""
DOCKER_BASE = os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")
ISOLATION = {"local": "bwrap", "docker": "docker-none"}
"""The isolation each sandbox records for a grading run (Docker: no network)."""


def _fix_agent(reference: bytes) -> str:
    """A command agent that applies the real fix: the reference minus its test files."""
    tests = GlobSet(TEST_FILES)
    fix = b"".join(e.raw for e in parse_diff(reference) if not tests.matches(e.path))
    script = (
        "import base64, json, subprocess\n"
        f"subprocess.run(['git', 'apply', '-'], input=base64.b64decode({base64.b64encode(fix).decode()!r}), "
        "check=True)\n"
        "print(json.dumps({'answer': 'applied the fix'}))\n"
    )
    return f"/usr/bin/python3 -c {shlex.quote(script)}"


@pytest.fixture(scope="module")
def environments(real_repo: RealRepo) -> Callable[[str], PythonEnv | NodeEnv]:
    """name -> its environment at the task's source commit (built once, then cached by hash)."""
    built: dict[str, PythonEnv | NodeEnv] = {}

    def get(name: str) -> PythonEnv | NodeEnv:
        if name not in built:
            repo = Repo(real_repo(name))
            source = repo.resolve(f"{TASKS[name][1]}~1")
            built[name] = (
                uv_env(repo, source, name) if name == "genai-prices" else node_toolchain("logfire...")
            )
        return built[name]

    return get


CASES = [
    pytest.param("command", 1.0, "local", id="command-local"),
    pytest.param("command", 1.0, "docker", id="command-docker", marks=pytest.mark.docker),
]
"""The fix-applying agent under both sandboxes. An agent that does nothing is not run here:
the selftest each run starts with already grades the untouched checkout in the same sandbox
and requires its tests to run and fail, so a fake-agent matrix would repeat that at minutes of
CI time (`DOCDELTA_REAL_FAKE=1` adds it back for a local check)."""
if os.environ.get("DOCDELTA_REAL_FAKE") == "1":
    CASES += [
        pytest.param("fake", 0.0, "local", id="fake-local"),
        pytest.param("fake", 0.0, "docker", id="fake-docker", marks=pytest.mark.docker),
    ]


@pytest.mark.parametrize(("agent", "score", "sandbox"), CASES)
@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_real_fix_runs_as_a_change_task_with_its_real_tests(
    real_repo: RealRepo,
    environments: Callable[[str], PythonEnv | NodeEnv],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    sandbox: str,
    agent: str,
    score: float,
) -> None:
    # docdelta installs logfire-js's workspace on this host, from npm through the proxy
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", CA_BUNDLE)
    monkeypatch.setenv("npm_config_cafile", CA_BUNDLE)
    path = real_repo(name)
    base, head = PRS[name]
    adopted = adopt(path, base, config_yaml(environments(name), docker_base=DOCKER_BASE))
    tasks = EXAMPLES / name / "change"
    task_id, fix = TASKS[name]
    reference = (tasks / task_id / "reference.patch").read_bytes()
    cmd = ["--agent-cmd", _fix_agent(reference)] if agent == "command" else []
    workdir = tmp_path / "w"
    args = [
        "run", "--repo", str(path), "--base", adopted, "--head", head, "--tasks", str(tasks),
        "--workdir", str(workdir), "--agent", agent, *cmd, "--repeats", "1", "--sandbox", sandbox,
    ]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    results = [
        RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r1/result.json")
    ]
    assert sorted(r.cell.condition for r in results) == ["base", "head", "none"]
    for r in results:
        hidden = r.hidden_tests
        assert hidden is not None and r.score is not None, r
        assert r.score.value == score, (r.cell.condition, hidden.notes, hidden.output_tail)
        assert hidden.status == ("pass" if score else "fail")
        assert hidden.counts is not None and hidden.counts.total >= MIN_CASES[name]
        assert hidden.isolation == ISOLATION[sandbox]
    manifest = Manifest.model_validate_json((workdir / "manifest.json").read_text())
    assert manifest.task_sources == {task_id: Repo(path).resolve(f"{fix}~1")}
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert summary.confounds.task_sources == manifest.task_sources
    (task,) = summary.tasks
    assert {c: task.conditions[c].mean_score for c in ("base", "head", "none")} == dict.fromkeys(
        ("base", "head", "none"), score
    )
