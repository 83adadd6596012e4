"""`docdelta detect` start-up and run time, against `python -c pass` (issue 12: goal < 0.5 s
absolute on 2 cores). Also times detection alone (in-process, imports paid) on a real
repository's instruction-file commit when DOCDELTA_REAL_REPOS points at the bundles.

    python bench/bench_detect.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DIFF = "diff --git a/AGENTS.md b/AGENTS.md\n--- a/AGENTS.md\n+++ b/AGENTS.md\n@@ -1 +1 @@\n-a\n+b\n"


def _median_s(argv: list[str], runs: int, stdin: str = "") -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, input=stdin.encode(), check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    floor = _median_s([sys.executable, "-c", "pass"], runs)
    docdelta = str(Path(sys.executable).with_name("docdelta"))
    with tempfile.NamedTemporaryFile("w", suffix=".diff") as diff:
        diff.write(DIFF)
        diff.flush()
        detect = _median_s([docdelta, "detect", "--diff", diff.name], runs)
    print(f"python -c pass:            {floor:.3f} s (median of {runs})")
    print(f"docdelta detect --diff:    {detect:.3f} s  ratio {detect / floor:.1f}x  goal < 0.5 s")
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
