"""Runs of the real agent CLIs recorded in tests/fixtures/agents/<agent>/<case>/ (their stdout,
stderr when it mattered, and `exec.json` with the exit code and duration), and the stand-in
sandbox their adapters parse them against."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from docdelta.sandbox.base import ExecResult, Sandbox

FIXTURES = Path(__file__).parent / "fixtures" / "agents"


def recorded_run(agent: str, case: str) -> ExecResult:
    """One recorded exec: stdout from `stdout.jsonl` (event streams) or `stdout.json` (one
    output object), stderr from `stderr.txt` where the recording kept it."""
    folder = FIXTURES / agent / case
    meta = json.loads((folder / "exec.json").read_text())
    stdout = next(folder / name for name in ("stdout.jsonl", "stdout.json") if (folder / name).exists())
    stderr = folder / "stderr.txt"
    return ExecResult(
        meta["exit_code"],
        stdout.read_bytes(),
        stderr.read_bytes() if stderr.exists() else b"",
        meta["duration_s"],
    )


def recording_sandbox(workspace: str = "/workspace/repo") -> Sandbox:
    """Only what an adapter reads: the paths the CLI saw when it was recorded."""
    return cast(Sandbox, SimpleNamespace(workspace=workspace, tools_dir="/workspace/tools"))
