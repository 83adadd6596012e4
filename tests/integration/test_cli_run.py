"""The whole pipeline through the real CLI: refs -> detection -> sealed checkouts -> local
sandbox -> agent -> scoring -> store -> scorecard, with real git and real subprocesses."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import sandbox_config
from gitrepo import GitRepo

from docdelta.cli import main
from docdelta.models import RunResult, RunStatus, Summary

TASK = """\
id: {id}
prompt: {prompt}
gold:
  commands: ["make check"]
gold_citations:
  - path: AGENTS.md
    lines: 2
    quote: make check
reviewed: {reviewed}
"""


def _project(tmp_path: Path, *, reviewed: bool = True, tasks: dict[str, str] | None = None) -> GitRepo:
    """A repo whose AGENTS.md gains the test command at head; tasks live in .docdelta/tasks."""
    repo = GitRepo.init(tmp_path / "proj")
    (tmp_path / "agent-bin").mkdir()
    task_files = {
        f".docdelta/tasks/{tid}.yaml": TASK.format(id=tid, prompt=prompt, reviewed=str(reviewed).lower())
        for tid, prompt in (tasks or {"test-cmd": "How do I run the tests?"}).items()
    }
    config = {".docdelta.yml": sandbox_config(tmp_path / "agent-bin")}
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\nbe nice\n", **config, **task_files})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    return repo


def _agent(tmp_path: Path, body: str) -> str:
    """A command agent: a Python script reading the prompt on stdin, cwd = the checkout."""
    script = tmp_path / "agent-bin" / "agent.py"
    script.write_text(textwrap.dedent(body))
    return f"{sys.executable} {script}"


def _run_args(repo: GitRepo, workdir: Path, agent_cmd: str, *extra: str) -> list[str]:
    return [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "command", "--agent-cmd", agent_cmd, *extra,
    ]  # fmt: skip


def _results(workdir: Path) -> list[RunResult]:
    return [
        RunResult.model_validate_json(p.read_text())
        for p in sorted(workdir.glob("runs/*/*/*/r*/result.json"))
    ]


def test_demo_shows_head_beating_base_and_none_and_a_tied_control(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "3"]) == 0
    assert "docdelta scorecard" in capsys.readouterr().out
    assert main(["report", "--workdir", str(tmp_path / "results"), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    by_task = {t.task: t for t in summary.tasks}
    assert len(_results(tmp_path / "results")) == 4 * 3 * 3
    control = by_task.pop("install-dev")
    assert control.head_vs_base.noise
    for task in by_task.values():
        assert (task.head_vs_base.value or 0) >= 0.3, task.task
        assert (task.head_vs_none.value or 0) >= 0.3, task.task


def test_rerun_reuses_complete_results_and_runs_only_missing_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "2"]) == 0
    first = {r.cell.key: r for r in _results(tmp_path / "results")}
    victims = sorted(tmp_path.glob("results/runs/*/run-tests/*/r1/result.json"))
    for path in victims:
        path.unlink()
    capsys.readouterr()
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "2"]) == 0
    assert f"({len(victims)} ran, {len(first) - len(victims)} reused)" in capsys.readouterr().err
    second = {r.cell.key: r for r in _results(tmp_path / "results")}
    assert second.keys() == first.keys()
    untouched = [k for k in first if not k.startswith("run-tests/") or not k.endswith("/r1")]
    assert all(second[k] == first[k] for k in untouched)  # never rewritten


def test_sigint_mid_matrix_keeps_finished_results_and_a_rerun_resumes(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    agent = _agent(
        tmp_path,
        """\
        import json, time
        time.sleep(0.4)
        print(json.dumps({"answer": "run make check", "commands": ["make check"]}))
        """,
    )
    workdir = tmp_path / "work"
    cmd = [sys.executable, "-m", "docdelta", *_run_args(repo, workdir, agent, "--repeats", "4")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(list(workdir.glob("runs/*/*/*/r*/result.json"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"rerun the same command to resume" in err
    saved = _results(workdir)  # every saved file is complete and valid
    assert 3 <= len(saved) < 12
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert f"({12 - len(saved)} ran, {len(saved)} reused)".encode() in done.stderr
    assert len(_results(workdir)) == 12


def test_spend_cap_stops_the_matrix_cleanly_and_says_so(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    agent = _agent(
        tmp_path,
        """\
        import json, os
        with open(os.environ["DOCDELTA_METRICS"], "w") as fh:
            json.dump({"cost_usd": 0.4, "tokens_in": 100, "tokens_out": 10}, fh)
        print(json.dumps({"answer": "make check", "commands": ["make check"]}))
        """,
    )
    workdir = tmp_path / "work"
    args = _run_args(repo, workdir, agent, "--repeats", "4", "--cap-usd", "1.0", "--reserve-usd", "0.3")
    proc = subprocess.run([sys.executable, "-m", "docdelta", *args], capture_output=True, check=False)
    assert proc.returncode == 1
    assert b"spend cap reached" in proc.stderr
    # 0.0+0.3, 0.4+0.3 fit under 1.0; 0.8+0.3 does not: exactly two runs, both saved.
    assert len(_results(workdir)) == 2


def test_agent_failures_are_recorded_not_crashes(tmp_path: Path) -> None:
    repo = _project(tmp_path, tasks={"prose": "Describe the project.", "hang": "Hang forever please."})
    agent = _agent(
        tmp_path,
        """\
        import sys, time
        prompt = sys.stdin.read()
        if "Hang forever" in prompt:
            time.sleep(60)
        print("I looked around but I will not answer in JSON.")
        """,
    )
    workdir = tmp_path / "work"
    args = _run_args(repo, workdir, agent, "--repeats", "1", "--conditions", "head", "--timeout", "1")
    assert main(args) == 0
    by_task = {r.cell.task: r for r in _results(workdir)}
    assert by_task["prose"].status is RunStatus.no_answer
    assert by_task["hang"].status is RunStatus.timeout
    for result in by_task.values():
        assert result.score is not None and result.score.value == 0.0
    transcript = (workdir / "runs" / "proj" / "prose" / "head" / "r1" / "transcript.txt").read_text()
    assert "I looked around but I will not answer in JSON." in transcript  # kept for a maintainer to read


def test_agent_sees_neither_gold_nor_conditions_nor_the_results(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    workdir = tmp_path / "work"
    agent = _agent(
        tmp_path,
        f"""\
        import json, os, pathlib
        root = pathlib.Path.cwd()
        seen = []
        for p in root.rglob("*"):
            if p.is_file():
                data = p.read_bytes()
                if b"gold_citations" in data or b"reviewed:" in data:
                    seen.append(str(p.relative_to(root)))
        leaks = [w for w in ("base", "head", "none") if w in str(root)]
        results_visible = pathlib.Path({str(workdir)!r}).exists()
        project_visible = pathlib.Path({str(repo.path)!r}).exists()
        print(json.dumps({{"answer": json.dumps([seen, leaks, results_visible, project_visible])}}))
        """,
    )
    assert main(_run_args(repo, workdir, agent, "--repeats", "1")) == 0
    for result in _results(workdir):
        assert result.outcome.answer is not None
        assert json.loads(result.outcome.answer.answer) == [[], [], False, False], result.cell.key
        assert result.isolation == "bwrap"


def test_unreviewed_tasks_are_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path, reviewed=False)
    agent = _agent(tmp_path, 'print(\'{"answer": "make check", "commands": ["make check"]}\')\n')
    args = _run_args(repo, tmp_path / "work", agent, "--repeats", "1", "--conditions", "head")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "test-cmd" in err and "--allow-unreviewed" in err
    assert main([*args, "--allow-unreviewed"]) == 0


def test_a_workdir_of_another_experiment_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    agent = _agent(tmp_path, 'print(\'{"answer": "make check"}\')\n')
    workdir = tmp_path / "work"
    assert main(_run_args(repo, workdir, agent, "--repeats", "1", "--conditions", "head")) == 0
    assert main(_run_args(repo, workdir, agent, "--repeats", "1", "--conditions", "head", "--seed", "9")) == 2
    assert "holds a different experiment" in capsys.readouterr().err


def test_no_instruction_change_means_nothing_to_evaluate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    repo.commit({"README.md": "# proj\nmore words\n"})
    args = _run_args(repo, tmp_path / "work", "true")
    assert main(args) == 0
    assert "nothing to evaluate" in capsys.readouterr().out
    assert not (tmp_path / "work" / "runs").exists()


def test_detect_json_lists_changed_files_with_families(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    assert main(["detect", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--json"]) == 0
    detection = json.loads(capsys.readouterr().out)
    assert [(c["path"], c["status"]) for c in detection["changed"]] == [("AGENTS.md", "modified")]
    assert "codex" in detection["changed"][0]["families"]


def test_badge_refuses_single_repeat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "1"]) == 0
    assert main(["badge", "--workdir", str(tmp_path / "results"), "--out", str(tmp_path / "b.json")]) == 2
    assert "--repeats 2" in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()


def test_schema_task_prints_a_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "task"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"id", "prompt", "gold", "gold_citations", "reviewed"} <= schema["properties"].keys()


@pytest.fixture(autouse=True)
def _no_ci_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain progress lines whatever the terminal, so stderr assertions are stable."""
    monkeypatch.setenv("CI", "1")
