"""Results across PRs: a push refreshes the base arm, later PRs on that base reuse it.

Driven through the Action (`docdelta.action.main.action`) with real git: the data-branch backend
pushes to a bare repository standing in for GitHub, the directory backend writes files.
"""

from __future__ import annotations

import base64
import http.server
import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from actionrun import act as _act
from actionrun import demo_workspace
from actionrun import pr_event as _pr_event
from fakegithub import FakeGitHub, event_path

import docdelta
from docdelta.config import load_project_config
from docdelta.demo import DemoRepo
from docdelta.errors import InfraError
from docdelta.experiment.plan import Experiment, ExperimentRequest, prepare
from docdelta.experiment.reuse import CachedArm, arm_key, pool, save
from docdelta.git import Repo, overlay_commit, run_git
from docdelta.results.backends import POOL_PREFIX, BranchStore, DirectoryStore, token_auth
from docdelta.results.models import Manifest, RunResult
from docdelta.results.store import ResultStore
from docdelta.wiring import AgentChoice, build_agent

pytestmark = pytest.mark.timeout(120)


def _git(cwd: Path, *args: str) -> str:
    proc = run_git(cwd, *args)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode().strip()


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, DemoRepo]:
    return demo_workspace(tmp_path)


def _push_event(tmp: Path, sha: str) -> Path:
    payload = json.loads(event_path("push").read_text())
    payload.update(ref="refs/heads/master", after=sha, deleted=False)  # EDIT: a push to the default branch
    path = tmp / "push.json"
    path.write_text(json.dumps(payload))
    return path


def _docs_only_head(ws: Path, base: str, text: bytes) -> str:
    """A PR that only adds CLAUDE.md (AGENTS.md stays: the demo's gold answers cite its lines)."""
    return overlay_commit(ws, base, {"CLAUDE.md": text}, "docs-only change")


def test_a_push_stores_the_base_arm_on_a_data_branch_and_a_pr_on_that_base_reuses_it(
    tmp_path: Path, workspace: tuple[Path, DemoRepo], fake: FakeGitHub
) -> None:
    ws, demo = workspace
    refreshed, log = _act(
        tmp_path,
        ws,
        fake,
        "push",
        _push_event(tmp_path, demo.head_sha),
        "branch:docdelta-results",
        demo.head_sha,
    )
    assert refreshed.activity == "refresh", log
    origin = tmp_path / "origin.git"
    everything = _git(origin, "ls-tree", "-r", "--name-only", "refs/heads/docdelta-results").split()
    listing = [name for name in everything if name.startswith("arms/")]
    assert len(listing) == 1 and len(everything) == 2  # the arm, and its pool member entry
    pushed = _git(origin, "rev-list", "--count", "refs/heads/docdelta-results")
    entry = CachedArm.model_validate_json(_git(origin, "show", f"refs/heads/docdelta-results:{listing[0]}"))
    assert {r.cell.condition for r in entry.results} == {"base"}
    assert entry.source_commit == demo.head_sha

    head = _docs_only_head(ws, demo.head_sha, b"# Agents\nRun `make test` before you push.\n")
    fake.add_pull(4, demo.head_sha, head, [("CLAUDE.md", "added")])
    result, log = _act(
        tmp_path,
        ws,
        fake,
        "pull_request",
        _pr_event(tmp_path, 4, demo.head_sha, head),
        "branch:docdelta-results",
    )

    assert result.activity == "evaluate", log
    body = fake.comments[0]["body"]
    assert "**From cache:** the `base` arm" in body and listing[0][5:17] in body
    # a PR run never writes the cache on the shared branch; it only adds its history record
    after = _git(origin, "ls-tree", "-r", "--name-only", "refs/heads/docdelta-results").split()
    assert [n for n in after if not n.startswith("history/")] == everything
    assert len([n for n in after if n.startswith("history/records/")]) == 1
    assert _git(origin, "rev-list", "--count", "refs/heads/docdelta-results") == str(int(pushed) + 1)


