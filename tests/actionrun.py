"""Drive the Action (`docdelta.action.main.action`) in-process with real PyGithub against the fake
GitHub server, on a workspace checkout: the pull-request event and the run, for the tests
of the results store and of the history kept in it."""

from __future__ import annotations

import io
import json
from pathlib import Path

from fakegithub import FakeGitHub, event_path

from docdelta.action import main as action_main
from docdelta.action.publish import ActionResult
from docdelta.action.settings import ActionSettings, input_variable
from docdelta.demo import DemoRepo, build_demo_repo
from docdelta.git import run_git
from docdelta.github.actions import ActionsRuntime
from docdelta.github.events import load_event
from docdelta.github.pygithub import PyGithubPort


def demo_workspace(tmp: Path) -> tuple[Path, DemoRepo]:
    """A clone (`tmp/ws`) of the demo repository whose `origin` is a bare repository
    (`tmp/origin.git`, GitHub's stand-in, where the data branch is pushed)."""
    demo = build_demo_repo(tmp / "demo")
    for args in (
        ("--bare", str(demo.path), str(tmp / "origin.git")),
        (str(tmp / "origin.git"), str(tmp / "ws")),
    ):
        proc = run_git(tmp, "clone", "--quiet", *args)
        assert proc.returncode == 0, proc.stderr.decode()
    return tmp / "ws", demo


def pr_event(tmp: Path, number: int, base: str, head: str) -> Path:
    """A recorded `pull_request.opened` payload, edited to name PR `number` from base to head."""
    payload = json.loads(event_path("pull_request.opened").read_text())
    payload["number"] = payload["pull_request"]["number"] = number  # EDIT: PR number
    payload["pull_request"]["base"]["sha"] = base  # EDIT: the demo's commits
    payload["pull_request"]["head"]["sha"] = head
    path = tmp / f"pr-{number}.json"
    path.write_text(json.dumps(payload))
    return path


def act(
    tmp: Path, ws: Path, fake: FakeGitHub, event: str, path: Path, store: str, sha: str = "", **inputs: str
) -> tuple[ActionResult, str]:
    """One Action run with the fake agent in the local sandbox, 2 repeats, results store `store`
    and `inputs` (underscores for hyphens); (its result, its log). Each run gets results and a
    job summary of its own under `tmp`."""
    env = {
        "GITHUB_REPOSITORY": fake.repo,
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(path),
        "GITHUB_WORKSPACE": str(ws),
        "GITHUB_SHA": sha,
        "INPUT_GITHUB-TOKEN": fake.token,
        "INPUT_AGENT": "fake",
        "INPUT_REPEATS": "2",
        "INPUT_SANDBOX": "local",
        "INPUT_RESULTS-STORE": store,
        "INPUT_RESULTS-PATH": str(tmp / f"results-{len(list(tmp.glob('results-*')))}"),
        "GITHUB_STEP_SUMMARY": str(tmp / f"summary-{len(list(tmp.glob('summary-*')))}.md"),
    } | {input_variable(k.replace("_", "-")): v for k, v in inputs.items()}
    out = io.StringIO()
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
    result = action_main.action(
        ActionSettings.from_env(env), load_event(event, path), port, ActionsRuntime.from_env(env, out)
    )
    return result, out.getvalue()
