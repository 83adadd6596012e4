"""The Action keeps the history and the receipts in its results store, the data branch
included, shows a changed file's past in the PR comment, and checks receipts for merge
gating (`receipt: true`). Real PyGithub against the fake GitHub server, real git: the data
branch is pushed to a bare repository standing in for GitHub."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from actionrun import act, demo_workspace, pr_event
from fakegithub import FakeGitHub

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.git import overlay_commit, run_git

pytestmark = pytest.mark.timeout(400)  # two PR evaluations

STORE = "branch:docdelta-results"
BRANCH = "refs/heads/docdelta-results"


def _listed(origin: Path) -> list[str]:
    proc = run_git(origin, "ls-tree", "-r", "--name-only", BRANCH)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode().split()


def _check(fake: FakeGitHub, sha: str) -> dict[str, Any]:
    return [c for c in fake.check_runs if c["head_sha"] == sha][-1]


def test_the_data_branch_keeps_each_evaluation_the_comment_shows_the_past_and_receipts_gate_the_merge(
    tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    ws, demo = demo_workspace(tmp_path)
    origin = tmp_path / "origin.git"
    agents = (demo.path / "AGENTS.md").read_bytes()
    first_digest = hashlib.sha256(agents).hexdigest()
    edited = overlay_commit(ws, demo.head_sha, {"AGENTS.md": agents + b"\nBe kind.\n"}, "edit AGENTS.md")
    second_digest = hashlib.sha256(agents + b"\nBe kind.\n").hexdigest()
    fake.add_pull(1, demo.base_sha, demo.head_sha, [("AGENTS.md", "modified")])
    fake.add_pull(2, demo.base_sha, edited, [("AGENTS.md", "modified")])
    events = {n: pr_event(tmp_path, n, demo.base_sha, sha) for n, sha in ((1, demo.head_sha), (2, edited))}

    # PR 1: the first evaluation; its record and its head's receipt go to the data branch.
    first, log = act(tmp_path, ws, fake, "pull_request", events[1], STORE)
    assert first.activity == "evaluate" and first.conclusion == "success", log
    bodies = {c["issue"]: c["body"] for c in fake.comments}
    assert "History of" not in bodies[1]  # nothing earlier to show
    listed = _listed(origin)
    assert len([n for n in listed if n.startswith("history/records/")]) == 1
    assert [n.split("/")[2] for n in listed if n.startswith("history/receipts/")] == [first_digest]

    # PR 2 edits AGENTS.md again, and the data branch refuses every push (a token without
    # `contents: write`): the evaluation still reports, and says its record was not kept.
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refused by the test' >&2\nexit 1\n")
    hook.chmod(0o755)
    second, log = act(tmp_path, ws, fake, "pull_request", events[2], STORE)
    assert second.activity == "evaluate", log
    body = {c["issue"]: c["body"] for c in fake.comments}[2]
    assert "<details><summary>History of AGENTS.md (1 earlier evaluation(s))</summary>" in body
    assert f"| #1 · `{demo.head_sha[:12]}` | `{first_digest[:12]}` | improved | +" in body
    unkept = "has no earlier passing evaluation, and this one was not recorded."
    assert f"Head's content `{second_digest[:12]}` {unkept}" in body
    assert (
        "::warning::this evaluation was not recorded in the history: cannot push to the results branch" in log
    )
    assert "refused by the test" in log and fake.token not in body
    assert len([n for n in _listed(origin) if n.startswith("history/records/")]) == 1
    hook.unlink()

    # The merge check: no agent (no `agent` input), only the receipts on the data branch.
    ok, log = act(tmp_path, ws, fake, "pull_request", events[1], STORE, receipt="true", agent="")
    assert (ok.activity, ok.conclusion) == ("receipt", "success"), log
    assert "docdelta: receipt: pull request #1\n" in log and "docdelta: evaluate" not in log  # named as it is
    check = _check(fake, demo.head_sha)
    assert check["conclusion"] == "success"
    assert check["output"]["title"] == "every changed instruction file has a passing evaluation"
    assert f"- `AGENTS.md` (`{first_digest[:12]}`): passed in PR #1 on " in check["output"]["summary"]
    refused, log = act(tmp_path, ws, fake, "pull_request", events[2], STORE, receipt="true", agent="")
    assert (refused.activity, refused.conclusion) == ("receipt", "failure"), log
    check = _check(fake, edited)
    assert check["conclusion"] == "failure"
    assert check["output"]["title"] == "no passing evaluation of AGENTS.md as merged"
    assert (
        f"`AGENTS.md` (`{second_digest[:12]}`): **no receipt** (never evaluated)"
        in check["output"]["summary"]
    )
    # The receipt checks ran nothing: no results path beyond the two evaluations'.
    assert sorted(p.name for p in tmp_path.glob("results-*")) == ["results-0", "results-1"]

    # The CLI reads the same data branch.
    branch = ["--results-store", "branch:docdelta-results", "--repo", str(ws)]
    assert main(["history", *branch, "--file", "AGENTS.md"]) == ExitCode.OK
    shown = capsys.readouterr().out
    assert f"PR #1 head {demo.head_sha[:12]} AGENTS.md@{first_digest[:12]}" in shown
    assert main(["receipt", *branch, "--file", "AGENTS.md", "--ref", demo.head_sha]) == ExitCode.OK
    assert main(["receipt", *branch, "--file", "AGENTS.md", "--ref", edited]) == ExitCode.NO_RECEIPT
    assert main(["receipt", "--results-store", "s3:bucket", "--file", "AGENTS.md"]) == ExitCode.BAD_INPUT
    assert "--results-store: expected 'none', 'dir:PATH' or 'branch:NAME'" in capsys.readouterr().err


@pytest.mark.timeout(300)
def test_a_matrix_evaluation_is_recorded_once_by_its_aggregate_job(tmp_path: Path, fake: FakeGitHub) -> None:
    """The run jobs of a matrix (`shard`) record nothing; the aggregate job (`merge`), where
    the evaluation finishes, records it on the data branch."""
    ws, demo = demo_workspace(tmp_path)
    origin = tmp_path / "origin.git"
    fake.add_pull(3, demo.base_sha, demo.head_sha, [("AGENTS.md", "modified")])
    event = pr_event(tmp_path, 3, demo.base_sha, demo.head_sha)
    shards = tmp_path / "shards"
    for i in (1, 2):
        where = str(shards / str(i))
        done, log = act(tmp_path, ws, fake, "pull_request", event, STORE, shard=f"{i}/2", results_path=where)
        assert done.title == f"shard {i}/2 done", log
    assert run_git(origin, "rev-parse", "--verify", "--quiet", BRANCH).returncode != 0  # nothing pushed

    merged, log = act(tmp_path, ws, fake, "pull_request", event, STORE, merge=str(shards))
    assert merged.activity == "evaluate", log
    records = [n for n in _listed(origin) if n.startswith("history/records/")]
    assert len(records) == 1
    shown = run_git(origin, "show", f"{BRANCH}:{records[0]}").stdout.decode()
    assert '"pr":3' in shown and f'"head_sha":"{demo.head_sha}"' in shown


def test_a_receipt_check_that_cannot_read_the_store_fails_never_passes_as_neutral(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    """A required check's neutral lets the merge through: an unreadable data branch must fail."""
    ws, demo = demo_workspace(tmp_path)
    assert run_git(ws, "remote", "set-url", "origin", str(tmp_path / "gone.git")).returncode == 0
    fake.add_pull(5, demo.base_sha, demo.head_sha, [("AGENTS.md", "modified")])
    event = pr_event(tmp_path, 5, demo.base_sha, demo.head_sha)
    result, log = act(tmp_path, ws, fake, "pull_request", event, STORE, receipt="true", agent="")
    assert (result.activity, result.conclusion) == ("error", "failure"), log
    check = _check(fake, demo.head_sha)
    assert check["conclusion"] == "failure"
    assert check["output"]["title"].startswith(
        "docdelta could not run: input 'receipt': cannot fetch the results branch 'docdelta-results'"
    )
    assert "Traceback" not in log and fake.token not in log


