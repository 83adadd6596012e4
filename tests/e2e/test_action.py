"""The Action end to end: a real webhook payload -> comment, check run and outputs.

Every test drives `docdelta.action.main` with the real PyGithub client against the fake GitHub
server on loopback, the bundled demo repository as the runner's checkout, the fake
agent and the local sandbox. Payloads are the recorded ones from tests/fakegithub/events,
copied and edited in `_event` so each edit is visible here.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import arm, summary_of
from fakegithub import FakeGitHub, event_path

from docdelta.action import main as action_main
from docdelta.action.publish import ActionResult
from docdelta.action.settings import ActionSettings, input_variable
from docdelta.demo import DemoRepo, build_demo_repo
from docdelta.github.actions import ActionsRuntime
from docdelta.github.annotations import added_lines
from docdelta.github.events import load_event
from docdelta.github.pygithub import PyGithubPort
from docdelta.report import render
from docdelta.results.models import RunResult
from docdelta.scorecard.history import HISTORY_DIR, History
from docdelta.scorecard.models import Summary

API_KEY = "sk-test-SECRET-api-key-0123456789"
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    return build_demo_repo(tmp_path_factory.mktemp("ws") / "repo")


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


def _changed(demo: DemoRepo) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["git", "-c", "safe.directory=*", "diff", "--name-status", demo.base_sha, demo.head_sha],
        cwd=demo.path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    status = {"M": "modified", "A": "added", "D": "removed"}
    return [(line.split("\t")[1], status[line[0]]) for line in out.splitlines()]


def _files_at(demo: DemoRepo, sha: str) -> dict[str, bytes]:
    names = subprocess.run(
        ["git", "-c", "safe.directory=*", "ls-tree", "-r", "--name-only", sha],
        cwd=demo.path, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return {
        n: subprocess.run(
            ["git", "-c", "safe.directory=*", "show", f"{sha}:{n}"],
            cwd=demo.path,
            capture_output=True,
            check=True,
        ).stdout
        for n in names
    }


def _event(
    tmp: Path, demo: DemoRepo, *, base: str | None = None, head: str | None = None, **edits: Any
) -> Path:
    """pull_request.opened, edited: the demo's base/head shas, plus `edits` (fork, action)."""
    payload = json.loads(event_path("pull_request.opened").read_text())
    pr = payload["pull_request"]
    pr["base"]["sha"] = base or demo.base_sha  # EDIT: the demo repository's commits
    pr["head"]["sha"] = head or demo.head_sha
    if edits.get("fork"):
        pr["head"]["repo"]["full_name"] = "forker/Hello-World"  # EDIT: the head lives in a fork
    if "action" in edits:
        payload["action"] = edits["action"]  # EDIT: e.g. synchronize
    path = tmp / f"event-{len(list(tmp.glob('event-*')))}.json"
    path.write_text(json.dumps(payload))
    return path


