"""The Action runs exactly what the CLI runs: one request, the same options spelled as
flags and as inputs, through `docdelta run` and through `docdelta.action.main.action` (real
PyGithub against the fake GitHub server) gives the same manifest and the same results.

Both go through `evaluation.evaluate`; this test is what keeps a second composition path
from growing back (the Action once forced `network="none"` and dropped every limit but the
timeout and the cap)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from fakegithub import FakeGitHub, event_path

from docdelta.action import main as action_main
from docdelta.action.settings import ActionSettings, input_variable
from docdelta.cli.main import _parser, main
from docdelta.cli.options import run_options
from docdelta.demo import build_demo_repo
from docdelta.github.actions import ActionsRuntime
from docdelta.github.events import load_event
from docdelta.github.pygithub import PyGithubPort
from docdelta.results.models import Manifest, RunResult

pytestmark = pytest.mark.timeout(300)

OPTIONS = {
    # flag / input name -> value: every run option the two entry points share
    "agent": "fake",
    "sandbox": "local",
    "timeout": "120",
    "reserve-usd": "0.5",
    "cap-usd": "20",
    "max-turns": "7",
    "infra-retries": "1",
    "rate-limit": "wait",
}
REQUEST = {
    # `repeats: auto` with a cap of 2: the round loop (one look, at 2) through both entry points
    "repeats": "auto",
    "max-repeats": "2",
    "seed": "3",
    "conditions": "base,head,none",
    "source": "head",
}


def _manifest(workdir: Path) -> dict[str, Any]:
    data = Manifest.model_validate_json((workdir / "manifest.json").read_text()).model_dump(mode="json")
    data.pop("created_at")
    return data


def _results(workdir: Path) -> dict[str, dict[str, Any]]:
    """Each cell's result without the clock (start, finish, durations)."""
    out = {}
    for path in workdir.glob("runs/*/*/*/r*/result.json"):
        r = RunResult.model_validate_json(path.read_text())
        out[r.cell.key] = {
            "status": r.status,
            "score": r.score,
            "seed": r.seed,
            "attempt": r.attempt,
            "isolation": r.isolation,
            "hashes": (r.task_sha256, r.overlay_sha256, r.tree_sha256),
            "answer": r.outcome.answer,
            "agent": (r.outcome.agent, r.outcome.agent_version, r.outcome.model),
        }
    return out


def test_the_same_request_gives_the_same_manifest_and_results_through_the_cli_and_the_action(
    tmp_path: Path,
) -> None:
    demo = build_demo_repo(tmp_path / "ws" / "repo")
    # The Action reads tasks from the base commit; the CLI from a directory: the same files.
    flags = [f"--{k}={v}" for k, v in {**OPTIONS, **REQUEST}.items()]
    cli_args = [
        "run", "--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha,
        "--tasks", str(demo.tasks_dir), "--workdir", str(tmp_path / "cli"), *flags,
    ]  # fmt: skip
    assert main(cli_args) == 0

    payload = json.loads(event_path("pull_request.opened").read_text())
    payload["pull_request"]["base"]["sha"] = demo.base_sha  # EDIT: the demo repository's commits
    payload["pull_request"]["head"]["sha"] = demo.head_sha
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload))
    with FakeGitHub() as fake:
        fake.add_pull(2, demo.base_sha, demo.head_sha, [("AGENTS.md", "modified")])
        env = {
            "GITHUB_REPOSITORY": fake.repo,
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_WORKSPACE": str(demo.path),
            "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
            "INPUT_GITHUB-TOKEN": fake.token,
            "INPUT_RESULTS-PATH": str(tmp_path / "action"),
        } | {input_variable(k): v for k, v in {**OPTIONS, **REQUEST}.items()}
        settings = ActionSettings.from_env(env)
        port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
        result = action_main.action(
            settings, load_event("pull_request", event), port, ActionsRuntime.from_env(env, io.StringIO())
        )
        assert result.activity == "evaluate", result.title

    # The two spellings parse into one options object ...
    cli = run_options(_parser().parse_args(cli_args))
    assert cli.stop_failed_alike and not settings.options.stop_failed_alike  # the one difference
    assert settings.options == cli.model_copy(update={"stop_failed_alike": False})
    # ... and the same request runs the same experiment.
    (action_dir,) = (tmp_path / "action").glob("*/results")
    cli_manifest, action_manifest = _manifest(tmp_path / "cli"), _manifest(action_dir)
    assert action_manifest == cli_manifest
    assert cli_manifest["bounds"]["timeout_s"] == 120 and cli_manifest["bounds"]["run_budget_usd"] == 0.5
    cli_results, action_results = _results(tmp_path / "cli"), _results(action_dir)
    assert cli_manifest["adaptive"] and cli_manifest["repeats"] == 2
    assert len(cli_results) == 3 * 2 * len(cli_manifest["tasks"])
    assert action_results == cli_results
