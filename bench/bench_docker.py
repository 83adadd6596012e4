"""A Docker cell against the floor of a bare `docker run --rm --network none IMAGE true`, with
the cell's time split into its phases.

A cell is what the runner pays per run with a no-op command agent: `Runner.run_cell` (make
the sandbox: volume, container, the checkout's archive, start; the agent's exec and reading
its output back; teardown on the run's path; scoring) and saving the result. Floor and cell
run in alternating pairs (floor first, then cell first) so a machine whose speed drifts moves
both; the ratio is taken pair by pair and its median printed. The split is the medians of each
result's `timings` (`results.models.PhaseTimings`); "other" is the cell's wall time they leave out
(the runner's own work and saving the result). Removal a provider defers until after the
result is written is not part of the cell; it is joined after each cell, outside the timed
window, so it never slows the next floor, and its median is printed on its own line.

The demo checkout always; the minijinja checkout of the largest real bundle too when
DOCDELTA_REAL_REPOS names the bundles' directory. Goal: cell <= 1.5x the floor.

    DOCDELTA_REAL_REPOS=/work/shared/real-repos python bench/bench_docker.py [--pairs 7] [--image IMAGE]
    python bench/bench_docker.py --smoke      # one pair on the demo: shows it runs
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker

from docdelta.agents import get_agent
from docdelta.config import load_project_config
from docdelta.demo import build_demo_repo
from docdelta.experiment.plan import Experiment, ExperimentRequest, prepare
from docdelta.experiment.progress import LineProgress
from docdelta.experiment.runner import RunLimits, Runner
from docdelta.git import Repo
from docdelta.results.models import PhaseTimings, RunResult
from docdelta.results.store import ResultStore
from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider

SMOKE_ARGS = ["--smoke"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "real"
MINIJINJA = ("53e2787985f0", "eb17be5752d2")
"""A minijinja PR that changes AGENTS.md and CLAUDE.md (tests/real/test_real_tasks.py's)."""
NOOP_AGENT = 'printf \'{"answer": "make test", "commands": []}\''
PHASES = ("create_s", "copy_s", "start_s", "agent_s", "teardown_s", "grading_s")


def floor(image: str) -> float:
    started = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True)
    return time.perf_counter() - started


class Cells:
    """One repository's experiment, its cells run one at a time through the real runner."""

    def __init__(self, repo: Repo, base: str, head: str, tasks: Path, work: Path, provider: DockerProvider):
        self.store = ResultStore(work)
        agent = get_agent("command", cmd=NOOP_AGENT)
        request = ExperimentRequest(base=base, head=head, tasks_dir=tasks, repeats=50)
        config = load_project_config(repo, repo.resolve(base))
        exp = prepare(repo, request, config=config, store=self.store, agent=agent, sandbox="docker")
        assert exp is not None
        self.exp: Experiment = exp
        self.provider = provider
        self.runner = Runner(self.store, provider, SandboxSpec(), agent, RunLimits(), LineProgress())
        self.order = iter(exp.manifest.order)
        self.results: list[RunResult] = []
        self.walls: list[float] = []
        self.deferred: list[float] = []

    def cell(self) -> float:
        started = time.perf_counter()
        result = self.runner.run_cell(self.exp, next(self.order))
        self.store.save(self.exp.repo_name, result)
        wall = time.perf_counter() - started
        if result.outcome.status.value != "ok":
            sys.exit(f"the no-op agent's run ended {result.outcome.status}: {result.outcome.error}")
        drained = time.perf_counter()
        self.provider.removals.drain()
        self.deferred.append(time.perf_counter() - drained)
        self.results.append(result)
        self.walls.append(wall)
        return wall


def pairs(cells: Cells, image: str, n: int) -> list[float]:
    ratios: list[float] = []
    for i in range(n):
        first: Callable[[], float] = (lambda: floor(image)) if i % 2 == 0 else cells.cell
        second: Callable[[], float] = cells.cell if i % 2 == 0 else (lambda: floor(image))
        a, b = first(), second()
        f, c = (a, b) if i % 2 == 0 else (b, a)
        ratios.append(c / f)
    return ratios


def split(cells: Cells) -> str:
    timings = [r.timings or PhaseTimings() for r in cells.results]
    parts = []
    accounted = [0.0] * len(timings)
    for name in PHASES:
        values = [getattr(t, name) for t in timings]
        if any(v is None for v in values):
            continue
        for i, v in enumerate(values):
            accounted[i] += v
        parts.append(f"{name[:-2]} {statistics.median(values) * 1000:.0f}")
    other = [w - a for w, a in zip(cells.walls, accounted, strict=True)]
    parts.append(f"other {statistics.median(other) * 1000:.0f}")
    return " + ".join(parts) + " ms (medians)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--image", default="docdelta-base:latest")
    parser.add_argument("--smoke", action="store_true", help="one pair on the demo: shows it runs")
    args = parser.parse_args()
    n = 1 if args.smoke else args.pairs
    bundles = None if args.smoke else os.environ.get("DOCDELTA_REAL_REPOS")
    provider = DockerProvider(docker.from_env(), args.image)
    load = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(prefix="docdelta-bench-docker-") as tmp:
            root = Path(tmp)
            demo = build_demo_repo(root / "pricebook")
            repos = {
                "demo": Cells(
                    Repo(demo.path), demo.base_sha, demo.head_sha, demo.path / ".docdelta" / "tasks",
                    root / "work-demo", provider,
                )
            }  # fmt: skip
            if bundles:
                clone = root / "minijinja"
                subprocess.run(["git", "clone", "-q", f"{bundles}/minijinja.bundle", str(clone)], check=True)
                tasks = root / "minijinja-tasks"
                shutil.copytree(EXAMPLES / "minijinja" / "tasks", tasks)
                repos["minijinja"] = Cells(Repo(clone), *MINIJINJA, tasks, root / "work-real", provider)
            floor(args.image)
            for cells in repos.values():
                cells.cell()  # warm: the checkout's archive, the image's pages
                for kept in (cells.results, cells.walls, cells.deferred):
                    kept.clear()
            ratios = {name: pairs(cells, args.image, n) for name, cells in repos.items()}
            floors = [floor(args.image) for _ in range(n)]
    finally:
        provider.close()
    print(f"load average at start: {load:.1f} on {os.cpu_count()} CPUs")
    print(f"floor  docker run --rm --network none true: median {statistics.median(floors) * 1000:.0f} ms")
    for name, cells in repos.items():
        r = ratios[name]
        print(
            f"cell   {name}: median {statistics.median(cells.walls) * 1000:.0f} ms = {split(cells)}; "
            f"deferred removal {statistics.median(cells.deferred) * 1000:.0f} ms off the run's path"
        )
        print(
            f"ratio  {name} cell / floor: {statistics.median(r):.2f}x "
            f"(pairs: {', '.join(f'{x:.2f}' for x in r)})   (goal <= 1.5x)"
        )


if __name__ == "__main__":
    main()