def _env(tmp: Path, demo: DemoRepo, fake: FakeGitHub, event: Path, **inputs: str) -> dict[str, str]:
    env = {
        "GITHUB_REPOSITORY": fake.repo,
        "GITHUB_EVENT_NAME": inputs.pop("event_name", "pull_request"),
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_WORKSPACE": str(demo.path),
        "GITHUB_API_URL": fake.base_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "77",
        "GITHUB_OUTPUT": str(tmp / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "INPUT_GITHUB-TOKEN": fake.token,
        "INPUT_AGENT": "fake",
        "INPUT_API-KEY": API_KEY,
        "INPUT_REPEATS": "2",
        "INPUT_SANDBOX": "local",
        "INPUT_RESULTS-PATH": str(tmp / "results"),
    }
    env.update({input_variable(k.replace("_", "-")): v for k, v in inputs.items()})
    return env


def _run(env: dict[str, str], fake: FakeGitHub) -> tuple[ActionResult, str]:
    """`action()` as `main()` wires it, with the port's politeness delays off for speed."""
    out = io.StringIO()
    settings = ActionSettings.from_env(env)
    event = load_event(env["GITHUB_EVENT_NAME"], Path(env["GITHUB_EVENT_PATH"]))
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
    result = action_main.action(settings, event, port, ActionsRuntime.from_env(env, out))
    return result, out.getvalue()


def _outputs(tmp: Path) -> dict[str, str]:
    lines = (tmp / "output.txt").read_text().splitlines()
    out, i = {}, 0
    while i < len(lines):
        name, _, delim = lines[i].partition("<<")
        end = lines.index(delim, i + 1)
        out[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    return out


def _latest_check(fake: FakeGitHub) -> dict[str, Any]:
    return fake.check_runs[-1]


# ------------------------------------------------------------------- the PR
def test_a_pull_request_gets_a_scorecard_comment_a_check_and_outputs_and_a_rerun_edits_the_comment(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo))

    result, log = _run(env, fake)

    assert result.activity == "evaluate"
    assert len(fake.comments) == 1
    body = fake.comments[0]["body"]
    assert body.startswith("<!-- docdelta:docdelta -->")
    assert "docdelta scorecard" in body and "| **all tasks** |" in body
    assert f"\n{fake.repo} · source `" in body  # the repository, not the checkout's directory name
    assert "**Gate** (`fail-on: regression`)" in body
    assert "```mermaid\nxychart-beta" in body and "<details><summary>" in body
    anchor = hashlib.sha256(b"AGENTS.md").hexdigest()  # GitHub's anchor of a file's diff
    assert f"[`AGENTS.md`](https://github.com/{fake.repo}/pull/2/files#diff-{anchor})" in body
    check = _latest_check(fake)
    assert check["name"] == "docdelta" and check["head_sha"] == demo.head_sha
    assert check["status"] == "completed"
    assert check["conclusion"] == result.conclusion and check["conclusion"] in (
        "success",
        "neutral",
        "failure",
    )
    assert check["output"]["summary"].startswith("## docdelta scorecard")
    outputs = _outputs(tmp_path)
    assert outputs["verdict"] == result.outputs["verdict"] != ""
    assert float(outputs["head-vs-base"]) > 0  # the demo's head docs do help the fake agent
    assert outputs["comment-url"].endswith(f"#issuecomment-{fake.comments[0]['id']}")
    assert Path(outputs["results-path"]) == tmp_path / "results"
    assert "docdelta scorecard" in (tmp_path / "summary.md").read_text()
    assert API_KEY not in log and fake.token not in log

    # synchronize: same PR, run again -> the one comment is edited, never a second one
    env["GITHUB_EVENT_PATH"] = str(_event(tmp_path, demo, action="synchronize"))
    again, _ = _run(env, fake)
    assert again.activity == "evaluate"
    assert len(fake.comments) == 1
    assert len(fake.requests("PATCH", r"/issues/comments/\d+")) <= 1  # edited only if the text changed
    assert len(fake.requests("POST", r"/issues/\d+/comments")) == 1
    # the rerun started and completed a check run of its own; the first one stayed completed
    assert [r["status"] for r in fake.check_runs] == ["completed", "completed"]
    assert fake.check_runs[0]["output"] == check["output"]
    # One history record for the evaluation (the rerun reused every run), a receipt for head's AGENTS.md.
    history = History.at(tmp_path / "results" / HISTORY_DIR)
    (record,), _ = history.records()
    assert record.head_sha == demo.head_sha and record.pr == 2
    head_agents = hashlib.sha256((demo.path / "AGENTS.md").read_bytes()).hexdigest()
    receipt = history.receipt(head_agents)
    assert receipt is not None and receipt.paths == ["AGENTS.md"] and len(receipt.evaluations) == 1


def test_the_default_results_path_inside_the_workspace_runs_every_cell(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    """`results-path` defaults to `<workspace>/.docdelta-results`, inside the repository the
    sandbox hides: every run used to be agent_error and the check still said success."""
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo))
    del env["INPUT_RESULTS-PATH"]
    results = demo.path / ".docdelta-results"
    try:
        result, _ = _run(env, fake)
        statuses = {json.loads(p.read_text())["status"] for p in results.rglob("result.json")}
    finally:
        shutil.rmtree(results, ignore_errors=True)  # the demo repository is shared by this module
    assert result.activity == "evaluate"
    assert statuses == {"ok"}


