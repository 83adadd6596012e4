"""`--jobs N` through the real CLI: the same cells, seeds, results, manifest and progress
lines as `--jobs 1`; only the wall time differs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path

import pytest
from clirun import BlockingAgent, agent_processes, run_args, saved_results
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.agents.models import RunStatus
from docdelta.cli.main import main
from docdelta.config import ProjectConfig
from docdelta.demo import DemoRepo, build_demo_repo
from docdelta.errors import ExitCode
from docdelta.experiment.plan import plan_order
from docdelta.git import Repo
from docdelta.results.models import Manifest, RunResult
from docdelta.sandbox.base import SandboxSpec
from docdelta.wiring import SandboxChoice, build_provider


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    return build_demo_repo(tmp_path_factory.mktemp("demo") / "pricebook")


def _run(demo: DemoRepo, workdir: Path, jobs: int) -> list[str]:
    return [
        "run", "--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha,
        "--tasks", str(demo.path / ".docdelta" / "tasks"), "--workdir", str(workdir),
        "--agent", "fake", "--allow-network", "--repeats", "2", "--jobs", str(jobs),
    ]  # fmt: skip


def _results(workdir: Path) -> dict[str, tuple[object, ...]]:
    found = (RunResult.model_validate_json(p.read_bytes()) for p in workdir.glob("runs/*/*/*/r*/result.json"))
    return {r.cell.key: (r.status, r.seed, r.score, r.outcome.answer, r.attempt) for r in found}


def test_jobs_4_gives_the_results_manifest_and_progress_of_jobs_1(
    demo: DemoRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = {}
    for jobs in (1, 4):
        workdir = tmp_path / f"j{jobs}"
        capsys.readouterr()
        assert main(_run(demo, workdir, jobs)) == ExitCode.OK
        out, err = capsys.readouterr()
        progress = [line for line in err.splitlines() if line.startswith("[")]
        manifest = Manifest.model_validate_json((workdir / "manifest.json").read_bytes())
        seen[jobs] = (_results(workdir), manifest.identity(), progress, out)
    assert len(seen[1][0]) == 4 * 3 * 2
    assert seen[4][0] == seen[1][0]
    assert seen[4][1] == seen[1][1], "--jobs is not part of the experiment: shards may differ in it"
    assert seen[4][2] == seen[1][2], "progress lines come in plan order at every --jobs"


PLAN = plan_order(["hang", "quick"], ["base", "head", "none"], 2, 4)
"""The test matrix's cells in the order they start (tasks sorted, 3 conditions, 2 repeats, seed 4)."""


def _blocking_matrix(tmp_path: Path, agent: BlockingAgent) -> tuple[list[str], int]:
    """A project whose `hang` task blocks its agent until the sandbox kills it, the command
    running its matrix at --jobs 4, and how many cells finish before all four workers are
    blocked: the quick cells ahead of the fourth hang cell in the plan (cells start in plan
    order, and the fourth hang cell starts only once everything ahead of it but the three
    hang cells has finished)."""
    repo = GitRepo.init(tmp_path / "proj")
    tasks = {
        f".docdelta/tasks/{tid}.yaml": f'id: {tid}\nprompt: "{prompt}"\ngold:\n  commands: ["make check"]\n'
        "reviewed: true\n"
        for tid, prompt in (("quick", "How do I run the tests?"), ("hang", "Hang forever please."))
    }
    repo.commit({"AGENTS.md": "# Agents\n", ".docdelta.yml": sandbox_config(tmp_path / "sync"), **tasks})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    args = run_args(repo, tmp_path / "work", agent.cmd(), "--repeats", "2", "--seed", "4", "--jobs", "4")
    fourth_hang = [i for i, cell in enumerate(PLAN) if cell.task == "hang"][3]
    return [sys.executable, "-m", "docdelta", *args], fourth_hang - 3


def _interrupt_when_four_run(tmp_path: Path, cmd: list[str], agent: BlockingAgent) -> tuple[int, list[str]]:
    """Run `cmd`, SIGINT it once four agents are running (told by the agents themselves),
    and return its exit code and progress lines. No temporary file may outlive it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "CI": "1", "TMPDIR": str(tmp)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    agent.wait_running(4)
    proc.send_signal(signal.SIGINT)
    # A guard against a hang, not a synchronisation: the runs' --timeout is an hour.
    _, err = proc.communicate(timeout=300)
    assert list(tmp.iterdir()) == [], "every temporary root and slot is removed on the way out"
    assert agent_processes(agent.started) == [], "every in-flight agent was killed"
    return proc.returncode, [line for line in err.splitlines() if line.startswith("[")]


def test_sigint_at_jobs_4_kills_the_blocked_agents_keeps_results_and_resumes(tmp_path: Path) -> None:
    agent = BlockingAgent(tmp_path / "sync")
    try:
        cmd, finished = _blocking_matrix(tmp_path, agent)
        cmd += ["--timeout", "3600"]  # were the agents left to their timeout, the guard would fail
        code, _ = _interrupt_when_four_run(tmp_path, cmd, agent)
        assert code == ExitCode.INTERRUPTED
        saved = saved_results(tmp_path / "work")
        assert len(saved) == finished
        assert {(r.cell.task, r.status) for r in saved} == {("quick", RunStatus.ok)}
        assert not list((tmp_path / "work").glob("runs/*/hang/*/*/*")), "a killed run leaves nothing"
        code, progress = _interrupt_when_four_run(tmp_path, cmd, agent)
        assert code == ExitCode.INTERRUPTED
        # Progress comes in plan order, so it shows the reused cells up to the first hang cell.
        first_hang = next(i for i, cell in enumerate(PLAN) if cell.task == "hang")
        assert [line.rsplit(": ", 1)[-1] for line in progress] == ["reused"] * first_hang
        assert saved_results(tmp_path / "work") == saved, "a complete result is never rewritten"
    finally:
        agent.close()


def test_parallel_slots_share_one_private_root_made_and_removed_once(tmp_path: Path) -> None:
    """Each worker's local provider used to make its own private root, with its own copy of
    /etc, and remove it at the end: seconds of clean-up after the last cell, per worker."""
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "hi\n"})
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "README.md").write_text("hi\n")
    provider = build_provider(
        SandboxChoice(), repo=Repo(repo.path), private={}, config=ProjectConfig(), agent=None, jobs=3
    ).provider
    slots: list[Path] = []
    barrier = threading.Barrier(3)

    def run() -> None:
        with provider.create(checkout, SandboxSpec()) as sandbox:
            barrier.wait(timeout=60)  # three live at once, one per slot
            assert sandbox.exec(["cat", "README.md"]).stdout == b"hi\n"
            slots.append(Path(getattr(sandbox, "slot_dir")))  # noqa: B009

    with futures.ThreadPoolExecutor(max_workers=3) as workers:  # re-raises what a worker raised
        list(workers.map(lambda _: run(), range(3)))
    try:
        # slot-0 is the calling thread's, made with the provider (it runs the preflight).
        assert sorted(p.name for p in slots) == ["slot-1", "slot-2", "slot-3"], "a slot per worker"
        assert len({p.parent for p in slots}) == 1, slots
        root = slots[0].parent
        assert (root / "etc").is_dir(), "one /etc for every slot"
    finally:
        provider.close()
    assert not root.exists(), "the first slot's provider removes the shared root, after the others"
