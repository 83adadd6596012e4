"""Per-cell overhead of the Docker provider against the floor of `docker run --rm IMAGE true`.

A cell here is what the runner pays per run beyond the agent itself: create (volume,
container, copy the checkout in), write the agent's file, run a no-op agent, copy a
result out, remove everything. Goal: at most 3x the floor. Prints the ratio.

    .venv/bin/python bench/bench_docker.py [IMAGE] [ROUNDS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker

from docdelta.sandbox.base import SandboxSpec
from docdelta.sandbox.docker import DockerProvider

SMOKE_ARGS = ["docdelta-base:latest", "1"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""


def floor(image: str) -> float:
    started = time.monotonic()
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True)
    return time.monotonic() - started


def cell(provider: DockerProvider, checkout: Path) -> float:
    started = time.monotonic()
    with provider.create(checkout, SandboxSpec()) as sandbox:
        sandbox.write_file(
            f"{sandbox.tools_dir}/agent.sh", b"#!/bin/sh\necho '{}' > answer.json\n", mode=0o755
        )
        assert sandbox.exec([f"{sandbox.tools_dir}/agent.sh"]).exit_code == 0
        assert sandbox.read_file("answer.json") == b"{}\n"
    return time.monotonic() - started


def main() -> None:
    image = sys.argv[1] if len(sys.argv) > 1 else "docdelta-base:latest"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    provider = DockerProvider(docker.from_env(), image)
    with tempfile.TemporaryDirectory() as tmp:
        checkout = Path(tmp)
        for i in range(50):
            (checkout / f"src/m{i}.py").parent.mkdir(exist_ok=True)
            (checkout / f"src/m{i}.py").write_text("x = 1\n" * 100)
        floor(image), cell(provider, checkout)  # warm both paths
        floors = [floor(image) for _ in range(rounds)]
        cells = [cell(provider, checkout) for _ in range(rounds)]
    f, c = statistics.median(floors), statistics.median(cells)
    print(f"floor  docker run --rm true : median {f * 1000:7.1f} ms over {rounds}")
    print(f"cell   docker provider      : median {c * 1000:7.1f} ms over {rounds}")
    print(f"ratio  cell / floor         : {c / f:.2f}x (goal <= 3x)")


if __name__ == "__main__":
    main()