def test_a_matrix_of_agent_errors_gives_no_verdict_and_no_green_check(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    crashes = "sh -c 'echo the agent crashed >&2; exit 1'"  # /usr/bin/sh: in every sandbox's root
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo), agent="command", agent_command=crashes)
    result, _ = _run(env, fake)
    check = _latest_check(fake)
    assert check["conclusion"] == result.conclusion == "neutral"
    assert check["output"]["title"].startswith("no verdict: the evaluation is broken")
    assert "This evaluation is broken, so there is no verdict." in check["output"]["summary"]
    assert _outputs(tmp_path)["verdict"] == "none"


def test_an_agent_that_crashes_only_in_head_fails_the_check(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    """Head's docs make the agent exit 1 in every head run: a third of the runs fail, which
    once made the evaluation "broken" and the check neutral (a pass for a required check).
    Failures in one arm only are that arm's result: the check fails and says why."""
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    show = ["git", "-c", "safe.directory=*", "show"]
    base_docs = subprocess.run(
        [*show, f"{demo.base_sha}:AGENTS.md"], cwd=demo.path, capture_output=True, text=True, check=True
    )
    head_docs = subprocess.run(
        [*show, f"{demo.head_sha}:AGENTS.md"], cwd=demo.path, capture_output=True, text=True, check=True
    )
    mark = next(
        line for line in head_docs.stdout.splitlines() if line.strip() and line not in base_docs.stdout
    )
    script = f'grep -qF -- {shlex.quote(mark)} AGENTS.md && exit 1; echo \'{{"answer": "no idea"}}\''
    crashes_in_head = shlex.join(["sh", "-c", script])
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo), agent="command", agent_command=crashes_in_head)
    result, _ = _run(env, fake)
    check = _latest_check(fake)
    assert check["conclusion"] == result.conclusion == "failure", check["output"]["title"]
    assert check["output"]["title"].startswith("regressed")
    assert "head runs against 0 of" in check["output"]["summary"]


def test_no_instruction_file_changed_gives_a_neutral_check_and_no_comment(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(
        2, demo.base_sha, demo.head_sha, [("pricebook/format.py", "modified"), ("README.md", "modified")]
    )

    result, _ = _run(_env(tmp_path, demo, fake, _event(tmp_path, demo)), fake)

    assert result.activity == "no_change"
    check = _latest_check(fake)
    assert (check["conclusion"], check["output"]["title"]) == (
        "neutral",
        "no agent instruction files changed",
    )
    assert fake.comments == []
    assert not (tmp_path / "results").exists()  # no agent ran


# ---------------------------------------------------------- the matrix's plan
def test_the_plan_job_writes_the_job_matrix_puts_the_check_in_progress_and_runs_nothing(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo), plan="true", max_parallel="4")

    result, log = _run(env, fake)

    tasks = len(list((demo.path / ".docdelta" / "tasks").glob("*.yaml")))
    plan = json.loads(_outputs(tmp_path)["plan"])
    assert (result.activity, _outputs(tmp_path)["activity"]) == ("plan", "plan")
    assert plan["evaluate"] is True and plan["cells"] == tasks * 3 * 2  # 3 conditions, 2 repeats
    assert plan["matrix"]["include"] == [{"shard": f"{i}/4", "id": f"{i}-of-4"} for i in range(1, 5)]
    assert plan["max_parallel"] == 4
    (check,) = fake.check_runs  # in progress until the aggregate job completes it
    assert (check["status"], check["head_sha"]) == ("in_progress", demo.head_sha)
    assert fake.comments == [] and not (tmp_path / "results").exists() and "[1/" not in log


def test_the_plan_of_a_pr_without_instruction_changes_skips_the_matrix_with_a_neutral_check(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, [("README.md", "modified")])

    result, _ = _run(_env(tmp_path, demo, fake, _event(tmp_path, demo), plan="true"), fake)

    assert result.activity == "no_change"
    assert json.loads(_outputs(tmp_path)["plan"])["evaluate"] is False  # the run jobs' `if:`
    assert (_latest_check(fake)["status"], _latest_check(fake)["conclusion"]) == ("completed", "neutral")


def test_a_plan_of_adaptive_repeats_is_refused_naming_the_inputs(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))

    result, _ = _run(_env(tmp_path, demo, fake, _event(tmp_path, demo), plan="true", repeats="auto"), fake)

    assert result.activity == "error" and "input 'plan'" in _outputs(tmp_path)["error"]
    assert "repeats" in _outputs(tmp_path)["error"] and "plan" not in _outputs(tmp_path)


