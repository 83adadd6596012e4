"""The Action's loop inputs end to end: `suggest: true` drafts a fix for what head missed,
proves it with a `head,patched` run and offers it in the sticky comment with its measured
effect; `audit: true` adds the task audit. Real PyGithub against the fake GitHub server,
the fake agent under the local sandbox, a PR that deletes the demo's Git rule; the comment
is checked as the server received it, and against `docdelta suggest --measured` on the
Action's own workdirs (the CLI and the Action make the same claim)."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakegithub import FakeGitHub, event_path
from gitrepo import GitRepo

from docdelta import app
from docdelta.cli import main
from docdelta.demo import examples_dir
from docdelta.github.actions import ActionsRuntime
from docdelta.github.events import load_event
from docdelta.github.pygithub import PyGithubPort
from docdelta.report.render import SCREEN_LINES
from docdelta.settings import ActionSettings, input_variable

pytestmark = pytest.mark.timeout(300)
TASKS = ".docdelta/loop-tasks"
RULE = (
    "Never force-push to `main` (no `git push --force`); fix a bad commit with a revert pull request instead."
)


@dataclass(frozen=True)
class Pr:
    repo: GitRepo
    base: str
    head: str
    good: str
    cut: str


@pytest.fixture(scope="module")
def pr(tmp_path_factory: pytest.TempPathFactory) -> Pr:
    """The demo with its good AGENTS.md at base and a PR that deletes the Git section; two
    of its tasks (force-push needs the deleted rule, install-dev does not) committed on base."""
    demo = examples_dir()
    repo = GitRepo.init(tmp_path_factory.mktemp("loop") / "repo")
    shutil.copytree(demo / "repo", repo.path, dirs_exist_ok=True)
    good = (demo / "head" / "AGENTS.md").read_text()
    cut = good[: good.index("## Git")].rstrip() + "\n"
    tasks = {
        f"{TASKS}/{n}.yaml": (demo / "repo" / ".docdelta" / "tasks" / f"{n}.yaml").read_text()
        for n in ("force-push", "install-dev")
    }
    base = repo.commit({"AGENTS.md": good, **tasks}, message="base")
    head = repo.commit({"AGENTS.md": cut}, message="drop the git rule")
    return Pr(repo, base, head, good, cut)


@pytest.fixture
def fake(pr: Pr) -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.add_commit(pr.base, {"AGENTS.md": pr.good.encode()})
        server.add_commit(pr.head, {"AGENTS.md": pr.cut.encode()})
        server.add_pull(2, pr.base, pr.head, [("AGENTS.md", "modified")])
        yield server


def _action(tmp: Path, pr: Pr, fake: FakeGitHub, **inputs: str) -> tuple[app.ActionResult, str, str]:
    """The Action on the PR's `pull_request.opened`: (result, log, the comment as posted)."""
    payload = json.loads(event_path("pull_request.opened").read_text())
    payload["pull_request"]["base"]["sha"] = pr.base  # EDIT: this repository's commits
    payload["pull_request"]["head"]["sha"] = pr.head
    event = tmp / "event.json"
    event.write_text(json.dumps(payload))
    env = {
        "GITHUB_REPOSITORY": fake.repo, "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event),
        "GITHUB_WORKSPACE": str(pr.repo.path), "GITHUB_API_URL": fake.base_url, "GITHUB_RUN_ID": "77",
        "GITHUB_OUTPUT": str(tmp / "output.txt"), "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
    } | {
        input_variable(k): v
        for k, v in {
            "github-token": fake.token, "agent": "fake", "sandbox": "local", "repeats": "4",
            "conditions": "base,head", "tasks": TASKS, "results-path": str(tmp / "results"), **inputs,
        }.items()
    }  # fmt: skip
    out = io.StringIO()
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
    result = app.action(
        ActionSettings.from_env(env),
        load_event("pull_request", event),
        port,
        ActionsRuntime.from_env(env, out),
    )
    [comment] = fake.comments
    return result, out.getvalue(), comment["body"]


def _folded(body: str, summary_start: str) -> str:
    start = body.index(f"<details><summary>{summary_start}")
    return body[start : body.index("</details>", start) + len("</details>")]


def test_suggest_offers_the_proven_fix_folded_in_the_comment_with_its_measured_effect(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    result, log, body = _action(tmp_path, pr, fake, suggest="true", audit="true")
    assert result.activity == "evaluate", log
    (tmp_path / "comment.md").write_text(body)  # kept for review with the test's output
    section = _folded(body, "Suggested fix, measured:")
    claim = "adding this line raised force-push from 0.33 to 1.00 in 4 runs, p = 0.00714"
    assert section.startswith(f"<details><summary>Suggested fix, measured: {claim}</summary>")
    # The patch appends after head's last line, a context line of the PR's diff (the cut
    # section followed it): a ```suggestion block on that line.
    last = pr.cut.splitlines()[-1]
    where = f"`AGENTS.md` line {len(pr.cut.splitlines())} (a review comment there with this block applies it)"
    assert where in section
    assert (
        f"```suggestion\n{last}\n\n## Rules agents missed (drafted by docdelta suggest)\n\n- {RULE}\n```"
        in section
    )
    assert f"- {claim}\n" in section
    # The first screen is the scorecard's alone.
    top = body.split("<details>", 1)[0].strip().splitlines()[1:]
    assert len(top) <= SCREEN_LINES and "Suggested fix" not in "\n".join(top)
    # The patched run is its own workdir, and its cost is in the outputs.
    assert (
        tmp_path / "results" / f"{pr.base[:12]}-{pr.head[:12]}-patched" / "results" / "manifest.json"
    ).is_file()

    # The CLI, on the Action's own workdirs, makes the same claim.
    workdir = tmp_path / "results" / f"{pr.base[:12]}-{pr.head[:12]}"
    capsys.readouterr()
    args = [
        "suggest", "--workdir", str(workdir / "results"), "--repo", str(pr.repo.path),
        "--tasks", str(workdir / "tasks"), "--out", str(tmp_path / "cli.patch"),
        "--measured", str(tmp_path / "results" / f"{pr.base[:12]}-{pr.head[:12]}-patched" / "results"),
    ]  # fmt: skip
    assert main(args) == 0
    assert claim in capsys.readouterr().out
    assert (tmp_path / "cli.patch").read_text() == (tmp_path / "results" / "suggested.patch").read_text()

    audit = _folded(body, "Task audit:")
    assert audit.startswith(
        "<details><summary>Task audit: 1 target, 1 control · 0 leaked answers · 0 unattainable items · "
        "1 saturated</summary>"
    )
    assert "| force-push | target | — |" in audit  # by base's AGENTS.md: head deleted the rule
    saturated = "saturated: every base, head run scored 1 (8 runs)"
    assert f"| install-dev | control | gold also in README.md; {saturated} |" in audit


def test_without_the_inputs_the_comment_has_no_loop_sections_and_no_patched_run(
    tmp_path: Path, pr: Pr, fake: FakeGitHub
) -> None:
    result, log, body = _action(tmp_path, pr, fake)
    assert result.activity == "evaluate", log
    assert "Suggested fix" not in body and "Task audit" not in body
    assert not list((tmp_path / "results").glob("*-patched"))
