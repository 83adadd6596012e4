"""Harness overhead per cell, measured against the floor of a bare `git archive | tar -x`.

One cell = copy the sealed checkout into a fresh sandbox, run an agent that answers
at once (so the agent's own thinking is not measured), score, and store the result
atomically. The floor is what any harness must pay to lay out the same tree. Also
times the full 60-cell demo matrix with the fake agent, and the same cell without a
sandbox (`none`), which shows what the isolation itself costs. Goals: overhead
per cell <= 3x the floor; 60-cell demo matrix < 60 s on 2 cores.

    python bench/bench_cell.py [--cells 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from docdelta.agents import get_agent
from docdelta.cli.main import main as cli_main
from docdelta.config import load_project_config
from docdelta.demo import build_demo_repo
from docdelta.experiment.plan import ExperimentRequest, prepare
from docdelta.experiment.progress import LineProgress
from docdelta.experiment.runner import RunLimits, Runner
from docdelta.git import Repo
from docdelta.results.store import ResultStore
from docdelta.sandbox import get_provider
from docdelta.sandbox.base import SandboxSpec

SMOKE_ARGS = ["--cells", "2"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

NOOP_AGENT = 'printf \'{"answer": "", "commands": []}\''


def floor_seconds(repo: Path, sha: str, scratch: Path, n: int) -> list[float]:
    """`git archive SHA | tar -x` into a fresh directory, n times."""
    times = []
    for i in range(n):
        dest = scratch / f"floor-{i}"
        dest.mkdir()
        start = time.perf_counter()
        subprocess.run(
            f"git -C {repo} archive {sha} | tar -x -C {dest}", shell=True, check=True, capture_output=True
        )
        times.append(time.perf_counter() - start)
    return times


def cell_seconds(root: Path, n: int, sandbox: str = "local") -> tuple[list[float], str]:
    demo = build_demo_repo(root / "pricebook")
    store = ResultStore(root / "results")
    agent = get_agent("command", cmd=NOOP_AGENT)
    request = ExperimentRequest(
        base=demo.base_sha, head=demo.head_sha, tasks_dir=demo.tasks_dir, repeats=max(1, n // 12 + 1)
    )
    repo = Repo(demo.path)
    config = load_project_config(repo, demo.base_sha)
    exp = prepare(repo, request, config=config, store=store, agent=agent, sandbox="local")
    assert exp is not None
    provider = get_provider(sandbox)
    runner = Runner(store, provider, SandboxSpec(), agent, RunLimits(), LineProgress())
    times = []
    isolation = "?"
    for cell in exp.manifest.order[:n]:
        start = time.perf_counter()
        result = runner.run_cell(exp, cell)
        store.save(exp.repo_name, result)
        times.append(time.perf_counter() - start)
        isolation = result.isolation
    provider.close()
    return times, isolation


def demo_matrix_seconds(root: Path) -> float:
    start = time.perf_counter()
    code = cli_main(["demo", "--workdir", str(root / "demo"), "--repeats", "5"])
    if code != 0:
        sys.exit(f"demo failed with exit code {code}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="docdelta-bench-") as tmp:
        root = Path(tmp)
        cells, isolation = cell_seconds(root / "cells", args.cells)
        bare, _ = cell_seconds(root / "bare", args.cells, sandbox="none")
        demo = Repo(root / "cells" / "pricebook")
        floor = floor_seconds(demo.root, demo.resolve("HEAD"), root, args.cells)
        matrix = demo_matrix_seconds(root)
    cell_med, floor_med = statistics.median(cells), statistics.median(floor)
    ratio = cell_med / floor_med
    print(f"floor  git archive | tar -x : median {floor_med * 1000:7.1f} ms over {len(floor)} runs")
    print(f"cell   copy+sandbox+score+store : median {cell_med * 1000:7.1f} ms over {len(cells)} cells")
    print(f"       (sandbox isolation: {isolation})")
    bare_med = statistics.median(bare)
    print(
        f"bare   same cell, --sandbox none    : median {bare_med * 1000:7.1f} ms; "
        f"the sandbox adds {(cell_med - bare_med) * 1000:.1f} ms ({cell_med / bare_med:.2f}x)"
    )
    print(f"ratio  cell / floor = {ratio:.2f}x   (goal <= 3x: {'met' if ratio <= 3 else 'NOT met'})")
    verdict = "met" if matrix < 60 else "NOT met"
    print(f"demo   60-cell matrix, fake agent: {matrix:.1f} s   (goal < 60 s: {verdict})")


if __name__ == "__main__":
    main()