def test_a_second_pr_with_the_same_base_reuses_the_first_prs_base_arm_from_a_directory(
    tmp_path: Path, workspace: tuple[Path, DemoRepo], fake: FakeGitHub
) -> None:
    ws, demo = workspace
    store = f"dir:{tmp_path / 'cache'}"
    first = _docs_only_head(ws, demo.head_sha, b"# Agents\nUse `uv run pytest`.\n")
    second = _docs_only_head(ws, demo.head_sha, b"# Agents\nUse `tox -e py311`.\n")
    fake.add_pull(5, demo.head_sha, first, [("CLAUDE.md", "added")])
    fake.add_pull(6, demo.head_sha, second, [("CLAUDE.md", "added")])

    one, _ = _act(tmp_path, ws, fake, "pull_request", _pr_event(tmp_path, 5, demo.head_sha, first), store)
    two, _ = _act(tmp_path, ws, fake, "pull_request", _pr_event(tmp_path, 6, demo.head_sha, second), store)

    assert one.activity == two.activity == "evaluate"
    # The forecast leads each job summary, written before the matrix started.
    first_summary, second_summary = ((tmp_path / f"summary-{n}.md").read_text() for n in (0, 1))
    assert first_summary.startswith("### docdelta forecast\n\n- 24 runs planned, 0 already done, 24 to run\n")
    assert "- no estimate: no earlier results of fake in this workdir or the results store" in first_summary
    assert second_summary.startswith(
        "### docdelta forecast\n\n- 24 runs planned, 8 already done, 16 to run\n"
    )
    assert "- estimated wall time: " in second_summary and "over 8 earlier runs of fake" in second_summary
    assert "- no cost estimate: no earlier run of fake reported a cost" in second_summary
    bodies = {c["issue"]: c["body"] for c in fake.comments}
    assert "From cache" not in bodies[5]
    assert "**From cache:** the `base` arm (8 runs)" in bodies[6]
    assert len(list((tmp_path / "cache" / "arms").glob("*.json"))) == 1


def test_an_arm_run_under_other_limits_is_not_reused(
    tmp_path: Path, workspace: tuple[Path, DemoRepo], fake: FakeGitHub
) -> None:
    """The cache key holds the run bounds: a base arm whose runs had 600 s is no stand-in for
    one whose runs get 120 s, nor one with a per-run dollar budget."""
    ws, demo = workspace
    store = f"dir:{tmp_path / 'cache'}"
    heads = [_docs_only_head(ws, demo.head_sha, f"# Agents\nUse `tox -e {n}`.\n".encode()) for n in range(3)]
    for number, head in enumerate(heads, 10):
        fake.add_pull(number, demo.head_sha, head, [("CLAUDE.md", "added")])
    limits: list[dict[str, str]] = [{}, {"timeout": "120"}, {"reserve_usd": "0.5"}]
    for number, (head, extra) in enumerate(zip(heads, limits, strict=True), 10):
        event = _pr_event(tmp_path, number, demo.head_sha, head)
        result, _ = _act(tmp_path, ws, fake, "pull_request", event, store, **extra)
        assert result.activity == "evaluate"

    assert all("From cache" not in c["body"] for c in fake.comments)
    assert all("base arm pooled" not in c["body"] for c in fake.comments)  # other bounds: not one arm
    entries = [
        CachedArm.model_validate_json(p.read_text()) for p in (tmp_path / "cache" / "arms").glob("*.json")
    ]
    assert sorted(e.key.bounds.timeout_s for e in entries if e.key.bounds) == [120.0, 600.0, 600.0]
    assert {e.key.docdelta_version for e in entries} == {docdelta.__version__}