# ------------------------------------------------------------------- forks
def test_a_fork_without_approval_runs_no_agent_and_asks_for_action(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo, fork=True), event_name="pull_request_target")

    result, _ = _run(env, fake)

    assert result.activity == "awaiting_approval"
    check = _latest_check(fake)
    assert check["conclusion"] == "action_required"
    assert "docdelta:approved" in check["output"]["summary"]
    assert fake.comments == []
    assert not (tmp_path / "results").exists()
    assert fake.requests("GET", r"/contents/.*") == []  # not even the fork's files were read


def test_a_fork_pr_on_pull_request_with_its_read_only_token_ends_green_pointing_to_the_fork_safe_workflow(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    fake.deny_checks = True  # a fork's GITHUB_TOKEN may write neither checks ...
    fake.fail_next(
        "POST", r"/statuses/.*", count=9, status=403, message="Resource not accessible by integration"
    )
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo, fork=True))  # ... nor statuses
    out = io.StringIO()

    code = action_main.main(env, out)

    log = out.getvalue()
    assert code == 0 and "Traceback" not in log
    assert "::warning title=docdelta::" in log and "docdelta-fork-safe.yml" in log
    assert fake.check_runs == [] and fake.statuses == [] and fake.comments == []
    assert "fork-safe" in _outputs(tmp_path)["error"]


def test_an_approved_fork_is_evaluated_from_its_instruction_files_read_as_data(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fork_head = "f" * 40  # a commit that exists only on GitHub, never in the runner's checkout
    fake.add_commit(fork_head, _files_at(demo, demo.head_sha))
    fake.add_pull(2, demo.base_sha, fork_head, _changed(demo))
    fake.permissions["maintainer"] = "write"
    fake.apply_label(2, "docdelta:approved", "maintainer")
    event = _event(tmp_path, demo, head=fork_head, fork=True)
    env = _env(tmp_path, demo, fake, event, event_name="pull_request_target")

    result, _ = _run(env, fake)

    assert result.activity == "evaluate", result.title
    assert float(result.outputs["head-vs-base"]) > 0  # the fork's AGENTS.md reached the head arm
    body = fake.comments[0]["body"]
    assert "read as data" in body and "approved by @maintainer" in body
    assert _latest_check(fake)["head_sha"] == fork_head

    # a new push removes the approval: the next revision waits for a maintainer again
    env["GITHUB_EVENT_PATH"] = str(_event(tmp_path, demo, head=fork_head, fork=True, action="synchronize"))
    again, _ = _run(env, fake)
    assert again.activity == "awaiting_approval"
    assert fake.pulls[2].labels == []


def test_an_approval_label_from_a_reader_does_not_count(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    fake.permissions["drive-by"] = "read"
    fake.apply_label(2, "docdelta:approved", "drive-by")
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo, fork=True), event_name="pull_request_target")

    result, _ = _run(env, fake)

    assert result.activity == "awaiting_approval"
    assert _latest_check(fake)["conclusion"] == "action_required"


# -------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"INPUT_REPEATS": "many"}, "input 'repeats'"),
        ({"INPUT_FAIL-ON": "sometimes"}, "input 'fail-on'"),
        ({"INPUT_RESULTS-STORE": "s3:bucket"}, "input 'results-store'"),
    ],
)
def test_bad_inputs_fail_the_check_with_the_input_named_and_no_traceback_or_secret(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub, inputs: dict[str, str], named: str
) -> None:
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo)) | inputs
    out = io.StringIO()

    code = action_main.main(env, out)

    log = out.getvalue()
    assert code == 2
    assert named in log and "Traceback" not in log
    assert f"::add-mask::{API_KEY}" in log  # masked before anything else is printed
    assert log.count(API_KEY) == 1 and fake.token not in log.replace(f"::add-mask::{fake.token}", "")
    check = _latest_check(fake)
    assert check["conclusion"] == "failure" and named in check["output"]["title"]
    assert API_KEY not in json.dumps(fake.check_runs)
    outputs = _outputs(tmp_path)  # a later step (`if: failure()`) can tell what went wrong
    assert (outputs["activity"], outputs["conclusion"]) == ("error", "failure")
    assert named in outputs["error"]


