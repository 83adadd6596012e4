"""Faults and bad input never pass as results, through the real CLI: each is refused up
front with exit 2 naming what is wrong, or ends without a verdict; none is a traceback.
Real git, real subprocesses, the local sandbox."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import run_args, saved_results
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.agents.models import RunStatus
from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.results.models import RunResult
from docdelta.results.store import ResultStore
from docdelta.scorecard.models import Summary

TASK = """\
id: {id}
prompt: How do I run the tests?
gold:
  commands: ["make check"]
gold_citations:
  - path: AGENTS.md
    lines: 2
    quote: make check
reviewed: true
"""
ANSWERS = 'import json; print(json.dumps({"answer": "run make check", "commands": ["make check"]}))'


def _project(tmp_path: Path, tasks: tuple[str, ...] = ("test-cmd",)) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    files = {f".docdelta/tasks/{t}.yaml": TASK.format(id=t) for t in tasks}
    files[".docdelta.yml"] = sandbox_config()  # the agent runs this interpreter, named read-only
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\nbe nice\n", **files})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    return repo


def _python(code: str) -> str:
    return f"{sys.executable} -c {shlex.quote(code)}"


@pytest.fixture(autouse=True)
def _ci_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")


# ------------------------------------------------------------ workdir in the repository
def test_a_workdir_inside_the_repository_works_and_stays_hidden(tmp_path: Path) -> None:
    """The README's own `--repo . --workdir .docdelta-work`: every run used to be agent_error."""
    repo = _project(tmp_path)
    workdir = repo.path / ".docdelta-work"
    probe = (
        "import json, os; "
        f"seen = os.path.exists({str(workdir / 'manifest.json')!r}); "
        'print(json.dumps({"answer": f"run make check (saw the workdir: {seen})", '
        '"commands": ["make check"]}))'
    )
    assert main(run_args(repo, workdir, _python(probe), "--repeats", "1")) == 0
    results = saved_results(workdir)
    assert len(results) == 3
    for r in results:
        assert r.status is RunStatus.ok, r.outcome.error
        assert r.outcome.answer is not None and "saw the workdir: False" in r.outcome.answer.answer


# ------------------------------------------------------------ broken evaluations
def test_a_matrix_of_agent_errors_leads_with_it_gives_no_verdict_and_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One round (`--repeats 1`): a plan of more rounds stops after the first when it fails alike
    (test_command_agent_files.py)."""
    repo = _project(tmp_path)
    crashes = _python("import sys; sys.exit('the agent crashed')")
    assert main(run_args(repo, tmp_path / "work", crashes, "--repeats", "1")) == ExitCode.INFRA
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("## docdelta scorecard: no verdict")
    lead = next(line for line in lines if line.startswith("> "))
    read = re.sub(r"\\(.)", r"\1", lead)  # as GitHub shows it: the quoted error is escaped
    assert "This evaluation is broken" in read and "3 of 3 runs" in read and "3 agent_error" in read
    assert "The most common error (3 of 3 failed runs)" in read and "the agent crashed" in read
    assert lines.index(lead) < next(i for i, line in enumerate(lines) if line.startswith("**Verdict"))
    assert "no change" not in captured.out
    assert "no verdict" in captured.err
    assert main(["report", "--workdir", str(tmp_path / "work"), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert summary.verdict is None and summary.faults == {"agent_error": 3}


def test_each_arms_timeouts_are_counted_and_a_timed_out_answer_scores_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An agent that prints the right answer and then hangs (here: in head) is `timeout`,
    scored 0, and counted per arm."""
    repo = _project(tmp_path, tasks=("a", "b"))
    answers_then_hangs_in_head = (
        "import json, select; "
        'print(json.dumps({"answer": "run make check", "commands": ["make check"]}), flush=True); '
        "'make check' in open('AGENTS.md').read() and select.select([], [], [])"
    )
    args = run_args(repo, tmp_path / "work", _python(answers_then_hangs_in_head), "--repeats", "1")
    assert main([*args, "--conditions", "base,head", "--timeout", "2"]) == ExitCode.INFRA
    out = capsys.readouterr().out
    timeouts = [r for r in saved_results(tmp_path / "work") if r.status is RunStatus.timeout]
    assert sorted(r.cell.key for r in timeouts) == ["a/head/r1", "b/head/r1"]
    for r in timeouts:
        assert r.outcome.answer is not None, "it did answer before it hung"
        assert r.score is not None and r.score.value == 0.0
    assert "| timeouts | agent errors | infra errors |" in out
    rows = [line for line in out.splitlines() if line.startswith(("| base |", "| head |"))]
    base_row, head_row = rows
    assert base_row.endswith("| 0 | 0 | 0 |") and head_row.endswith("| 2 | 0 | 0 |"), rows


# ------------------------------------------------------------ the agent command
@pytest.mark.parametrize(
    ("cmd", "named"),
    [("/nonexistent/agent --json", "/nonexistent/agent"), ("./agent 'unbalanced", "./agent 'unbalanced")],
)
def test_an_agent_command_that_cannot_start_is_refused_before_the_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cmd: str, named: str
) -> None:
    repo = _project(tmp_path)
    assert main(run_args(repo, tmp_path / "work", cmd, "--repeats", "1")) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert saved_results(tmp_path / "work") == []


