"""Speed on a real tree and a rerun of an unchanged PR, in one run.

1. Per-cell harness overhead with the fake agent (sandbox + agent + score + store, the
   agent itself answers at once) on the largest bundled real repository (minijinja) vs the
   demo repository. Goal: <= 1.5x. Before copy-on-write views the real tree's cell paid
   for a full copy of its checkout every run.
2. A fully reused rerun of the real repository's PR through the CLI, in a fresh process:
   every result is already in the workdir, nothing is sealed again. Goal: < 3 s.
3. A rerun of an unchanged PR end to end (demo PR, all results reused): 0 agent runs,
   goal < 5 s.

Wall times on a loaded machine mostly measure the load, so each line also gives the CPU
seconds the process used and the load average when it ran. As bench/bench_detect.py does,
docdelta's modules are compiled first, as `pip install` compiles them: a checkout under
PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every edited module on every start.

    DOCDELTA_REAL_REPOS=/work/shared/real-repos python bench/bench_real.py [--cells 12]
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docdelta as docdelta_package
from docdelta.agents import get_agent
from docdelta.config import load_project_config
from docdelta.demo import build_demo_repo
from docdelta.experiment.plan import ExperimentRequest, prepare
from docdelta.experiment.progress import LineProgress
from docdelta.experiment.runner import RunLimits, Runner
from docdelta.git import Repo
from docdelta.results.store import ResultStore
from docdelta.sandbox import get_provider
from docdelta.sandbox.base import SandboxSpec

SMOKE_ARGS = ["--cells", "1"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""
SMOKE_NEEDS_ENV = ["DOCDELTA_REAL_REPOS"]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "real"
MINIJINJA = ("53e2787985f0", "eb17be5752d2")
"""A minijinja PR that changes AGENTS.md and CLAUDE.md (tests/real/test_real_tasks.py's)."""


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and its waited-for children (sandbox, git)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cell_seconds(
    repo: Repo, base: str, head: str, tasks: Path, work: Path, n: int
) -> tuple[list[float], list[float], str]:
    """Wall and CPU seconds of each of `n` cells run one by one through the real runner
    (fake agent). CPU is what a loaded machine inflates least: wall also counts waiting."""
    store = ResultStore(work)
    agent = get_agent("fake")
    request = ExperimentRequest(base=base, head=head, tasks_dir=tasks, repeats=max(1, n // 9 + 1))
    config = load_project_config(repo, repo.resolve(base))
    exp = prepare(repo, request, config=config, store=store, agent=agent, sandbox="local")
    assert exp is not None
    provider = get_provider("local")
    runner = Runner(store, provider, SandboxSpec(), agent, RunLimits(), LineProgress())
    views = getattr(provider, "views", False)
    times, cpus = [], []
    for cell in exp.manifest.order[:n]:
        start, cpu = time.perf_counter(), cpu_seconds()
        store.save(exp.repo_name, runner.run_cell(exp, cell))
        times.append(time.perf_counter() - start)
        cpus.append(cpu_seconds() - cpu)
    provider.close()
    return times, cpus, "copy-on-write views" if views else "full copies"


def cli_seconds(argv: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s, stderr) of one `docdelta` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv[:2])} exited {done.returncode}: {done.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, done.stderr


def rerun(args: list[str]) -> tuple[float, float, str]:
    """Run `docdelta run args` once to fill the workdir, then time the rerun."""
    docdelta = str(Path(sys.executable).with_name("docdelta"))
    cli_seconds([docdelta, "run", *args])
    wall, cpu, err = cli_seconds([docdelta, "run", *args])
    ran = re.search(r"\((\d+) ran, (\d+) reused\)", err)
    return wall, cpu, f"{ran.group(1)} ran, {ran.group(2)} reused" if ran else "?"


def tree_size(root: Path) -> str:
    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]
    return f"{len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=12)
    args = parser.parse_args()
    bundles = os.environ.get("DOCDELTA_REAL_REPOS")
    if not bundles:
        sys.exit("set DOCDELTA_REAL_REPOS to the directory of the real-repository bundles")
    compileall.compile_dir(Path(docdelta_package.__file__).parent, quiet=1)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="docdelta-bench-real-") as tmp:
        root = Path(tmp)
        clone = root / "minijinja"
        subprocess.run(["git", "clone", "-q", f"{bundles}/minijinja.bundle", str(clone)], check=True)
        demo = build_demo_repo(root / "pricebook")
        real_tasks, demo_tasks = EXAMPLES / "minijinja" / "tasks", demo.path / ".docdelta" / "tasks"
        real, real_cpus, mode = cell_seconds(
            Repo(clone), *MINIJINJA, real_tasks, root / "cells-real", args.cells
        )
        demo_pair = demo.base_sha, demo.head_sha
        small, small_cpus, _ = cell_seconds(
            Repo(demo.path), *demo_pair, demo_tasks, root / "cells-demo", args.cells
        )
        real_med, demo_med = statistics.median(real), statistics.median(small)
        real_cpu_med, demo_cpu_med = statistics.median(real_cpus), statistics.median(small_cpus)
        ratio, cpu_ratio = real_med / demo_med, real_cpu_med / demo_cpu_med
        real_pr = ["--repo", str(clone), "--base", MINIJINJA[0], "--head", MINIJINJA[1]]
        real_pr += ["--tasks", str(real_tasks), "--workdir", str(root / "rerun-real"), "--repeats", "1"]
        demo_pr = ["--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha]
        demo_pr += ["--tasks", str(demo_tasks), "--workdir", str(root / "rerun-demo"), "--repeats", "5"]
        real_wall, real_cpu, real_ran = rerun(real_pr)
        demo_wall, demo_cpu, demo_ran = rerun(demo_pr)
        sizes = tree_size(clone), tree_size(demo.path)
    print(f"load average at start: {load:.1f} on {os.cpu_count()} CPUs; local sandbox with {mode}")
    for what, size, walls, wall, cpu in (
        ("minijinja", sizes[0], real, real_med, real_cpu_med),
        ("demo     ", sizes[1], small, demo_med, demo_cpu_med),
    ):
        print(
            f"cell (fake agent), {what} ({size}): median {wall * 1000:7.1f} ms wall, "
            f"{cpu * 1000:6.1f} ms CPU over {len(walls)} cells"
        )
    print(
        f"ratio  real / demo = {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU"
        f"   (goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'} on wall)"
    )
    for what, wall, cpu, ran, goal in (
        ("minijinja PR, all reused", real_wall, real_cpu, real_ran, 3),
        ("unchanged demo PR end to end", demo_wall, demo_cpu, demo_ran, 5),
    ):
        verdict = "met" if wall < goal else "NOT met"
        print(f"rerun  {what} ({ran}): {wall:.2f} s wall, {cpu:.2f} s CPU   (goal < {goal} s: {verdict})")


if __name__ == "__main__":
    main()
