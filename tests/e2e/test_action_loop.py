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
from fakegithub import FakeGitHub, Request, event_path
from fakegithub.server import BOT
from gitrepo import GitRepo, git
from modelserver import ScriptedModelServer
from modelserver.script import ErrorTurn, Script, TextTurn, TurnUsage

from docdelta.action import main as action_main
from docdelta.action.publish import ActionResult
from docdelta.action.settings import ActionSettings, input_variable
from docdelta.action.suggest_loop import NO_PERMISSION, NOT_IN_DIFF, QUOTES_A_KEY
from docdelta.cli.main import main
from docdelta.demo import examples_dir
from docdelta.github.actions import ActionsRuntime
from docdelta.github.comment import suggestion_marker
from docdelta.github.events import load_event
from docdelta.github.pygithub import PyGithubPort
from docdelta.improve.suggest import HEADING
from docdelta.report.render import SCREEN_LINES

pytestmark = pytest.mark.timeout(300)
TASKS = ".docdelta/loop-tasks"
MALLORY = {"login": "mallory", "id": 666, "type": "User"}
RULE = (
    "Never force-push to `main` (no `git push --force`); fix a bad commit with a revert pull request instead."
)


ONE_TASK = ".docdelta/loop-one"
"""force-push alone: the suite of the runs on later heads, to keep them cheap."""
MORE = "- Keep pull requests small."
STYLE = "\n## Style\n\n- Wrap lines at 100 columns.\n- Prefer f-strings.\n- Name tests for what they show.\n"
PLANTED = "sk-planted-9f8e7d6c5b4a39281706"
"""A key someone committed into AGENTS.md; the workflow's `api-key` has the same value."""


@dataclass(frozen=True)
class Pr:
    repo: GitRepo
    base: str
    head: str
    good: str
    cut: str
    moved: str
    """head + one line at the end: the suggestion's anchor moves down one line."""
    restored: str
    """moved with the Git rule back: head misses nothing, no suggestion."""
    styled_base: str
    styled_head: str
    """A PR deleting the Git rule above a Style section it leaves alone: the end of the file,
    where the suggestion goes, is out of the PR's diff."""
    leaky: str
    """head + a line holding a committed key, the line the suggestion would hang on."""

    def files(self, sha: str) -> dict[str, bytes]:
        return {"AGENTS.md": git(self.repo.path, "show", f"{sha}:AGENTS.md").encode()}


@pytest.fixture(scope="module")
def pr(tmp_path_factory: pytest.TempPathFactory) -> Pr:
    """The demo with its good AGENTS.md at base and a PR that deletes the Git section; two
    of its tasks (force-push needs the deleted rule, install-dev does not) committed on base;
    the later heads and the other PRs of the tests below, as commits after it."""
    demo = examples_dir()
    repo = GitRepo.init(tmp_path_factory.mktemp("loop") / "repo")
    shutil.copytree(demo / "repo", repo.path, dirs_exist_ok=True)
    good = (demo / "head" / "AGENTS.md").read_text()
    cut = good[: good.index("## Git")].rstrip() + "\n"
    task = demo / "repo" / ".docdelta" / "tasks"
    tasks = {f"{TASKS}/{n}.yaml": (task / f"{n}.yaml").read_text() for n in ("force-push", "install-dev")}
    one = {f"{ONE_TASK}/force-push.yaml": (task / "force-push.yaml").read_text()}
    base = repo.commit({"AGENTS.md": good, **tasks, **one}, message="base")
    head = repo.commit({"AGENTS.md": cut}, message="drop the git rule")
    moved = repo.commit({"AGENTS.md": f"{cut}{MORE}\n"}, message="one more line")
    restored = repo.commit({"AGENTS.md": f"{good.rstrip()}\n{MORE}\n"}, message="the git rule is back")
    styled_base = repo.commit({"AGENTS.md": good + STYLE}, message="a style section")
    styled_head = repo.commit({"AGENTS.md": cut + STYLE}, message="drop the git rule above it")
    leaky = repo.commit({"AGENTS.md": f"{cut}- The staging deploy key is {PLANTED}.\n"}, message="a key")
    return Pr(repo, base, head, good, cut, moved, restored, styled_base, styled_head, leaky)


@pytest.fixture
def fake(pr: Pr) -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        for sha in (pr.base, pr.head, pr.moved, pr.restored, pr.styled_base, pr.styled_head, pr.leaky):
            server.add_commit(sha, pr.files(sha))
        server.add_pull(2, pr.base, pr.head, [("AGENTS.md", "modified")])
        yield server