def test_a_forks_head_is_read_through_the_api_as_data_for_its_receipt(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    """A fork's head commit is not in the base checkout: its AGENTS.md is read through the API
    (no approval needed, nothing runs), hashed, and has no receipt."""
    ws, demo = demo_workspace(tmp_path)
    fork_head = "f" * 40
    fake.add_commit(fork_head, {"AGENTS.md": b"# Agents\nFrom a fork.\n"})
    fake.add_pull(6, demo.base_sha, fork_head, [("AGENTS.md", "modified")])
    event = pr_event(tmp_path, 6, demo.base_sha, fork_head)
    payload = json.loads(event.read_text())
    payload["pull_request"]["head"]["repo"]["full_name"] = "forker/Hello-World"  # EDIT: from a fork
    event.write_text(json.dumps(payload))
    result, log = act(tmp_path, ws, fake, "pull_request_target", event, STORE, receipt="true", agent="")
    assert (result.activity, result.conclusion) == ("receipt", "failure"), log
    digest = hashlib.sha256(b"# Agents\nFrom a fork.\n").hexdigest()
    summary = _check(fake, fork_head)["output"]["summary"]
    assert f"`AGENTS.md` (`{digest[:12]}`): **no receipt** (never evaluated)" in summary
    assert fake.requests("GET", r"/contents/AGENTS\.md")