@pytest.mark.timeout(600)  # three PR runs
def test_earlier_base_batches_are_pooled_into_the_control_until_one_drifted(
    tmp_path: Path, workspace: tuple[Path, DemoRepo], fake: FakeGitHub
) -> None:
    """Three PRs on one base with other seeds (so no exact reuse): the second pools the first's
    base runs; after the first batch is made to disagree with the second, the third pools the
    second's and shows the drift that stopped it there."""
    ws, demo = workspace
    cache = tmp_path / "cache"
    store = f"dir:{cache}"
    heads = [_docs_only_head(ws, demo.head_sha, f"# Agents\nUse `nox -s {n}`.\n".encode()) for n in range(3)]
    for number, head in enumerate(heads, 20):
        fake.add_pull(number, demo.head_sha, head, [("CLAUDE.md", "added")])

    def pr(number: int, seed: str) -> str:
        event = _pr_event(tmp_path, number, demo.head_sha, heads[number - 20])
        result, log = _act(tmp_path, ws, fake, "pull_request", event, store, seed=seed)
        assert result.activity == "evaluate", log
        return str({c["issue"]: c["body"] for c in fake.comments}[number])

    assert "base arm pooled" not in pr(20, "1")  # nothing earlier
    (first,) = (cache / "arms").glob("*.json")
    second_body = pr(21, "2")
    assert "From cache" not in second_body  # another seed: not the same cells
    assert "- base arm pooled: 8 earlier runs from 1 batch since " in second_body
    assert re.search(r"UTC \(commits [0-9a-f]{12}\) join this PR's base runs", second_body)
    assert "- drift:" not in second_body

    (second,) = set((cache / "arms").glob("*.json")) - {first}
    newer = CachedArm.model_validate_json(second.read_text())
    older = CachedArm.model_validate_json(first.read_text())
    flipped = {r.cell.key: r for r in newer.results}
    drifted = [
        r.model_copy(update={"score": r.score.model_copy(update={"value": 1 - flipped_score(flipped, r)})})
        for r in older.results
        if r.score is not None
    ]
    first.write_text(older.model_copy(update={"results": drifted}).model_dump_json())

    third_body = pr(22, "3")
    assert "- base arm pooled: 8 earlier runs from 1 batch" in third_body
    assert "- drift: the base batch of " in third_body and "pooling stopped there" in third_body
    (folder,) = (cache / "pools").glob("pool-*")
    assert len(list(folder.glob("*.json"))) == 3  # one member entry per batch, no shared index


def flipped_score(newer: dict[str, RunResult], run: RunResult) -> float:
    """The newer batch's score of the same cell: the older one is set to its opposite."""
    match = newer[run.cell.key].score
    return float(match.value if match is not None else 0.0)


def test_an_entry_saved_under_another_key_is_ignored(
    tmp_path: Path, workspace: tuple[Path, DemoRepo], fake: FakeGitHub
) -> None:
    ws, demo = workspace
    cache = tmp_path / "cache"
    store = f"dir:{cache}"
    head = _docs_only_head(ws, demo.head_sha, b"# Agents\nUse `nox`.\n")
    fake.add_pull(7, demo.head_sha, head, [("CLAUDE.md", "added")])
    _act(tmp_path, ws, fake, "pull_request", _pr_event(tmp_path, 7, demo.head_sha, head), store)
    (entry_path,) = (cache / "arms").glob("*.json")
    data: dict[str, Any] = json.loads(entry_path.read_text())
    data["key"]["repeats"] = 9  # tampered: the entry claims another experiment
    entry_path.write_text(json.dumps(data))
    entry_path.with_name("garbage.json").write_text("{not json")

    result, _ = _act(tmp_path, ws, fake, "pull_request", _pr_event(tmp_path, 7, demo.head_sha, head), store)

    assert result.activity == "evaluate"
    assert "From cache" not in fake.comments[0]["body"]


def test_backends_miss_cleanly_and_branch_writes_never_lose_a_concurrent_entry(
    tmp_path: Path, workspace: tuple[Path, DemoRepo]
) -> None:
    ws, _ = workspace
    assert DirectoryStore(tmp_path / "none").get("abc") is None
    assert BranchStore(ws, "docdelta-results").get("abc") is None  # the branch does not exist yet

    other = tmp_path / "other"
    _git(tmp_path, "clone", "--quiet", str(tmp_path / "origin.git"), str(other))
    mine, theirs = BranchStore(ws, "docdelta-results"), BranchStore(other, "docdelta-results")
    mine.put("a" * 64, b"mine")
    theirs.put("b" * 64, b"theirs")  # pushed on top of mine after a fetch
    mine.put("c" * 64, b"mine again")  # mine is now behind: fetch, append, push

    fresh = BranchStore(ws, "docdelta-results")
    assert (fresh.get("a" * 64), fresh.get("b" * 64), fresh.get("c" * 64)) == (
        b"mine",
        b"theirs",
        b"mine again",
    )
    assert subprocess.run(
        ["git", "-C", str(tmp_path / "origin.git"), "rev-list", "--count", "refs/heads/docdelta-results"],
        capture_output=True, text=True, check=True,
    ).stdout.strip() == "3"  # fmt: skip


