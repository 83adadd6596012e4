"""Wall time of `--jobs N` against `--jobs 1`, and a 4-shard split merged against the
unsharded run, through the real CLI (local sandbox, sealed checkouts, scoring, store).

1. A 40-cell matrix (4 tasks x base,head x 5 repeats) whose command agent waits 1 s per
   run, as a model call would: `--jobs 4` vs `--jobs 1` (goal >= 3.5x on 2 cores).
2. The fake agent on the 60-cell demo matrix: `--jobs 2` vs `--jobs 1` (goal >= 1.6x).
3. The demo matrix run as 4 shards and merged: its JSON summary equals the unsharded
   one, timestamps and measured durations aside.

    python bench/bench_jobs.py [--smoke]

--smoke runs one repeat of each matrix (seconds), to show the bench still runs; its ratios
mean nothing. bench/bench_first_run.py measures `--jobs` on the largest real repository.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

from docdelta.cli.main import main
from docdelta.demo import DemoRepo, build_demo_repo

SMOKE_ARGS = ["--smoke"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

WAITS = """sleep 1; echo '{"answer": "make check", "commands": []}'"""
"""The agent: /bin/sh, which every sandbox can see (the virtualenv's python may not be)."""
CLOCK = ("created_at", "started_at", "finished_at", "median_duration_s", "duration_s")


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    if code != 0:
        raise SystemExit(f"docdelta {' '.join(argv[:1])} exited {code}")
    return out.getvalue()


def _run(demo: DemoRepo, workdir: Path, *extra: str) -> list[str]:
    return [
        "run", "--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha,
        "--tasks", str(demo.path / ".docdelta" / "tasks"), "--workdir", str(workdir),
        "--allow-network", *extra,
    ]  # fmt: skip


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    _cli(*argv)
    return time.perf_counter() - start


def _summary(workdir: Path) -> str:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in CLOCK}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return json.dumps(strip(json.loads(_cli("report", "--workdir", str(workdir), "--format", "json"))))


def bench(repeats: str) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    demo = build_demo_repo(scratch / "pricebook")
    waiting = ["--agent", "command", "--agent-cmd", f"sh -c {shlex.quote(WAITS)}"]
    waiting += ["--conditions", "base,head", "--repeats", repeats]
    one = _timed(_run(demo, scratch / "wait-j1", *waiting, "--jobs", "1"))
    four = _timed(_run(demo, scratch / "wait-j4", *waiting, "--jobs", "4"))
    print(
        f"{8 * int(repeats)} cells, agent waits 1 s: --jobs 1 {one:.1f} s, --jobs 4 {four:.1f} s: "
        f"{one / four:.2f}x (goal >= 3.5x)"
    )

    fake = ["--agent", "fake", "--repeats", repeats]
    one = _timed(_run(demo, scratch / "fake-j1", *fake, "--jobs", "1"))
    two = _timed(_run(demo, scratch / "fake-j2", *fake, "--jobs", "2"))
    print(
        f"{12 * int(repeats)} cells, fake agent: --jobs 1 {one:.1f} s, --jobs 2 {two:.1f} s: "
        f"{one / two:.2f}x (goal >= 1.6x)"
    )

    shards = [scratch / f"shard{i}" for i in range(1, 5)]
    for i, workdir in enumerate(shards, 1):
        _cli(*_run(demo, workdir, *fake, "--shard", f"{i}/4"))
    _cli("merge", *map(str, shards), "--workdir", str(scratch / "merged"))
    same = _summary(scratch / "merged") == _summary(scratch / "fake-j1")
    print(
        f"{12 * int(repeats)} cells in 4 shards, merged: JSON summary identical to the unsharded run: {same}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one repeat of each matrix, in seconds")
    bench("1" if parser.parse_args().smoke else "5")