def test_an_unknown_agent_and_a_gone_head_commit_are_explained_in_the_check(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo), agent="gpt-nonexistent")
    result, log = _run(env, fake)
    assert result.activity == "error"
    assert "unknown agent 'gpt-nonexistent'" in _latest_check(fake)["output"]["title"]
    assert "Traceback" not in log

    gone = "d" * 40  # force-pushed away: GitHub still sends the old head in a late event
    fake.add_pull(3, demo.base_sha, gone, _changed(demo))
    payload = json.loads(_event(tmp_path, demo, head=gone).read_text())
    payload["number"] = payload["pull_request"]["number"] = 3  # EDIT: PR 3
    (tmp_path / "gone.json").write_text(json.dumps(payload))
    env = _env(tmp_path, demo, fake, tmp_path / "gone.json")
    result, log = _run(env, fake)
    assert result.activity == "error"
    check = _latest_check(fake)
    assert check["head_sha"] == gone and check["conclusion"] == "failure"
    assert (
        "is not in the checkout" in check["output"]["summary"]
        and "force-pushed" in check["output"]["summary"]
    )


def test_where_the_local_sandbox_cannot_isolate_the_hint_names_action_inputs_not_cli_flags(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As inside a container without user namespaces: bubblewrap cannot build a sandbox
    # (this `bwrap` always fails), so the local sandbox refuses instead of downgrading.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))

    result, log = _run(_env(tmp_path, demo, fake, _event(tmp_path, demo)), fake)

    assert result.activity == "error"
    summary = _latest_check(fake)["output"]["summary"]
    assert "`sandbox: docker`" in summary
    assert "--sandbox" not in summary + log and "--allow-network" not in summary + log


def test_a_malformed_event_is_one_clear_log_line(tmp_path: Path, demo: DemoRepo, fake: FakeGitHub) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"action": "opened", "number": 2}')
    out = io.StringIO()

    code = action_main.main(_env(tmp_path, demo, fake, broken), out)

    assert code == 2
    assert "::error" in out.getvalue() and "field 'pull_request'" in out.getvalue()
    assert "Traceback" not in out.getvalue()
    assert fake.check_runs == []