def test_a_checkout_without_persisted_credentials_reads_the_results_branch_with_the_token(
    tmp_path: Path, workspace: tuple[Path, DemoRepo]
) -> None:
    """The fork-safe workflow's `persist-credentials: false` on a private repository: git
    must send the token itself (here to a loopback server that records what it got)."""
    ws, _ = workspace
    seen: list[str | None] = []

    class Private(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(404)  # the branch store then reports the fetch error
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Private)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    _git(ws, "remote", "add", "private", f"{url}/octo/private.git")
    try:
        auth = token_auth(ws, url, "ghs_private_token")
        with pytest.raises(InfraError) as err:
            BranchStore(ws, "docdelta-results", remote="private", auth=auth).get("a" * 64)
    finally:
        server.shutdown()
        server.server_close()

    expected = "basic " + base64.b64encode(b"x-access-token:ghs_private_token").decode()
    assert seen and all(h == expected for h in seen)
    assert "ghs_private_token" not in str(err.value)
    _git(ws, "config", f"http.{url}/.extraheader", "AUTHORIZATION: basic persisted")
    assert token_auth(ws, url, "ghs_private_token") == {}  # actions/checkout's header is enough


class _HeldStore(BranchStore):
    """A real data-branch store whose pool writes wait at a barrier shared with another saver:
    both have read what they read before either writes its pool entry (the race, made sure)."""

    def __init__(self, root: Path, barrier: threading.Barrier) -> None:
        super().__init__(root, "docdelta-results")
        self.barrier = barrier

    def put(self, digest: str, data: bytes) -> None:
        if digest.startswith(POOL_PREFIX):
            self.barrier.wait(timeout=60)
        super().put(digest, data)


