"""The `pass-threshold` input through the Action: real webhook payload, real PyGithub
against the fake GitHub server, the demo repository, the fake agent, the local sandbox.

The demo's docs change is reversed (the PR's head has the old AGENTS.md), so the head arm
misses tasks that the base arm passes: with a bar, the check fails even under `fail-on:
never`, and the comment says which task and why."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakegithub import FakeGitHub, event_path

from docdelta.action import main as action_main
from docdelta.action.publish import ActionResult
from docdelta.action.settings import ActionSettings, input_variable
from docdelta.demo import DemoRepo, build_demo_repo
from docdelta.github.actions import ActionsRuntime
from docdelta.github.events import load_event
from docdelta.github.pygithub import PyGithubPort

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    return build_demo_repo(tmp_path_factory.mktemp("ws") / "repo")


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


def _reversed_pr(tmp: Path, demo: DemoRepo, fake: FakeGitHub, **inputs: str) -> dict[str, str]:
    """pull_request.opened from the recorded payload, its base and head the demo's head and
    base (EDIT), and the Action's environment with `inputs`."""
    names = subprocess.run(
        ["git", "-c", "safe.directory=*", "diff", "--name-only", demo.head_sha, demo.base_sha],
        cwd=demo.path, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    fake.add_pull(2, demo.head_sha, demo.base_sha, [(n, "modified") for n in names])
    payload = json.loads(event_path("pull_request.opened").read_text())
    payload["pull_request"]["base"]["sha"] = demo.head_sha  # EDIT: the demo's commits, reversed
    payload["pull_request"]["head"]["sha"] = demo.base_sha
    event = tmp / "event.json"
    event.write_text(json.dumps(payload))
    env = {
        "GITHUB_REPOSITORY": fake.repo,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_WORKSPACE": str(demo.path),
        "GITHUB_API_URL": fake.base_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "77",
        "GITHUB_OUTPUT": str(tmp / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "INPUT_GITHUB-TOKEN": fake.token,
        "INPUT_AGENT": "fake",
        "INPUT_REPEATS": "2",
        "INPUT_SANDBOX": "local",
        "INPUT_RESULTS-PATH": str(tmp / "results"),
        "INPUT_FAIL-ON": "never",
    }
    env.update({input_variable(k): v for k, v in inputs.items()})
    return env


def _run(env: dict[str, str], fake: FakeGitHub) -> ActionResult:
    settings = ActionSettings.from_env(env)
    event = load_event(env["GITHUB_EVENT_NAME"], Path(env["GITHUB_EVENT_PATH"]))
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
    return action_main.action(settings, event, port, ActionsRuntime.from_env(env, io.StringIO()))


def test_a_task_whose_head_misses_the_bar_base_met_fails_the_check_under_fail_on_never(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    result = _run(_reversed_pr(tmp_path, demo, fake, **{"pass-threshold": "1"}), fake)

    assert result.activity == "evaluate"
    check = fake.check_runs[-1]
    assert check["conclusion"] == result.conclusion == "failure"
    body = fake.comments[0]["body"]
    gate = next(line for line in body.splitlines() if line.startswith("**Gate** (`fail-on: never`): failure"))
    assert "pass threshold missed by head where base met it — " in gate
    assert "**fails the check**" in body  # the task's line in the folded table says so too


def test_without_a_bar_the_same_pr_does_not_fail_under_fail_on_never(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    result = _run(_reversed_pr(tmp_path, demo, fake), fake)

    assert result.conclusion != "failure"
    assert "Pass thresholds" not in fake.comments[0]["body"]


def test_pass_k_without_pass_threshold_is_refused_naming_both_inputs(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    env = _reversed_pr(tmp_path, demo, fake, **{"pass-k": "3"})
    out = io.StringIO()
    assert action_main.main(env, out) == 2
    log = out.getvalue()
    assert "input 'pass-k' = '3' is set, but 'pass-threshold' is not" in log and "Traceback" not in log
