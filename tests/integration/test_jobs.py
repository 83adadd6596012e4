"""`--jobs N` through the real CLI: the same cells, seeds, results, manifest and progress
lines as `--jobs 1`; only the wall time differs."""

from __future__ import annotations

from pathlib import Path

import pytest

from docdelta.cli import main
from docdelta.demo import DemoRepo, build_demo_repo
from docdelta.errors import ExitCode
from docdelta.models import Manifest, RunResult


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    return build_demo_repo(tmp_path_factory.mktemp("demo") / "pricebook")


def _run(demo: DemoRepo, workdir: Path, jobs: int) -> list[str]:
    return [
        "run", "--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha,
        "--tasks", str(demo.path / ".docdelta" / "tasks"), "--workdir", str(workdir),
        "--agent", "fake", "--allow-network", "--repeats", "2", "--jobs", str(jobs),
    ]  # fmt: skip


def _results(workdir: Path) -> dict[str, tuple[object, ...]]:
    found = (RunResult.model_validate_json(p.read_bytes()) for p in workdir.glob("runs/*/*/*/r*/result.json"))
    return {r.cell.key: (r.status, r.seed, r.score, r.outcome.answer, r.attempt) for r in found}


def test_jobs_4_gives_the_results_manifest_and_progress_of_jobs_1(
    demo: DemoRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = {}
    for jobs in (1, 4):
        workdir = tmp_path / f"j{jobs}"
        capsys.readouterr()
        assert main(_run(demo, workdir, jobs)) == ExitCode.OK
        out, err = capsys.readouterr()
        progress = [line for line in err.splitlines() if line.startswith("[")]
        manifest = Manifest.model_validate_json((workdir / "manifest.json").read_bytes())
        seen[jobs] = (_results(workdir), manifest.identity(), progress, out)
    assert len(seen[1][0]) == 4 * 3 * 2
    assert seen[4][0] == seen[1][0]
    assert seen[4][1] == seen[1][1], "--jobs is not part of the experiment: shards may differ in it"
    assert seen[4][2] == seen[1][2], "progress lines come in plan order at every --jobs"
