"""Every bench still runs: each `bench/bench_*.py` at its smallest size, so a bench that no
longer starts fails CI instead of rotting until someone needs its figures.

Benches are found by glob; each declares `SMOKE_ARGS`, the smallest flags that still run
every part of it, and may declare `SMOKE_NEEDS_ENV`, the environment variables it cannot
run without (they skip it here, and fail it under DOCDELTA_NO_SKIPS=1 as in CI). A bench
without `SMOKE_ARGS` fails this test, so a new bench is covered the day it lands
(tests/README.md). Some benches drive Docker, so this sits in the docker tier.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
BENCHES = sorted(BENCH.glob("bench_*.py"))

pytestmark = pytest.mark.timeout(900)


def declared(script: Path, name: str) -> list[str] | None:
    """The literal list or tuple of strings bound to `name` at the script's top level."""
    for node in ast.parse(script.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.Assign):
            continue
        if any(isinstance(target, ast.Name) and target.id == name for target in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list | tuple) and all(isinstance(v, str) for v in value), (
                f"{script.name}: {name} must be a literal list of strings"
            )
            return list(value)
    return None


def test_the_benches_are_found() -> None:
    assert len(BENCHES) >= 8, BENCHES


@pytest.mark.parametrize("script", BENCHES, ids=lambda p: p.stem)
def test_the_bench_runs_at_its_smallest_size_and_prints_its_figures(script: Path) -> None:
    args = declared(script, "SMOKE_ARGS")
    assert args is not None, (
        f"{script.name} declares no SMOKE_ARGS: add `SMOKE_ARGS = [...]` (its smallest flags) "
        "so CI runs it (tests/README.md, Benches)"
    )
    missing = [name for name in declared(script, "SMOKE_NEEDS_ENV") or [] if not os.environ.get(name)]
    if missing:
        pytest.skip(f"{script.name} needs {', '.join(missing)}")
    done = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    ran = f"{script.name} {' '.join(args)}"
    assert done.returncode == 0, f"{ran} exited {done.returncode}:\n{done.stderr[-4000:]}"
    figures = [line for line in done.stdout.splitlines() if any(ch.isdigit() for ch in line)]
    assert figures, f"{script.name} printed no figure:\n{done.stdout[-2000:]}"