KEY = "sk-docdelta-action-suggest-key-0123456789"
MODEL = "gpt-4o-mini"


def _action(
    tmp: Path,
    pr: Pr,
    fake: FakeGitHub,
    *,
    event: str = "opened",
    base: str | None = None,
    head: str | None = None,
    **inputs: str,
) -> tuple[ActionResult, str, str]:
    """The Action on the PR's `pull_request.<event>` for `base`...`head` (the fake PR's own
    commits by default): (result, log, the scorecard comment as posted)."""
    pull = fake.pulls[2]
    payload = json.loads(event_path(f"pull_request.{event}").read_text())
    payload["pull_request"]["base"]["sha"] = base or pull.base_sha  # EDIT: this repository's commits
    payload["pull_request"]["head"]["sha"] = head or pull.head_sha
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "event.json"
    path.write_text(json.dumps(payload))
    env = {
        "GITHUB_REPOSITORY": fake.repo, "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(path),
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
    result = action_main.action(
        ActionSettings.from_env(env),
        load_event("pull_request", path),
        port,
        ActionsRuntime.from_env(env, out),
    )
    bodies = [c["body"] for c in fake.comments]
    assert len(bodies) <= 1  # never a second scorecard
    return result, out.getvalue(), "".join(bodies)


def _folded(body: str, summary_start: str) -> str:
    start = body.index(f"<details><summary>{summary_start}")
    return body[start : body.index("</details>", start) + len("</details>")]


CLAIM = "adding this line raised force-push from 0.33 to 1.00 in 4 runs, p = 0.00714"
MARK = suggestion_marker("docdelta")


def _block(anchor_line: str) -> str:
    return f"```suggestion\n{anchor_line}\n\n{HEADING}\n\n- {RULE}\n```"


@dataclass(frozen=True)
class Opened:
    """The first run on the PR, kept: its results (copied by later tests, whose reruns then
    reuse every run) and what it posted."""

    result: ActionResult
    log: str
    body: str
    review_comments: list[dict[str, Any]]
    requests: list[Request]
    results: Path
    scorecard_url: str
    summary: str
    """The job summary as written."""


@pytest.fixture(scope="module")
def opened(pr: Pr, tmp_path_factory: pytest.TempPathFactory) -> Opened:
    tmp = tmp_path_factory.mktemp("opened")
    with FakeGitHub() as server:
        for sha in (pr.base, pr.head):
            server.add_commit(sha, pr.files(sha))
        server.add_pull(2, pr.base, pr.head, [("AGENTS.md", "modified")])
        result, log, body = _action(tmp, pr, server, suggest="true", audit="true")
        [scorecard] = server.comments
        url = f"https://github.com/Codertocat/Hello-World/pull/2#issuecomment-{scorecard['id']}"
        summary = (tmp / "summary.md").read_text()
        return Opened(result, log, body, server.review_comments, server.log, tmp / "results", url, summary)


def _resume(opened: Opened, tmp: Path) -> None:
    shutil.copytree(opened.results, tmp / "results")


def test_suggest_posts_the_proven_fix_as_a_review_comment_on_its_line_and_the_scorecard_links_it(
    tmp_path: Path, pr: Pr, opened: Opened, capsys: pytest.CaptureFixture[str]
) -> None:
    assert opened.result.activity == "evaluate", opened.log
    body = opened.body
    (tmp_path / "comment.md").write_text(body)  # kept for review with the test's output
    # The patch appends after head's last line, a context line of the PR's diff (the cut
    # section followed it): one review comment there, on head, holding the ```suggestion.
    last = len(pr.cut.splitlines())
    [review] = opened.review_comments
    (tmp_path / "review.md").write_text(review["body"])
    assert (review["path"], review["line"], review["start_line"], review["side"]) == (
        "AGENTS.md",
        last,
        None,
        "RIGHT",
    )
    assert review["commit_id"] == pr.head and review["user"]["login"] == "github-actions[bot]"
    assert review["body"].startswith(
        f"{MARK}\n**docdelta measured this change on `{pr.head[:12]}`:** {CLAIM}\n"
    )
    assert _block(pr.cut.splitlines()[-1]) in review["body"] and f"- {CLAIM}\n" in review["body"]
    [posted] = [r for r in opened.requests if r.method == "POST" and r.path == "/pulls/2/comments"]
    assert posted.body["commit_id"] == pr.head and posted.status == 201
    # It links back to the scorecard comment: posted first, so its url is known, then edited
    # once to link to the review comment. Three writes in all, one more than unlinked.
    assert f"The [scorecard comment]({opened.scorecard_url}) has the whole evaluation." in review["body"]
    writes = [(r.method, r.path) for r in opened.requests if r.method in {"POST", "PATCH", "DELETE"}]
    writes = [w for w in writes if "comments" in w[1]]
    scorecard_id = opened.scorecard_url.rsplit("-", 1)[1]
    assert writes == [
        ("POST", "/issues/2/comments"),
        ("POST", "/pulls/2/comments"),
        ("PATCH", f"/issues/comments/{scorecard_id}"),
    ]
    # The scorecard links to it, and does not repeat the block.
    section = _folded(body, "Suggested fix, measured:")
    url = f"https://github.com/Codertocat/Hello-World/pull/2#discussion_r{review['id']}"
    assert section.startswith(f"<details><summary>Suggested fix, measured: {CLAIM}</summary>")
    assert f"Posted as a [review comment on `AGENTS.md` line {last}]({url})" in section
    assert "```" not in section and f"- {CLAIM}\n" in section
    assert f"review comment posted on `AGENTS.md` line {last}: {url}" in opened.log
    assert section in opened.summary  # the job summary holds the comment as it ends, link and all
    # The first screen is the scorecard's alone.
    top = body.split("<details>", 1)[0].strip().splitlines()[1:]
    assert len(top) <= SCREEN_LINES and "Suggested fix" not in "\n".join(top)
    # The patched run is its own workdir, and its cost is in the outputs.
    results = opened.results
    assert (results / f"{pr.base[:12]}-{pr.head[:12]}-patched" / "results" / "manifest.json").is_file()

    # The CLI, on the Action's own workdirs, makes the same claim.
    workdir = results / f"{pr.base[:12]}-{pr.head[:12]}"
    capsys.readouterr()
    args = [
        "suggest", "--workdir", str(workdir / "results"), "--repo", str(pr.repo.path),
        "--tasks", str(workdir / "tasks"), "--out", str(tmp_path / "cli.patch"),
        "--measured", str(results / f"{pr.base[:12]}-{pr.head[:12]}-patched" / "results"),
    ]  # fmt: skip
    assert main(args) == 0
    assert CLAIM in capsys.readouterr().out
    assert (tmp_path / "cli.patch").read_text() == (results / "suggested.patch").read_text()

    audit = _folded(body, "Task audit:")
    assert audit.startswith(
        "<details><summary>Task audit: 1 target, 1 control · 0 leaked answers · 0 unattainable items · "
        "1 saturated</summary>"
    )
    assert "| force-push | target | — |" in audit  # by base's AGENTS.md: head deleted the rule
    saturated = "saturated: every base, head run scored 1 (8 runs)"
    assert f"| install-dev | control | gold also in README.md; {saturated} |" in audit


def test_a_rerun_edits_the_bots_review_comment_on_the_same_line_and_posts_no_second_one(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, opened: Opened
) -> None:
    _resume(opened, tmp_path)
    last = len(pr.cut.splitlines())
    ours = fake.add_review_comment(2, f"{MARK}\nan older claim", BOT, "AGENTS.md", last)
    theirs = fake.add_review_comment(2, f"{MARK}\nquoting the bot", MALLORY, "AGENTS.md", last)

    result, log, _body = _action(tmp_path, pr, fake, event="synchronize", suggest="true")

    assert result.activity == "evaluate", log
    bodies = {c["id"]: c["body"] for c in fake.review_comments}
    assert bodies[theirs] == f"{MARK}\nquoting the bot"  # someone else's is never touched
    assert set(bodies) == {ours, theirs}
    [scorecard] = fake.comments
    here = f"https://github.com/Codertocat/Hello-World/pull/2#issuecomment-{scorecard['id']}"
    assert bodies[ours] == opened.review_comments[0]["body"].replace(opened.scorecard_url, here)
    assert not fake.requests("POST", r"/pulls/2/comments") and not fake.requests("DELETE")
    assert [r.path for r in fake.requests("PATCH", r"/pulls/comments/\d+")] == [f"/pulls/comments/{ours}"]
    assert f"review comment kept on `AGENTS.md` line {last}" in log


def test_a_push_that_moves_the_anchor_reposts_it_and_one_that_proves_nothing_deletes_it(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, opened: Opened
) -> None:
    last = len(pr.cut.splitlines())
    old = fake.add_review_comment(2, opened.review_comments[0]["body"], BOT, "AGENTS.md", last)
    fake.push(2, pr.moved)  # GitHub keeps it on its line, which the new push left as it was
    assert fake.review_comments[0]["line"] == last

    _result, log, body = _action(
        tmp_path / "moved", pr, fake, event="synchronize", suggest="true", tasks=ONE_TASK
    )

    [review] = fake.review_comments
    assert review["id"] != old and (review["line"], review["commit_id"]) == (last + 1, pr.moved)
    assert _block(MORE) in review["body"]
    assert [r.path for r in fake.requests("DELETE")] == [f"/pulls/comments/{old}"]
    assert "1 older one deleted: its anchor moved" in log
    assert f"#discussion_r{review['id']})" in _folded(body, "Suggested fix, measured:")

    fake.push(2, pr.restored)
    _result, log, body = _action(
        tmp_path / "restored", pr, fake, event="synchronize", suggest="true", tasks=ONE_TASK
    )

    assert fake.review_comments == [] and "Suggested fix" not in body
    assert "the earlier suggestion's review comment was deleted (1)" in log


CRASHES = "sh -c 'echo the agent crashed >&2; exit 1'"
"""Every run an agent_error: a broken matrix, with no verdict and nothing proven."""


def test_a_broken_run_keeps_the_suggestion_proven_on_its_head_and_deletes_one_from_an_older_head(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, opened: Opened
) -> None:
    """A run that proved nothing (its matrix broke) says nothing against a suggestion proven
    on the same head; one proven on an older head would look current on the new one."""
    last = len(pr.cut.splitlines())
    proven = opened.review_comments[0]["body"]
    old = fake.add_review_comment(2, proven, BOT, "AGENTS.md", last)
    broken = {"suggest": "true", "tasks": ONE_TASK, "agent": "command", "agent-command": CRASHES}

    _result, log, body = _action(tmp_path / "same", pr, fake, event="synchronize", **broken)

    assert "This evaluation is broken, so there is no verdict." in body
    assert [c["id"] for c in fake.review_comments] == [old] and fake.review_comments[0]["body"] == proven
    assert not fake.requests("DELETE") and not fake.requests("PATCH", r"/pulls/comments/\d+")
    assert "no suggest/audit section after an incomplete or broken run" in log

    fake.push(2, pr.moved)
    _result, log, _body = _action(tmp_path / "newer", pr, fake, event="synchronize", **broken)

    assert fake.review_comments == []
    assert [r.path for r in fake.requests("DELETE")] == [f"/pulls/comments/{old}"]
    assert "review comment was deleted (proven on an older head) (1)" in log


def test_a_matrixs_aggregate_job_deletes_a_suggestion_from_an_older_head(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, opened: Opened
) -> None:
    """The aggregate job (`merge`) runs no patched matrix: it proves nothing about a suggestion,
    so one proven on the head before the push must not stay looking current."""
    last = len(pr.cut.splitlines())
    old = fake.add_review_comment(2, opened.review_comments[0]["body"], BOT, "AGENTS.md", last)
    fake.push(2, pr.moved)
    shards = tmp_path / "shards"
    for i in (1, 2):
        done, log, _ = _action(
            tmp_path / f"job{i}", pr, fake, event="synchronize", suggest="true", tasks=ONE_TASK,
            shard=f"{i}/2", **{"results-path": str(shards / str(i))},
        )  # fmt: skip
        assert done.title == f"shard {i}/2 done", log
    assert [c["id"] for c in fake.review_comments] == [old]  # a run job touches nothing

    merged, log, body = _action(
        tmp_path / "merge", pr, fake, event="synchronize", suggest="true", tasks=ONE_TASK, merge=str(shards)
    )

    assert merged.activity == "evaluate" and "**Merged** 2 shards" in body, log
    assert fake.review_comments == [] and "Suggested fix" not in body
    assert "review comment was deleted (proven on an older head) (1)" in log


def test_a_patched_run_that_broke_keeps_the_suggestion_proven_on_the_same_head(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, opened: Opened
) -> None:
    """The rerun's own matrix is fine but its patched run is broken (every saved patched run
    an agent_error, which a resume reuses): no proof either way, so the comment stands."""
    _resume(opened, tmp_path)
    patched = tmp_path / "results" / f"{pr.base[:12]}-{pr.head[:12]}-patched"
    for saved in patched.rglob("result.json"):
        result = json.loads(saved.read_text())
        result["status"] = result["outcome"]["status"] = "agent_error"
        saved.write_text(json.dumps(result))
    last = len(pr.cut.splitlines())
    proven = opened.review_comments[0]["body"]
    old = fake.add_review_comment(2, proven, BOT, "AGENTS.md", last)

    _result, log, body = _action(tmp_path, pr, fake, event="synchronize", suggest="true")

    assert "suggest: no suggestion offered: the patched run did not finish" in log
    assert [c["id"] for c in fake.review_comments] == [old] and fake.review_comments[0]["body"] == proven
    assert not fake.requests("DELETE") and "Suggested fix" not in body


def test_with_comment_false_a_suggestion_from_an_older_head_is_deleted_and_nothing_is_posted(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, opened: Opened
) -> None:
    last = len(pr.cut.splitlines())
    old = fake.add_review_comment(2, opened.review_comments[0]["body"], BOT, "AGENTS.md", last)
    fake.push(2, pr.moved)

    result, log, _body = _action(
        tmp_path, pr, fake, event="synchronize", suggest="true", tasks=ONE_TASK, comment="false"
    )

    assert result.activity == "evaluate", log
    assert fake.review_comments == [] and fake.comments == []
    assert [r.path for r in fake.requests("DELETE")] == [f"/pulls/comments/{old}"]
    assert not fake.requests("POST", r"/(issues|pulls)/2/comments")
    summary = (tmp_path / "summary.md").read_text()  # the proven change is still offered there
    assert "Suggested fix, measured:" in summary and _block(MORE) in summary


def test_a_suggestion_off_the_prs_diff_stays_in_the_scorecard_and_says_why(
    tmp_path: Path, pr: Pr, fake: FakeGitHub
) -> None:
    fake.add_pull(2, pr.styled_base, pr.styled_head, [("AGENTS.md", "modified")])
    stale = fake.add_review_comment(2, f"{MARK}\nan older claim", BOT, "AGENTS.md", 14)

    result, log, body = _action(tmp_path, pr, fake, suggest="true", tasks=ONE_TASK)

    assert result.activity == "evaluate", log
    section = _folded(body, "Suggested fix, measured:")
    assert NOT_IN_DIFF in section and "```diff\n" in section and "```suggestion" not in section
    assert not fake.review_comments  # no new one, and the stale one is gone
    assert [r.path for r in fake.requests("DELETE")] == [f"/pulls/comments/{stale}"]
    assert not fake.requests("POST", r"/pulls/2/comments")


def test_without_pull_requests_write_the_suggestion_stays_in_the_scorecard_with_a_warning(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, opened: Opened
) -> None:
    _resume(opened, tmp_path)
    fake.deny_review_comments = True

    result, log, body = _action(tmp_path, pr, fake, suggest="true", audit="true")

    assert (result.activity, result.conclusion) == (opened.result.activity, opened.result.conclusion)
    assert result.exit_code == 0 and not fake.review_comments
    [warning] = [line for line in log.splitlines() if line.startswith("::warning")]
    assert NO_PERMISSION in warning and "HTTP 403" not in warning
    section = _folded(body, "Suggested fix, measured:")
    assert f"docdelta could not post it as a review comment ({NO_PERMISSION})." in section
    assert _block(pr.cut.splitlines()[-1]) in section  # the change itself, to paste
    [check] = fake.check_runs
    assert check["conclusion"] == opened.result.conclusion


def test_a_key_planted_in_the_line_the_suggestion_quotes_reaches_no_comment_log_or_summary(
    tmp_path: Path, pr: Pr, fake: FakeGitHub
) -> None:
    fake.add_pull(2, pr.base, pr.leaky, [("AGENTS.md", "modified")])

    result, log, body = _action(tmp_path, pr, fake, suggest="true", tasks=ONE_TASK, **{"api-key": PLANTED})

    assert result.activity == "evaluate", log
    assert not fake.review_comments and not fake.requests("POST", r"/pulls/2/comments")
    assert QUOTES_A_KEY in _folded(body, "Suggested fix, measured:")
    assert any(line.startswith("::warning") and QUOTES_A_KEY in line for line in log.splitlines())
    posted = [body, log, (tmp_path / "summary.md").read_text(), (tmp_path / "output.txt").read_text()]
    posted += [json.dumps(r.body) for r in fake.log]
    assert not [text for text in posted if PLANTED in text]


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
    tmp: Path, pr: Pr, fake: FakeGitHub, opened: Opened, turn: TextTurn | ErrorTurn, *, reuse_proof: bool
) -> tuple[str, str, list[dict[str, Any]]]:
    """The Action with `suggest-model` against a scripted server, reusing the opened run's
    base,head runs (and its patched run of the deterministic draft, with `reuse_proof`):
    (log, comment, the model server's requests). The key is nowhere docdelta wrote."""
    _resume(opened, tmp)
    if not reuse_proof:
        shutil.rmtree(tmp / "results" / f"{pr.base[:12]}-{pr.head[:12]}-patched")
    with ScriptedModelServer(Script(name="suggest", model=MODEL, turns=[turn])) as server:
        result, log, body = _action(
            tmp, pr, fake, suggest="true", **{"suggest-model": MODEL, "suggest-base-url": f"{server.url}/v1",
            "api-key": KEY, "provider": "openai"},
        )  # fmt: skip
        requests = server.requests
    assert result.activity == "evaluate", log
    assert len(requests) == 1  # asked once
    assert KEY not in log and KEY not in body
    assert all(KEY not in r["body"] for r in fake.review_comments)
    for path in (tmp / "results").rglob("*"):
        if path.is_file() and "checkouts" not in path.parts:
            assert KEY.encode() not in path.read_bytes(), path
    return log, body, requests


