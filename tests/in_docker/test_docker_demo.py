"""The demo matrix end to end on the Docker provider gives the same scores as on the
local sandbox: the provider changes how a run is isolated, never what it measures."""

from __future__ import annotations

from pathlib import Path

import pytest

from docdelta.cli.main import main
from docdelta.results.models import RunResult

pytestmark = pytest.mark.docker


def _scores(workdir: Path) -> dict[str, tuple[float | None, str]]:
    found = {}
    for path in workdir.glob("results/runs/*/*/*/r*/result.json"):
        result = RunResult.model_validate_json(path.read_text())
        found[result.cell.key] = (result.score.value if result.score else None, result.isolation)
    return found


def test_demo_on_docker_scores_exactly_like_local(tmp_path: Path, base_image: str) -> None:
    assert base_image == "docdelta-base:latest", "the demo builds its image from the config's default base"
    assert main(["demo", "--workdir", str(tmp_path / "local"), "--repeats", "2"]) == 0
    assert main(["demo", "--workdir", str(tmp_path / "docker"), "--repeats", "2", "--sandbox", "docker"]) == 0
    local, docker = _scores(tmp_path / "local"), _scores(tmp_path / "docker")
    assert len(local) == 4 * 3 * 2
    assert {k: v[0] for k, v in docker.items()} == {k: v[0] for k, v in local.items()}
    assert {v[1] for v in docker.values()} == {"docker-none"}
    assert {v[1] for v in local.values()} == {"bwrap"}
