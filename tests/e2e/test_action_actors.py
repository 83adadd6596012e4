"""Who may start an evaluation that holds the API key: by default only actors with write
access. Real webhook payloads (tests/fakegithub/events, copied from /work/shared/fixtures)
with the sender edited, real PyGithub against the fake GitHub server, the demo repository,
the fake agent, the local sandbox."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
OUTSIDER = "drive-by"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    return build_demo_repo(tmp_path_factory.mktemp("ws") / "repo")


@pytest.fixture
def fake(demo: DemoRepo) -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        names = subprocess.run(
            ["git", "-c", "safe.directory=*", "diff", "--name-only", demo.base_sha, demo.head_sha],
            cwd=demo.path, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        server.add_pull(2, demo.base_sha, demo.head_sha, [(n, "modified") for n in names])
        server.permissions[OUTSIDER] = "read"
        yield server


def _event(tmp: Path, demo: DemoRepo, name: str, sender: str) -> Path:
    payload: dict[str, Any] = json.loads(event_path(name).read_text())
    payload["sender"]["login"] = sender  # EDIT: who triggered it
    if "pull_request" in payload:
        pr = payload["pull_request"]
        pr["base"]["sha"], pr["head"]["sha"] = demo.base_sha, demo.head_sha  # EDIT: the demo's commits
        pr["user"]["login"], pr["author_association"] = sender, "CONTRIBUTOR"  # EDIT: opened by them
    path = tmp / f"{name}-{sender}.json"
    path.write_text(json.dumps(payload))
    return path


def _run(tmp: Path, demo: DemoRepo, fake: FakeGitHub, name: str, sender: str, **inputs: str) -> ActionResult:
    env = {
        "GITHUB_REPOSITORY": fake.repo,
        "GITHUB_EVENT_NAME": name.split(".", maxsplit=1)[0],
        "GITHUB_EVENT_PATH": str(_event(tmp, demo, name, sender)),
        "GITHUB_WORKSPACE": str(demo.path),
        "GITHUB_API_URL": fake.base_url,
        "GITHUB_SHA": demo.head_sha,
        "GITHUB_OUTPUT": str(tmp / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "INPUT_GITHUB-TOKEN": fake.token,
        "INPUT_AGENT": "fake",
        "INPUT_REPEATS": "1",
        "INPUT_SANDBOX": "local",
        "INPUT_RESULTS-PATH": str(tmp / "results"),
    }
    env.update({input_variable(k): v for k, v in inputs.items()})
    settings = ActionSettings.from_env(env)
    event = load_event(env["GITHUB_EVENT_NAME"], Path(env["GITHUB_EVENT_PATH"]))
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
    return action_main.action(settings, event, port, ActionsRuntime.from_env(env, io.StringIO()))


def test_a_pull_request_opened_by_a_reader_waits_for_a_maintainers_label(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    result = _run(tmp_path, demo, fake, "pull_request.opened", OUTSIDER)

    assert result.activity == "awaiting_approval"
    check = fake.check_runs[-1]
    assert check["conclusion"] == "action_required"
    assert f"@{OUTSIDER} has no write access" in check["output"]["summary"]
    assert "`allowed-actors`" in check["output"]["summary"]
    assert fake.comments == [] and not (tmp_path / "results").exists()  # no agent ran

    fake.permissions["maintainer"] = "write"
    fake.apply_label(2, "docdelta:approved", "maintainer")
    approved = _run(tmp_path, demo, fake, "pull_request.opened", OUTSIDER)
    assert approved.activity == "evaluate"
    assert f"Evaluation of @{OUTSIDER}'s event approved by @maintainer." in fake.comments[0]["body"]


def test_allowed_actors_widens_who_may_start_an_evaluation(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    result = _run(
        tmp_path, demo, fake, "pull_request.opened", OUTSIDER, **{"allowed-actors": f"bot, {OUTSIDER}"}
    )
    assert result.activity == "evaluate"
    assert "approved by" not in fake.comments[0]["body"]


def test_the_owner_of_the_recorded_payload_evaluates_without_a_label(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    assert _run(tmp_path, demo, fake, "pull_request.opened", "Codertocat").activity == "evaluate"


@pytest.mark.parametrize("name", ["workflow_dispatch", "push"])
def test_a_refresh_or_an_ablation_by_a_reader_runs_no_agent(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub, name: str
) -> None:
    inputs = (
        {"results-store": f"dir:{tmp_path / 'store'}"}
        if name == "workflow_dispatch"
        else {"ablate": "AGENTS.md"}
    )
    result = _run(tmp_path, demo, fake, name, OUTSIDER, **inputs)
    assert result.activity == "skip"
    assert (
        result.outputs["error"]
        == f"@{OUTSIDER} has no write access and is not in `allowed-actors`: no agent runs"
    )
    assert not (tmp_path / "results").exists() and not (tmp_path / "store").exists()
