"""The Action's loop inputs end to end: `suggest: true` drafts a fix for what head missed,
proves it with a `head,patched` run and offers it in the sticky comment with its measured
effect; `audit: true` adds the task audit. Real PyGithub against the fake GitHub server,
the fake agent under the local sandbox, a PR that deletes the demo's Git rule; the comment
is checked as the server received it, and against `docdelta suggest --measured` on the
Action's own workdirs (the CLI and the Action make the same claim)."""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakegithub import FakeGitHub, event_path
from gitrepo import GitRepo
from modelserver import ScriptedModelServer
from modelserver.script import ErrorTurn, Script, TextTurn, TurnUsage

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


KEY = "sk-docdelta-action-suggest-key-0123456789"
MODEL = "gpt-4o-mini"


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


def _model_patch(pr: Pr) -> str:
    """The model's own wording: the rule back under a Git heading of its choosing."""
    new = pr.cut + f"\n## Git\n\n- {RULE}\n"
    diff = difflib.unified_diff(
        pr.cut.splitlines(keepends=True), new.splitlines(keepends=True), "a/AGENTS.md", "b/AGENTS.md"
    )
    return "diff --git a/AGENTS.md b/AGENTS.md\n" + "".join(diff)


def _with_model(
    tmp: Path, pr: Pr, fake: FakeGitHub, turn: TextTurn | ErrorTurn
) -> tuple[str, str, list[dict[str, Any]]]:
    """The Action with `suggest-model` against a scripted server: (log, comment, requests)."""
    with ScriptedModelServer(Script(name="suggest", model=MODEL, turns=[turn])) as server:
        result, log, body = _action(
            tmp, pr, fake, suggest="true", **{"suggest-model": MODEL, "suggest-base-url": f"{server.url}/v1",
            "api-key": KEY, "provider": "openai"},
        )  # fmt: skip
        requests = server.requests
    assert result.activity == "evaluate", log
    assert len(requests) == 1  # asked once
    assert KEY not in log and KEY not in body
    for path in (tmp / "results").rglob("*"):
        if path.is_file() and "checkouts" not in path.parts:
            assert KEY.encode() not in path.read_bytes(), path
    return log, body, requests


def test_suggest_model_offers_the_models_draft_once_the_patched_run_proved_it(
    tmp_path: Path, pr: Pr, fake: FakeGitHub
) -> None:
    patch = _model_patch(pr)
    usage = TurnUsage(input_tokens=900, output_tokens=40)
    log, body, [seen] = _with_model(
        tmp_path, pr, fake, TextTurn(text=json.dumps({"patch": patch}), usage=usage)
    )
    # The gateway put the key on the upstream request; the request asked about the miss.
    assert seen["auth"] == [["authorization", hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()]]
    assert "force-push" in json.dumps(seen["body"])
    section = _folded(body, "Suggested fix, measured:")
    claim = "adding these 2 lines raised force-push from 0.33 to 1.00 in 4 runs, p = 0.00714"
    assert section.startswith(f"<details><summary>Suggested fix, measured: {claim}</summary>")
    assert "Written by openai/gpt-4o-mini from the gold items head missed" in section
    assert f"\n\n## Git\n\n- {RULE}\n```" in section  # the model's lines, not the drafted heading
    assert "Rules agents missed" not in section
    # The proof ran the model's patch, which is kept beside the deterministic one.
    assert (tmp_path / "results" / "suggested-model.patch").read_text() == patch
    assert (tmp_path / "results" / "suggested.patch").is_file()
    assert "docdelta: suggest: openai/gpt-4o-mini drafted a patch (2 lines added); proving it" in log


@pytest.mark.parametrize(
    ("turn", "said", "logged"),
    [
        (
            TextTurn(text=json.dumps({"patch": f"+Use the key {KEY}."})),
            "openai/gpt-4o-mini's reply was refused: its reply holds a key or token the gateway was given; "
            "nothing of it was written",
            "docdelta: suggest: the model's draft was refused: its reply holds a key",
        ),
        (
            ErrorTurn(error=401, message=f"invalid key {KEY}"),
            "the call to openai/gpt-4o-mini failed (the job's log says why)",
            "answered 401",
        ),
    ],
    ids=["echoes the key", "gateway error"],
)
def test_a_refused_or_failed_model_draft_falls_back_to_the_deterministic_draft_and_says_so(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, turn: TextTurn | ErrorTurn, said: str, logged: str
) -> None:
    """(A garbled reply is refused by the same path: tests/integration/test_cli_suggest_model.py.)"""
    log, body, _ = _with_model(tmp_path, pr, fake, turn)
    assert logged in log
    section = _folded(body, "Suggested fix, measured:")
    assert "adding this line raised force-push from 0.33 to 1.00 in 4 runs" in section
    assert f"Not the model's draft: {said}. This is the deterministic draft." in section
    assert f"- {RULE}\n```" in section and "Rules agents missed (drafted by docdelta suggest)" in section
    assert not (tmp_path / "results" / "suggested-model.patch").exists()
