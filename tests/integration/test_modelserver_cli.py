"""`python3 -m modelserver` as it runs in a minimal container: the system python3
with no site-packages (`-S`) and only `site_files()` on its path, so any import beyond the
stdlib and its own package would fail here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from modelserver.script import Script, TextTurn, ToolTurn, site_files
from modelserver.server import READY

PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for rel, data in site_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    return tmp_path


def serve(site: Path, *args: str, stdin: str = "") -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [PYTHON, "-S", "-m", "modelserver", "--port", "0", *args],
        cwd=site,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    process.stdin.write(stdin)
    process.stdin.close()
    return process


@pytest.fixture
def processes(site: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def test_serves_a_script_from_stdin_with_only_the_stdlib(
    site: Path, processes: list[subprocess.Popen[str]]
) -> None:
    script = Script(name="cli", model="scripted-1", turns=[ToolTurn.shell("ls"), TextTurn(text="bye")])
    process = serve(site, stdin=script.model_dump_json(exclude_none=True))
    processes.append(process)
    assert process.stderr is not None
    line = process.stderr.readline()
    assert line.startswith(READY), line
    url = line.removeprefix(READY).strip()

    tools = [
        {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}
    ]
    request = {"model": "x", "max_tokens": 9, "stream": True, "tools": tools, "messages": []}
    stream = httpx.post(f"{url}/v1/messages?beta=true", json=request, headers={"x-api-key": "k"}).text
    events = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]
    assert events[0]["message"]["model"] == "scripted-1"
    partial = "".join(
        e["delta"].get("partial_json", "") for e in events if e["type"] == "content_block_delta"
    )
    assert json.loads(partial) == {"command": "ls"}
    answer = httpx.post(f"{url}/chat/completions", json={"model": "x", "messages": []}).json()
    assert answer["choices"][0]["message"]["content"] == "bye"

    log = httpx.get(f"{url}/_docdelta/requests").json()
    assert [(r["path"], r["turn"]) for r in log["requests"]] == [
        ("/v1/messages?beta=true", 0),
        ("/chat/completions", 1),
    ]
    assert "x-api-key" not in log["requests"][0]["headers"]


def test_bad_script_file_exits_2_naming_the_file(site: Path, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps({"name": "b", "turns": [{"say": "hi"}]}))
    process = serve(site, "--script", str(bad))
    assert process.wait(timeout=30) == 2
    assert process.stderr is not None
    err = process.stderr.read()
    assert "broken.json" in err and "script 'b' turn 0" in err
