"""Plan, shard, merge through the real CLI: a matrix split over 4 `run --shard` workdirs and
merged scores exactly as the unsharded run; a mix of experiments is refused, naming what
differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from docdelta.cli.main import main
from docdelta.demo import DemoRepo, build_demo_repo
from docdelta.errors import ExitCode
from docdelta.experiment.shard import Shard
from docdelta.results.models import Manifest

CLOCK = ("created_at", "started_at", "finished_at", "median_duration_s", "duration_s")
"""Timestamps and measured durations: what the clock says, which no two runs share."""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    return build_demo_repo(tmp_path_factory.mktemp("demo") / "pricebook")


def _run(demo: DemoRepo, workdir: Path, *extra: str) -> list[str]:
    return [
        "run", "--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha,
        "--tasks", str(demo.path / ".docdelta" / "tasks"), "--workdir", str(workdir),
        "--agent", "fake", "--allow-network", "--repeats", "2", "--seed", "7", *extra,
    ]  # fmt: skip


def _without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k not in CLOCK}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def _summary_json(workdir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == ExitCode.OK
    return json.dumps(_without_clock(json.loads(capsys.readouterr().out)), indent=1, sort_keys=True)


def test_four_shards_merged_score_exactly_as_the_unsharded_run(
    demo: DemoRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(demo, tmp_path / "whole")) == ExitCode.OK
    whole = _summary_json(tmp_path / "whole", capsys)

    shards = [tmp_path / f"shard{i}" for i in range(1, 5)]
    for i, workdir in enumerate(shards, 1):
        assert main(_run(demo, workdir, "--shard", f"{i}/4")) == ExitCode.OK
        assert f"shard {i}/4:" in capsys.readouterr().out
    order = Manifest.model_validate_json((shards[0] / "manifest.json").read_text()).order
    ran = [sorted(p.parent for p in w.glob("runs/*/*/*/r*/result.json")) for w in shards]
    ran = [[p.relative_to(w) for p in r] for w, r in zip(shards, ran, strict=True)]
    assert sum(map(len, ran)) == len(order) and all(abs(len(r) - len(order) / 4) <= 1 for r in ran)
    assert not set(ran[0]) & set(ran[1]), "each cell runs in exactly one shard"

    assert main(["merge", *map(str, shards), "--workdir", str(tmp_path / "merged")]) == ExitCode.OK
    assert f"{len(order)} of {len(order)} runs" in capsys.readouterr().out
    assert _summary_json(tmp_path / "merged", capsys) == whole
    assert main(["badge", "--workdir", str(tmp_path / "merged"), "--out", str(tmp_path / "b.json")]) == 0


def test_a_missing_shard_is_named_and_the_merge_says_it_is_incomplete(
    demo: DemoRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in (1, 2):
        assert main(_run(demo, tmp_path / f"s{i}", "--shard", f"{i}/3")) == ExitCode.OK
    capsys.readouterr()
    code = main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--workdir", str(tmp_path / "m")])
    assert code == ExitCode.INCOMPLETE
    assert "planned runs have no result" in capsys.readouterr().err


def test_shards_of_different_experiments_are_refused_naming_what_differs(
    demo: DemoRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(demo, tmp_path / "a", "--shard", "1/2")) == ExitCode.OK
    assert main([*_run(demo, tmp_path / "b", "--shard", "2/2"), "--seed", "8"]) == ExitCode.OK
    capsys.readouterr()
    code = main(["merge", str(tmp_path / "a"), str(tmp_path / "b"), "--workdir", str(tmp_path / "m")])
    assert code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "ran a different experiment" in err and "seed: 7 -> 8" in err
    assert not (tmp_path / "m" / "runs").exists(), "nothing is merged from a mix"


def test_plan_batches_the_matrix_for_a_dynamic_strategy_matrix(
    demo: DemoRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = str(demo.path / ".docdelta" / "tasks")
    refs = ["--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha, "--tasks", tasks]
    assert main(["plan", *refs, "--repeats", "200", "--max-parallel", "1000"]) == ExitCode.OK
    plan = json.loads(capsys.readouterr().out)
    cells = len(list(Path(tasks).glob("*.yaml"))) * 3 * 200
    assert plan["cells"] == cells and plan["jobs"] == 256, "GitHub's 256-job limit"
    assert plan["matrix"]["include"][0] == {"shard": "1/256", "id": "1-of-256"}
    assert plan["cells_per_job"] * 256 >= cells
    assert main(["plan", *refs, "--max-parallel", "4"]) == ExitCode.OK
    plan = json.loads(capsys.readouterr().out)
    assert [j["shard"] for j in plan["matrix"]["include"]] == ["1/4", "2/4", "3/4", "4/4"]
    assert plan["max_parallel"] == 4
    assert main(["plan", *refs, "--base", demo.head_sha]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["evaluate"] is False


@pytest.mark.parametrize("text", ["0/4", "5/4", "2", "a/b"])
def test_a_bad_shard_is_a_usage_error_naming_the_flag(
    text: str, demo: DemoRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(demo, tmp_path / "w", "--shard", text)) == ExitCode.BAD_INPUT
    assert "--shard" in capsys.readouterr().err
    with pytest.raises(ValueError, match="I/N"):
        Shard.parse(text)