def test_a_workflow_run_handoff_must_name_the_runs_own_head_commit(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    payload = json.loads(event_path("workflow_run.completed").read_text())
    run_head = payload["workflow_run"]["head_sha"]
    handoff = tmp_path / "pr.json"
    handoff.write_text(json.dumps({"number": 2, "base_sha": demo.base_sha, "head_sha": "e" * 40}))
    env = _env(tmp_path, demo, fake, event_path("workflow_run.completed"), event_name="workflow_run")
    env["INPUT_PR-HANDOFF"] = str(handoff)

    result, log = _run(env, fake)

    assert result.activity == "error"
    check = _latest_check(fake)
    assert check["head_sha"] == run_head and check["conclusion"] == "failure"
    assert "names head eeeeeeeeeeee" in check["output"]["title"]
    assert "Traceback" not in log


# ------------------------------------------------------- the comment as read
def _before_fold(body: str) -> list[str]:
    """The comment's lines before its first folded section (the marker line excluded)."""
    return body.split("<details>", 1)[0].strip().splitlines()[1:]


def test_the_demo_comment_leads_in_words_fits_one_screen_links_transcripts_and_the_check_annotates_lines(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.add_commit(demo.base_sha, _files_at(demo, demo.base_sha))  # the files endpoint's real patch
    fake.add_commit(demo.head_sha, _files_at(demo, demo.head_sha))
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))
    env = _env(tmp_path, demo, fake, _event(tmp_path, demo))

    result, log = _run(env, fake)

    assert result.activity == "evaluate"
    body = fake.comments[0]["body"]
    (tmp_path / "comment-demo.md").write_text(body)  # kept for review with the test's output
    top = _before_fold(body)
    assert len(top) <= render.SCREEN_LINES and "```" not in "\n".join(top)
    lead = [line for line in top if line.startswith("- ")]
    assert 2 <= len(lead) <= 4
    assert lead[0].startswith("- **") and " with [`AGENTS.md`](https://github.com/" in lead[0]
    assert "*run-tests* 0/2 → 2/2" in lead[0] and "unchanged" in lead[0]
    # how sure, in words; the statistics that back it are folded
    assert lead[1].startswith("- **How sure:** ")
    unfolded = re.sub(r"<details>.*?</details>", "", body, flags=re.DOTALL)  # what shows before a click
    assert not [w for w in ("Holm", "hypothes", "alpha", "interval", "significant") if w in unfolded]
    assert "**Gate** (`fail-on: regression`): " in unfolded and "bench/" not in body
    rows = [line for line in top if line.startswith("| ") and "(" in line]
    assert rows and all("noise band" not in r for r in rows if "+0." in r or "+1." in r)
    assert "tokens" in lead[2] and "not priced" in lead[2] and "%" in lead[2]
    # each task row links to its transcripts in the report and to the diff
    runs_url = f"https://github.com/{fake.repo}/actions/runs/77#artifacts"
    assert f'[transcripts]({runs_url} "report.html#task-run-tests")' in body  # no report-url: the artifact
    assert f"[diff](https://github.com/{fake.repo}/pull/2/files)" in body
    report = tmp_path / "results" / "report.html"
    assert report.is_file() and 'id="task-run-tests"' in report.read_text()
    # annotations: posted with the check, only on lines the PR's diff adds, notice unless significant
    check = _latest_check(fake)
    notes = fake.annotations(check["id"])
    (tmp_path / "annotations-demo.json").write_text(json.dumps(notes, indent=1))  # kept for review
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
    added = added_lines(port.pr_files(2, demo.base_sha, demo.head_sha))
    assert notes and {a["path"] for a in notes} == {"AGENTS.md"}
    assert all(a["start_line"] in added["AGENTS.md"] for a in notes)
    assert {a["annotation_level"] for a in notes} <= {"notice", "warning"}
    assert any(
        "`make check`: named or used in " in a["message"] and "head runs" in a["message"] for a in notes
    )
    assert any("candidate to cut" in a["message"] for a in notes)
    posted = [r for r in fake.requests(path=r"/check-runs(/\d+)?") if r.method in ("POST", "PATCH")]
    assert all(len((r.body or {}).get("output", {}).get("annotations", [])) <= 50 for r in posted)
    assert API_KEY not in log


BROKEN_TASK = f"""\
id: fix-add
kind: change
prompt: add() returns wrong results. Fix it.
gold:
  validation:
    hidden: [tests/test_ops.py]
    command: /usr/bin/python3 -W {API_KEY} -m pytest -q tests/test_ops.py
reviewed: true
"""
"""Debian's python3 has no pytest, so the selftest runs no test; `-W` with the key makes
python print the key in the output the scorecard quotes (the redaction under test)."""


