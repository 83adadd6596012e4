"""The Docker sandbox shows a command agent's own file read-only, as the local one does: each
file the command names is bound at its absolute path, never its folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import GitRepo
from toolchain import MAKE_CHECK_TASK

from docdelta.cli.main import main
from docdelta.results.models import RunResult

pytestmark = pytest.mark.docker


PROBE = """\
import json, os
here = os.path.dirname(os.path.abspath(__file__))
try:
    open(os.path.abspath(__file__), "a").close()
    writable = "writable"
except OSError:
    writable = "read-only"
sibling = "sibling visible" if os.path.exists(os.path.join(here, "secret.txt")) else "sibling hidden"
print(json.dumps({"answer": f"{writable}; {sibling}", "commands": ["make check"]}))
"""


def test_a_script_named_by_absolute_path_runs_read_only_without_its_folder(
    tmp_path: Path, base_image: str
) -> None:
    folder = tmp_path / "my-agents"
    folder.mkdir()
    (folder / "secret.txt").write_text("not for the agent\n")
    agent = folder / "agent.py"
    agent.write_text(PROBE)
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({
        "README.md": "# proj\n", "AGENTS.md": "# Agents\n", ".docdelta/tasks/test-cmd.yaml": MAKE_CHECK_TASK,
        ".docdelta.yml": f"docker:\n  base: {base_image}\n",
    })  # fmt: skip
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir), "--repeats", "1",
        "--agent", "command", "--agent-cmd", f"python3 {agent}", "--conditions", "head",
        "--sandbox", "docker",
    ]  # fmt: skip
    assert main(args) == 0
    (result,) = [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/**/result.json")]
    assert result.isolation.startswith("docker")
    assert result.outcome.answer is not None
    assert result.outcome.answer.answer == "read-only; sibling hidden"
