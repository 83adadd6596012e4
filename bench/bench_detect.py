"""`docdelta detect` start-up and run time, against `python -c pass` (goal < 0.5 s
absolute on 2 cores). Also times detection alone (in-process, imports paid) on a real
repository's instruction-file commit when DOCDELTA_REAL_REPOS points at the bundles.

The goal is timed as installed: `pip install` (and so the Action's image) compiles every
module's bytecode, which `python -c pass` has for the standard library too, so docdelta's
is compiled first. An editable checkout under PYTHONDONTWRITEBYTECODE=1 (this repository's
dev environment) compiles docdelta's modules on every start instead; that figure is
printed beside it, from a copy of the package without bytecode.

    python bench/bench_detect.py [--runs 5]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docdelta as docdelta_package

SMOKE_ARGS = ["--runs", "1"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

DIFF = "diff --git a/AGENTS.md b/AGENTS.md\n--- a/AGENTS.md\n+++ b/AGENTS.md\n@@ -1 +1 @@\n-a\n+b\n"


def _median_s(argv: list[str], runs: int) -> float:
    return statistics.median(_times(argv, runs)[0])


def _times(argv: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each of `runs` runs (CPU: what a loaded machine cannot inflate much)."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    floor_wall, floor_cpu = (statistics.median(t) for t in _times([sys.executable, "-c", "pass"], runs))
    docdelta = str(Path(sys.executable).with_name("docdelta"))
    package = Path(docdelta_package.__file__).parent
    compileall.compile_dir(package, quiet=1)  # as `pip install` does
    with tempfile.TemporaryDirectory() as tmp:
        diff = Path(tmp, "pr.diff")
        diff.write_text(DIFF)
        argv = [docdelta, "detect", "--diff", str(diff)]
        walls, cpus = _times(argv, runs)
        shutil.copytree(package, Path(tmp, "src", "docdelta"), ignore=shutil.ignore_patterns("__pycache__"))
        source = {**os.environ, "PYTHONPATH": str(Path(tmp, "src")), "PYTHONDONTWRITEBYTECODE": "1"}
        source_walls, source_cpus = _times(argv, runs, source)
    detect, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"python -c pass:            {floor_wall:.3f} s wall, {floor_cpu:.3f} s CPU (median of {runs})")
    verdict = "met" if detect < 0.5 else "NOT met"
    print(
        f"docdelta detect --diff:    {detect:.3f} s wall, {cpu:.3f} s CPU; ratio {detect / floor_wall:.1f}x "
        f"(CPU {cpu / floor_cpu:.1f}x); goal < 0.5 s: {verdict}"
    )
    print(
        f"  same, without bytecode:  {statistics.median(source_walls):.3f} s wall, "
        f"{statistics.median(source_cpus):.3f} s CPU (a checkout under PYTHONDONTWRITEBYTECODE=1)"
    )
    bundles = os.environ.get("DOCDELTA_REAL_REPOS")
    if bundles:
        with tempfile.TemporaryDirectory() as tmp:
            clone = Path(tmp, "minijinja")
            subprocess.run(["git", "clone", "-q", f"{bundles}/minijinja.bundle", str(clone)], check=True)
            sha = "a8c633b70537"
            args = [docdelta, "detect", "--repo", str(clone), "--base", f"{sha}~1", "--head", sha]
            real = _median_s(args, runs)
            print(f"docdelta detect (minijinja {sha}, graph over both trees): {real:.3f} s")


if __name__ == "__main__":
    main()
