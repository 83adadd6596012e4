"""A first run on the largest real repository against the demo's, and `--jobs 4` against
`--jobs 1` there, each as whole `docdelta run` processes timed in alternating pairs.

1. First run: a fresh workdir (nothing sealed, nothing reused), the minijinja PR of
   examples/real/minijinja with four of its tasks (12 cells a repeat) against the demo's four
   tasks (12 cells a repeat), a no-op command agent. Goal: <= 1.5x. The real tree costs one
   sealed source per commit; each condition is an overlay of its instruction files on it.
2. `--jobs 4` vs `--jobs 1`, a first run of the same real matrix whose agent waits 2 s (a
   `sleep 2` inside the sandbox, as a model call would), sized like a real PR run at the
   shipped defaults: `--repeats auto` runs every task to its first look (JOBS_REPEATS rounds
   at the default cap) before it may stop, so no run at the defaults is smaller than 36
   cells here. Goal: >= 3.5x. Each side's time is split from its results' clocks: start-up
   (to the first cell's start), cells, tail (after the last cell's end). Start-up and tail
   are paid alike at any --jobs, so they bound the ratio: with cells of 2 s and 4 workers,
   24 cells (the first part's 2 repeats) allow 2.4 s for both together on a perfect machine,
   less than a Python start and a seal of the tree take on these CI machines; 36 allow 3.6 s.

Each pair runs A then B (or B then A, alternating) so a machine whose speed drifts moves
both; the ratio is taken pair by pair and its median printed, with the load average: on a
shared machine wall seconds mostly measure the load, the ratio much less so. The agent is
`/bin/sh`, which every sandbox can see (a virtualenv's python may live where it cannot).
As bench/bench_real.py does, docdelta's modules are compiled first, as `pip install` compiles
them: under PYTHONDONTWRITEBYTECODE=1 every start would recompile every module, a constant
that would pull both sides' ratio towards 1.

    DOCDELTA_REAL_REPOS=/work/shared/real-repos python bench/bench_first_run.py [--pairs 3] [--part 2]
    python bench/bench_first_run.py --smoke      # seconds: the demo on both sides, 1 pair
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import docdelta as docdelta_package
from docdelta.demo import build_demo_repo
from docdelta.results.models import RunResult
from docdelta.scorecard.decision import Design
from docdelta.validate import DEFAULT_MAX_REPEATS

SMOKE_ARGS = ["--smoke"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "real"
MINIJINJA = ("53e2787985f0", "eb17be5752d2")
"""A minijinja PR that changes AGENTS.md and CLAUDE.md (tests/real/test_real_tasks.py's)."""
REAL_TASKS = ("accept-snapshots", "cli-install", "core-tests", "msrv")
"""Four tasks, as many as the demo has, so both matrices have the same cells."""
ANSWER = '{"answer": "make test", "commands": []}'
PARTS = (1, 2)
"""The docstring's numbered parts, for --part."""
JOBS_REPEATS = Design.auto(DEFAULT_MAX_REPEATS).looks[0]
"""Part 2's repeats: the rounds every task runs at the shipped defaults before a look."""


def _agent(wait_s: float) -> list[str]:
    script = f"sleep {wait_s}; echo '{ANSWER}'" if wait_s else f"echo '{ANSWER}'"
    return ["--agent", "command", "--agent-cmd", f"sh -c {_quote(script)}"]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _docdelta() -> str:
    return str(Path(sys.executable).with_name("docdelta"))


class Matrix:
    """One repository's PR and tasks, run in a fresh workdir each time."""

    def __init__(self, repo: Path, base: str, head: str, tasks: Path, scratch: Path) -> None:
        self.args = ["--repo", str(repo), "--base", base, "--head", head, "--tasks", str(tasks)]
        self.scratch = scratch
        self.splits: dict[str, list[tuple[float, float, float]]] = {}
        """Per flag set: (start-up, cells, tail) seconds of each run, from its results' clocks."""

    def run(self, repeats: int, extra: Sequence[str]) -> float:
        """Wall seconds of one whole `docdelta run` process into a fresh workdir."""
        workdir = Path(tempfile.mkdtemp(prefix="run-", dir=self.scratch))
        argv = [_docdelta(), "run", *self.args, "--workdir", str(workdir), "--repeats", str(repeats), *extra]
        start, started = time.perf_counter(), time.time()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
        wall, ended = time.perf_counter() - start, time.time()
        if done.returncode != 0:
            sys.exit(f"docdelta run exited {done.returncode}: {done.stderr[-2000:]}")
        results = [RunResult.model_validate_json(p.read_bytes()) for p in workdir.rglob("result.json")]
        first = min(r.started_at.timestamp() for r in results)
        last = max(r.finished_at.timestamp() for r in results)
        self.splits.setdefault(" ".join(extra), []).append((first - started, last - first, ended - last))
        shutil.rmtree(workdir, ignore_errors=True)
        return wall

    def split(self, extra: Sequence[str]) -> str:
        """Median start-up (process start to the first cell), cells (first cell's start to
        the last one's end) and tail (to the process's exit) of the runs with `extra`."""
        runs = self.splits[" ".join(extra)]
        up, cells, tail = (statistics.median(r[i] for r in runs) for i in range(3))
        return f"start-up {up:.1f} + cells {cells:.1f} + tail {tail:.1f} s"


def pairs(a: Matrix, a_extra: Sequence[str], b: Matrix, b_extra: Sequence[str], n: int, repeats: int) -> str:
    """`n` alternating pairs A/B; the median ratio with the medians of each side."""
    ratios, walls_a, walls_b = [], [], []
    for i in range(n):
        if i % 2 == 0:
            wa, wb = a.run(repeats, a_extra), b.run(repeats, b_extra)
        else:
            wb, wa = b.run(repeats, b_extra), a.run(repeats, a_extra)
        walls_a.append(wa)
        walls_b.append(wb)
        ratios.append(wa / wb)
    return (
        f"{statistics.median(ratios):.2f}x (pairs: {', '.join(f'{r:.2f}' for r in ratios)}; "
        f"median {statistics.median(walls_a):.1f} s vs {statistics.median(walls_b):.1f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2, help="part 1's repeats per matrix (12 cells each)")
    parser.add_argument(
        "--jobs-repeats", type=int, default=JOBS_REPEATS, help="part 2's repeats (default: %(default)s)"
    )
    parser.add_argument("--smoke", action="store_true", help="seconds: the demo on both sides, one pair")
    parser.add_argument(
        "--part",
        type=int,
        choices=PARTS,
        action="append",
        help="run only this part (repeatable; default: both): 2 alone is the --jobs ratio",
    )
    args = parser.parse_args()
    bundles = os.environ.get("DOCDELTA_REAL_REPOS")
    if not args.smoke and not bundles:
        sys.exit("set DOCDELTA_REAL_REPOS to the directory of the real-repository bundles (or pass --smoke)")
    n, repeats, wait = (1, 1, 0.1) if args.smoke else (args.pairs, args.repeats, 2.0)
    jobs_repeats = 1 if args.smoke else args.jobs_repeats
    parts = set(args.part or PARTS)
    compileall.compile_dir(Path(docdelta_package.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory(prefix="docdelta-bench-first-") as tmp:
        scratch = Path(tmp)
        demo_repo = build_demo_repo(scratch / "pricebook")
        demo = Matrix(
            demo_repo.path,
            demo_repo.base_sha,
            demo_repo.head_sha,
            demo_repo.path / ".docdelta" / "tasks",
            scratch,
        )
        if args.smoke:
            real, name = demo, "demo (smoke)"
        else:
            clone = scratch / "minijinja"
            subprocess.run(["git", "clone", "-q", f"{bundles}/minijinja.bundle", str(clone)], check=True)
            tasks = scratch / "minijinja-tasks"
            tasks.mkdir()
            for task in REAL_TASKS:
                shutil.copy(EXAMPLES / "minijinja" / "tasks" / f"{task}.yaml", tasks)
            real, name = Matrix(clone, *MINIJINJA, tasks, scratch), "minijinja"
        print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        if 1 in parts:
            first = pairs(real, _agent(0), demo, _agent(0), n, repeats)
            shape = f"{name} / demo, {12 * repeats} cells each, no-op agent"
            print(f"first run, {shape}: {first}   (goal <= 1.5x)")
        if 2 in parts:
            one, four = [*_agent(wait), "--jobs", "1"], [*_agent(wait), "--jobs", "4"]
            jobs = pairs(real, one, real, four, n, jobs_repeats)
            shape = f"{name}, {12 * jobs_repeats} cells, agent waits {wait:g} s"
            print(f"--jobs 1 / --jobs 4, {shape}: {jobs}   (goal >= 3.5x)")
            print(f"  --jobs 1: {real.split(one)}; --jobs 4: {real.split(four)} (medians)")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