def test_suggest_model_offers_the_models_draft_once_the_patched_run_proved_it(
    tmp_path: Path, pr: Pr, fake: FakeGitHub, opened: Opened
) -> None:
    patch = _model_patch(pr)
    usage = TurnUsage(input_tokens=900, output_tokens=40)
    turn = TextTurn(text=json.dumps({"patch": patch}), usage=usage)
    log, body, [seen] = _with_model(tmp_path, pr, fake, opened, turn, reuse_proof=False)
    # The gateway put the key on the upstream request; the request asked about the miss.
    assert seen["auth"] == [["authorization", hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()]]
    assert "force-push" in json.dumps(seen["body"])
    claim = "adding these 2 lines raised force-push from 0.33 to 1.00 in 4 runs, p = 0.00714"
    written = "Written by openai/gpt-4o-mini from the gold items head missed"
    # The review comment holds the model's lines, not the drafted heading.
    [review] = fake.review_comments
    assert review["body"].startswith(
        f"{MARK}\n**docdelta measured this change on `{pr.head[:12]}`:** {claim}\n"
    )
    assert f"```suggestion\n{pr.cut.splitlines()[-1]}\n\n## Git\n\n- {RULE}\n```" in review["body"]
    assert written in review["body"] and HEADING not in review["body"]
    section = _folded(body, "Suggested fix, measured:")
    assert section.startswith(f"<details><summary>Suggested fix, measured: {claim}</summary>")
    assert written in section and "Posted as a [review comment on `AGENTS.md` line" in section
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
            TextTurn(text="Sure! Add a line about force-pushing."),
            'openai/gpt-4o-mini\'s reply was refused: its reply is not a JSON object with a "patch" string',
            "docdelta: suggest: the model's draft was refused: its reply is not a JSON object",
        ),
        (
            ErrorTurn(error=401, message=f"invalid key {KEY}"),
            "the call to openai/gpt-4o-mini failed (the job's log says why)",
            "answered 401",
        ),
    ],
    ids=["echoes the key", "garbled", "gateway error"],
)
def test_a_refused_or_failed_model_draft_falls_back_to_the_deterministic_draft_and_says_so(
    tmp_path: Path,
    pr: Pr,
    fake: FakeGitHub,
    opened: Opened,
    turn: TextTurn | ErrorTurn,
    said: str,
    logged: str,
) -> None:
    """The other refusals (too big, a path outside, ...) take the garbled reply's path; their
    checks: tests/integration/test_cli_suggest_model.py."""
    log, body, _ = _with_model(tmp_path, pr, fake, opened, turn, reuse_proof=True)
    assert logged in log
    note = f"Not the model's draft: {said}. This is the deterministic draft. Drafted from the gold items"
    [review] = fake.review_comments
    assert _block(pr.cut.splitlines()[-1]) in review["body"] and note in review["body"]
    section = _folded(body, "Suggested fix, measured:")
    assert section.startswith(f"<details><summary>Suggested fix, measured: {CLAIM}</summary>")
    assert note in section
    assert not (tmp_path / "results" / "suggested-model.patch").exists()
