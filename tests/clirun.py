"""`docdelta run` as the CLI tests drive it: the argument list and the results it saved."""

from __future__ import annotations

from pathlib import Path

from gitrepo import GitRepo

from docdelta.models import RunResult


def run_args(repo: GitRepo, workdir: Path, agent_cmd: str, *extra: str) -> list[str]:
    """`docdelta run` of a command agent on `repo`'s last commit against its parent."""
    return [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "command", "--agent-cmd", agent_cmd, *extra,
    ]  # fmt: skip


def saved_results(workdir: Path) -> list[RunResult]:
    """Every complete result under `workdir`, in path order."""
    return [
        RunResult.model_validate_json(p.read_text())
        for p in sorted(workdir.glob("runs/*/*/*/r*/result.json"))
    ]