# ------------------------------------------------------------ numbers
@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--cap-usd", "-1"),
        ("--cap-usd", "nan"),
        ("--reserve-usd", "-100"),
        ("--timeout", "0"),
        ("--timeout", "nan"),
        ("--timeout", "inf"),
    ],
)
def test_bad_limits_are_refused_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    repo = _project(tmp_path)
    assert main(run_args(repo, tmp_path / "work", _python(ANSWERS), flag, value)) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{flag} = " in err and "Traceback" not in err
    assert saved_results(tmp_path / "work") == []


@pytest.mark.parametrize(("flag", "value"), [("--repeats", "0"), ("--conditions", "base,base")])
def test_bad_repeats_and_conditions_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    repo = _project(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(run_args(repo, tmp_path / "work", _python(ANSWERS), flag, value))
    assert exit_.value.code == ExitCode.BAD_INPUT
    assert f"argument {flag}:" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_a_huge_plan_shows_its_size_and_needs_yes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _project(tmp_path)
    args = run_args(repo, tmp_path / "work", _python(ANSWERS), "--repeats", "100000", "--reserve-usd", "0.5")
    assert main(args) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "the plan is 300,000 runs (1 task x 3 conditions x 100,000 repeats)" in err
    assert "$150,000.00" in err and "hours" in err and "--yes" in err
    assert saved_results(tmp_path / "work") == []


# ------------------------------------------------------------ the workdir
def test_a_second_run_on_a_held_workdir_is_refused_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    workdir = tmp_path / "work"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(workdir)], stdout=subprocess.PIPE, stdin=subprocess.PIPE
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == b"held\n"
    try:
        assert main(run_args(repo, workdir, _python(ANSWERS), "--repeats", "1")) == ExitCode.BAD_INPUT
        err = capsys.readouterr().err
        assert f"in use by another docdelta run (pid {holder.pid} on host " in err and "started 20" in err
    finally:
        holder.stdin.close()  # the holder exits on EOF, releasing the lock
        holder.wait()
    assert main(run_args(repo, workdir, _python(ANSWERS), "--repeats", "1")) == 0


HOLD_LOCK = """\
import sys
from pathlib import Path
from docdelta.results.store import ResultStore
with ResultStore(Path(sys.argv[1])).lock():
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_corrupt_result_is_set_aside_and_its_cell_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    workdir = tmp_path / "work"
    args = run_args(repo, workdir, _python(ANSWERS), "--repeats", "1")
    assert main(args) == 0
    victim = next(workdir.glob("runs/*/*/head/r1/result.json"))
    victim.write_text('{"schema_version": 1, "cell": ')  # a torn write, a disk fault
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "(1 ran, 2 reused)" in err and "kept as corrupt-1.json" in err
    assert (victim.parent / "corrupt-1.json").read_text() == '{"schema_version": 1, "cell": '
    assert RunResult.model_validate_json(victim.read_text()).status is RunStatus.ok


# ------------------------------------------------------------ tracebacks
def test_badge_to_a_directory_or_a_read_only_place_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "2"]) == 0
    results = str(tmp_path / "results")
    (tmp_path / "a-file").write_text("x")
    # sysfs refuses new files even to root: a read-only place on every Linux machine
    places = (tmp_path, tmp_path / "a-file" / "badge.json", Path("/sys/docdelta-badge.json"))
    capsys.readouterr()
    for out in places:
        assert main(["badge", "--workdir", results, "--out", str(out)]) == ExitCode.BAD_INPUT
        err = capsys.readouterr().err
        assert f"cannot write the badge to {out}" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["schema", "task"], ["report", "--workdir", "{results}"]])
def test_a_reader_that_closes_the_pipe_ends_docdelta_cleanly(tmp_path: Path, command: list[str]) -> None:
    """`docdelta report | head`: the reader's end is closed before docdelta writes a byte."""
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "2"]) == 0
    argv = [a.format(results=tmp_path / "results") for a in command]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "docdelta", *argv], stdout=write_end, stderr=subprocess.PIPE, check=False
        )
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""


def test_detect_reads_a_diff_of_a_latin1_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    diff = tmp_path / "latin1.diff"
    diff.write_bytes(
        b"diff --git a/AGENTS.md b/AGENTS.md\n--- a/AGENTS.md\n+++ b/AGENTS.md\n"
        b"@@ -1 +1 @@\n-caf\xe9 au lait\n+caf\xe9 cr\xe8me\n"
    )
    assert main(["detect", "--diff", str(diff), "--json"]) == 0
    assert [c["path"] for c in json.loads(capsys.readouterr().out)["changed"]] == ["AGENTS.md"]


def test_nested_task_files_are_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _project(tmp_path)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    args = run_args(repo, tmp_path / "work", _python(ANSWERS))
    args[args.index("--tasks") + 1] = str(tasks)
    assert main(args) == ExitCode.BAD_INPUT
    assert "deep.json: nested too deeply" in capsys.readouterr().err


def test_store_lock_is_released_when_the_holder_dies(tmp_path: Path) -> None:
    """An flock: a crashed run never leaves a stale lock behind."""
    workdir = tmp_path / "work"
    crashed = subprocess.run(
        [sys.executable, "-c", HOLD_LOCK.replace("sys.stdin.read()", "os._exit(9)").replace(
            "import sys", "import os, sys"
        ), str(workdir)],
        capture_output=True,
        check=False,
    )  # fmt: skip
    assert crashed.returncode == 9
    with ResultStore(workdir).lock():
        pass