def test_a_selftest_that_runs_no_test_posts_its_cause_in_the_comment_redacted_and_no_green_check(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    from gitrepo import GitRepo  # noqa: PLC0415 - the demo tests need no other repository
    from toolchain import sandbox_config  # noqa: PLC0415

    repo = GitRepo.init(tmp_path / "ws")
    fix = "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
    patch = "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n" + fix
    hidden = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    base = repo.commit(
        {
            ".docdelta.yml": sandbox_config(),
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "AGENTS.md": "# Agents\nBe careful.\n",
            ".docdelta/tasks/fix-add.yaml": BROKEN_TASK,
            ".docdelta/tasks/fix-add/hidden/tests/test_ops.py": hidden,
            ".docdelta/tasks/fix-add/reference.patch": patch,
        }
    )
    head = repo.commit({"AGENTS.md": "# Agents\nArithmetic lives in calc/ops.py.\n"})
    ws = DemoRepo(repo.path, base, head)
    fake.add_pull(2, base, head, [("AGENTS.md", "modified")])
    result, log = _run(_env(tmp_path, ws, fake, _event(tmp_path, ws)), fake)
    assert result.conclusion is not None and result.conclusion.value != "success"
    (comment,) = fake.comments
    body = comment["body"]
    section = body.split("<details><summary>Grading failures: no hidden test ran in ", 1)[1]
    assert "No module named pytest" in section.split("</details>", 1)[0]
    assert "This evaluation is broken, so there is no verdict." in body
    check = _latest_check(fake)
    assert check["output"]["title"].startswith("no verdict: the hidden tests could not run")
    assert "No module named pytest" in check["output"]["summary"]
    assert "Invalid -W option ignored" in body  # the line that held the key is shown ...
    for text in (body, check["output"]["summary"], check["output"]["title"], log):
        assert API_KEY not in text  # ... with the key redacted


# ------------------------------------------------ the Action's own words
@pytest.mark.parametrize(
    ("inputs", "title"),
    [
        ({"agent_command": "./my-agent"}, "the `agent-command` input is only for the command agent"),
        ({"agent": "command", "agent_command": "./agent 'unbalanced"}, "the agent command"),
    ],
)
def test_a_bad_agent_command_names_the_input_in_the_check_never_the_cli_flag(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub, inputs: dict[str, str], title: str
) -> None:
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))

    result, log = _run(_env(tmp_path, demo, fake, _event(tmp_path, demo), **inputs), fake)

    assert result.activity == "error"
    check = _latest_check(fake)
    posted = check["output"]["title"] + check["output"]["summary"] + log
    assert title in check["output"]["title"]
    assert "agent-command" in posted
    assert not any(flag in posted for flag in ("--agent-cmd", "--agent ", "--yes", "--repeats"))


def test_without_checks_write_the_advice_is_one_warning_annotation(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    fake.deny_checks = True
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))

    result, log = _run(_env(tmp_path, demo, fake, _event(tmp_path, demo), plan="true"), fake)

    assert result.activity == "plan" and fake.statuses  # posted as a commit status instead
    said = [line for line in log.splitlines() if "checks: write" in line]
    assert len(said) == 1 and said[0].startswith("::warning title=docdelta::")


CAPPED_MAX_RUNS = "50"
"""A `max-runs` input below the plan that `_inconclusive_at_2_repeats`'s Next advises (the
default cap, 1000, is above it since `repeats: auto`)."""


def _inconclusive_at_2_repeats(tasks: list[str]) -> Summary:
    """Every task passes every other run in both arms: inconclusive, and the spread asks for
    more repeats than `CAPPED_MAX_RUNS` allows."""
    runs: list[RunResult] = []
    for t in tasks:
        runs += [*arm(t, "base", [1.0, 0.0]), *arm(t, "head", [0.0, 1.0]), *arm(t, "none", [1.0, 0.0])]
    return summary_of(runs, tasks, repeats=2)


def test_following_an_inconclusive_comments_next_step_gives_a_plan_the_action_accepts(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    tasks = sorted(p.stem for p in (demo.path / ".docdelta" / "tasks").glob("*.yaml"))
    capped = ActionSettings.from_env(
        _env(tmp_path, demo, fake, _event(tmp_path, demo), max_runs=CAPPED_MAX_RUNS)
    )
    summary = _inconclusive_at_2_repeats(tasks)
    assert summary.verdict is not None and summary.verdict.kind == "inconclusive"
    body = render.render_comment_markdown(summary, max_runs=capped.max_runs)
    (step,) = [line for line in body.splitlines() if line.startswith("- **Next:**")]
    advised = dict(re.findall(r"`(repeats|max-runs): (\d+)`", step))
    assert int(advised["repeats"]) * len(tasks) * 3 > capped.max_runs  # the cap had to be raised
    fake.add_pull(2, demo.base_sha, demo.head_sha, _changed(demo))

    followed, _ = _run(_env(tmp_path, demo, fake, _event(tmp_path, demo), plan="true", **{
        k.replace("-", "_"): v for k, v in advised.items()}), fake)  # fmt: skip
    assert followed.activity == "plan"
    assert json.loads(_outputs(tmp_path)["plan"])["cells"] == int(advised["repeats"]) * len(tasks) * 3

    refused, _ = _run(
        _env(tmp_path, demo, fake, _event(tmp_path, demo), plan="true", repeats=advised["repeats"],
             max_runs=CAPPED_MAX_RUNS), fake
    )  # fmt: skip
    assert refused.activity == "error" and "max-runs" in _outputs(tmp_path)["error"]
