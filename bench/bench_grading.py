"""Hidden-test grading per cell against its floor: a bare pytest run of the same hidden test
on the same interpreter, in the same files, with no sandbox.

`grade_change` works out the grading tree (the sealed checkout with the agent's permitted
edits and the trusted hidden test on top), opens an offline local sandbox on it, runs the
validation command there with its JUnit report and reads the verdict. The floor is
`python -m pytest` in a plain directory holding the same files. Both run in alternating
pairs and the median of the per-pair ratios is printed with the load average, then the
median of each of grading's phases (`GradingPhase`): what is not the `run` phase is what
grading adds to the command itself.

The project is a tiny Python package with the hidden test stripped from the sealed checkout
and, unless --smoke, padded with the files of the largest real repository's tree (so the
copy's cost shows), the real-repository bundle taken from DOCDELTA_REAL_REPOS.

    DOCDELTA_REAL_REPOS=/work/shared/real-repos python bench/bench_grading.py [--pairs 9]
    python bench/bench_grading.py --smoke     # seconds: the tiny package alone, 2 pairs
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from docdelta.checkout.seal import seal
from docdelta.git import Repo
from docdelta.grading.hidden import GradingPhase, grade_change
from docdelta.instructions.detect import InstructionMatcher, Overlay
from docdelta.sandbox.local import LocalProvider
from docdelta.tasks.models import Gold, Task, Validation

SMOKE_ARGS = ["--smoke"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

HIDDEN = "tests/test_hidden.py"
HIDDEN_TEST = b"from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FILES = {
    "calc/__init__.py": b"",
    "calc/ops.py": b"def add(a, b):\n    return a + b\n",
    "pyproject.toml": b'[project]\nname = "calc"\nversion = "0.1"\n',
    HIDDEN: HIDDEN_TEST,
}
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", HIDDEN]


def _project(root: Path, padding: Path | None) -> Repo:
    if padding is not None:
        subprocess.run(["git", "clone", "-q", str(padding), str(root)], check=True)
        shutil.rmtree(root / ".git")
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b"}
    env["GIT_COMMITTER_EMAIL"] = "b@b"
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "p"]):
        subprocess.run(["git", *step], cwd=root, check=True, env=env)
    return Repo(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--smoke", action="store_true", help="seconds: the tiny package alone, 2 pairs")
    args = parser.parse_args()
    bundles = os.environ.get("DOCDELTA_REAL_REPOS")
    if not args.smoke and not bundles:
        sys.exit("set DOCDELTA_REAL_REPOS to the directory of the real-repository bundles (or pass --smoke)")
    pairs = 2 if args.smoke else args.pairs
    padding = None if args.smoke else Path(f"{bundles}/minijinja.bundle")
    with tempfile.TemporaryDirectory(prefix="docdelta-bench-grading-") as tmp:
        scratch = Path(tmp)
        repo = _project(scratch / "project", padding)
        sha = repo.resolve("HEAD")
        files = sum(1 for path in repo.root.rglob("*") if ".git" not in path.parts)
        sealed = seal(repo, sha, Overlay(), scratch / "sealed", InstructionMatcher(), [f"/{HIDDEN}"])
        command = shlex.join(PYTEST)
        task = Task(
            id="fix-add",
            prompt="make add add",
            kind="change",
            gold=Gold(validation=Validation(hidden=[HIDDEN], command=command, timeout_s=120)),
        )
        toolchain = [str(Path(sys.base_prefix)), str(Path(sys.prefix))]
        provider = LocalProvider(root=scratch / "sandboxes", ro_paths=toolchain)
        try:
            splits: list[dict[str, float]] = []

            def graded() -> float:
                phases: dict[str, float] = {}
                start = time.perf_counter()
                result = grade_change(
                    task, sealed, b"", {HIDDEN: HIDDEN_TEST}, provider, workdir=scratch, phases=phases
                )
                wall = time.perf_counter() - start
                if result.status != "pass":
                    sys.exit(f"grading did not pass: {result.notes} {result.output_tail}")
                splits.append(phases)
                return wall

            def floor() -> float:
                start = time.perf_counter()
                subprocess.run(PYTEST, cwd=repo.root, check=True, capture_output=True)
                return time.perf_counter() - start

            load = os.getloadavg()[0]
            graded(), floor()  # warm the page cache and the interpreter's bytecode for both
            splits.clear()
            ratios, walls, floors = [], [], []
            for i in range(pairs):
                a, b = (graded(), floor()) if i % 2 == 0 else reversed((floor(), graded()))
                walls.append(a)
                floors.append(b)
                ratios.append(a / b)
        finally:
            provider.close()
    print(f"load average at start: {load:.1f} on {os.cpu_count()} CPUs; project of {files} files")
    print(
        f"grading per cell / bare pytest: {statistics.median(ratios):.2f}x "
        f"(median {statistics.median(walls) * 1000:.0f} ms vs {statistics.median(floors) * 1000:.0f} ms "
        f"over {pairs} alternating pairs; pairs {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    split = ", ".join(
        f"{phase.value} {statistics.median(s.get(phase.value, 0.0) for s in splits) * 1000:.0f}"
        for phase in GradingPhase
    )
    print(f"grading's phases, median ms: {split}")


if __name__ == "__main__":
    main()