def test_two_saves_racing_on_the_data_branch_both_join_the_pool(
    tmp_path: Path, workspace: tuple[Path, DemoRepo], fake: FakeGitHub
) -> None:
    """Two trusted runs save base batches of one arm (other seeds) to the data branch at once:
    each must be in the pool afterwards, the later PR pools both."""
    ws, demo = workspace
    head = _docs_only_head(ws, demo.head_sha, b"# Agents\nUse `nox -s race`.\n")
    fake.add_pull(30, demo.head_sha, head, [("CLAUDE.md", "added")])
    event = _pr_event(tmp_path, 30, demo.head_sha, head)
    result, log = _act(tmp_path, ws, fake, "pull_request", event, f"dir:{tmp_path / 'cache'}")
    assert result.activity == "evaluate", log
    (arm,) = (tmp_path / "cache" / "arms").glob("*.json")
    results = CachedArm.model_validate_json(arm.read_text()).results

    repo = Repo(ws)
    config = load_project_config(repo, demo.head_sha)
    agent = build_agent(AgentChoice("fake"))

    def experiment(seed: int) -> Experiment:
        request = ExperimentRequest(
            base=demo.head_sha, head=head, tasks_dir=ws / ".docdelta" / "tasks",
            conditions=("base", "head"), repeats=2, seed=seed,
        )  # fmt: skip
        exp = prepare(repo, request, config=config, store=ResultStore(tmp_path / f"work-{seed}"),
                      agent=agent, sandbox="local")  # fmt: skip
        assert exp is not None
        return exp

    other = tmp_path / "other"
    _git(tmp_path, "clone", "--quiet", str(tmp_path / "origin.git"), str(other))
    barrier = threading.Barrier(2)
    stores = [_HeldStore(ws, barrier), _HeldStore(other, barrier)]
    exps = [experiment(41), experiment(42)]
    saved: list[bool] = []
    threads = [
        threading.Thread(target=lambda s=s, e=e: saved.append(save(s, e, results, "base")))
        for s, e in zip(stores, exps, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert saved == [True, True]
    pooled = pool(BranchStore(ws, "docdelta-results"), experiment(43), "base")
    assert pooled is not None
    assert {b.digest for b in pooled.batches} == {arm_key(e, "base").digest for e in exps}
    assert len(pooled.results) == 2 * len(results)


def _docs_only_prs(
    tmp: Path, ws: Path, demo: DemoRepo, fake: FakeGitHub, first: int, word: str
) -> list[Path]:
    """The events of two PRs on the demo's head, numbered from `first`, each adding its own
    CLAUDE.md (`nox -s <word><n>`): two heads whose base arm is the same."""
    events = []
    for n in range(2):
        head = _docs_only_head(ws, demo.head_sha, f"# Agents\nUse `nox -s {word}{n}`.\n".encode())
        fake.add_pull(first + n, demo.head_sha, head, [("CLAUDE.md", "added")])
        events.append(_pr_event(tmp, first + n, demo.head_sha, head))
    return events


@pytest.mark.timeout(400)  # two PR runs
def test_a_pr_runs_no_base_arm_when_the_pool_holds_enough_base_runs(
    tmp_path: Path, workspace: tuple[Path, DemoRepo], fake: FakeGitHub
) -> None:
    """The first PR on a base saves its base arm; the second (another seed, so no exact reuse)
    finds 2 pooled base runs of every task, `skip-base-from: 2`: it plans and runs head and
    none only, decides head against the pooled runs, and the comment says so."""
    ws, demo = workspace
    cache = tmp_path / "cache"
    events = _docs_only_prs(tmp_path, ws, demo, fake, 40, "skip")
    bodies = []
    for number, seed in ((40, "1"), (41, "2")):
        event = events[number - 40]
        result, log = _act(
            tmp_path, ws, fake, "pull_request", event, f"dir:{cache}", seed=seed, skip_base_from="2"
        )
        assert result.activity == "evaluate", log
        bodies.append({c["issue"]: c["body"] for c in fake.comments}[number])

    assert "base arm pooled" not in bodies[0]
    assert "- base arm pooled: 8 earlier runs from 1 batch since " in bodies[1]
    assert "are the whole control: this PR ran no base arm of its own" in bodies[1]
    # the pooled runs are the base arm the comment shows (4 tasks x 2 runs), one line each
    assert "no task has graded runs in both head and base" not in bodies[1]
    assert "| **all tasks** | 7/8 → 8/8 | **+0.04** |" in bodies[1]  # marks: folded
    assert "the pool held enough runs of every task\n- A/A noise" in bodies[1]
    second = (tmp_path / "summary-1.md").read_text()
    assert second.startswith("### docdelta forecast\n\n- 16 runs planned, 0 already done, 16 to run\n")
    (path,) = (tmp_path / "results-1").rglob("manifest.json")
    workdir = path.parent
    manifest = Manifest.model_validate_json(path.read_text())
    assert manifest.pooled_only == ["base"] and {c.condition for c in manifest.order} == {"head", "none"}
    assert not list(workdir.glob("runs/*/base/*/r*/result.json"))
    assert len(list((cache / "arms").glob("*.json"))) == 1  # no empty base arm saved


@pytest.mark.timeout(300)
def test_the_shards_of_a_pr_run_the_plan_its_job_matrix_counted_even_when_the_pool_could_stand_in(
    tmp_path: Path, workspace: tuple[Path, DemoRepo], fake: FakeGitHub
) -> None:
    """The plan job sizes the job matrix without the pool (its key needs the sealed checkouts
    and the agent), so it counts the base arm; with `skip-base-from` met, the shards must still
    run exactly that plan, not the head and none arms alone."""
    ws, demo = workspace
    cache = tmp_path / "cache"
    first, event = _docs_only_prs(tmp_path, ws, demo, fake, 50, "shard")
    result, log = _act(tmp_path, ws, fake, "pull_request", first, f"dir:{cache}", seed="1")
    assert result.activity == "evaluate", log  # its base arm pools 2 runs of every task

    pr = {"seed": "2", "skip_base_from": "2"}
    planned, log = _act(
        tmp_path, ws, fake, "pull_request", event, f"dir:{cache}", plan="true", max_parallel="2", **pr
    )
    plan = json.loads(planned.outputs["plan"])
    ran = []
    for job in plan["matrix"]["include"]:
        where = tmp_path / "shards" / job["id"]
        done, log = _act(
            tmp_path, ws, fake, "pull_request", event, f"dir:{cache}", shard=job["shard"],
            results_path=str(where), **pr,
        )  # fmt: skip
        assert done.title == f"shard {job['shard']} done", log
        ran += [p.parent for p in where.rglob("result.json")]
    assert len(ran) == len(set(ran)) == plan["cells"] == 4 * 3 * 2  # tasks x base,head,none x repeats
