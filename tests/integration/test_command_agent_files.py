"""A command agent works the first time: the files its command names are shown to the
sandbox read-only (each file, never its folder), the bundled example agent runs as
documented, and `agent-check` shows what the agent received and what was parsed."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.results.models import RunResult

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_AGENT = "examples/agents/grep_agent.py"

TASK = """\
id: test-cmd
prompt: How do I run the tests before I push?
gold:
  commands: ["make check"]
reviewed: true
"""

PROBE = """\
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
try:
    open(os.path.abspath(__file__), "a").close()
    writable = "writable"
except OSError:
    writable = "read-only"
sibling = "sibling visible" if os.path.exists(os.path.join(here, "secret.txt")) else "sibling hidden"
print("thinking...")
print(json.dumps({"answer": f"{writable}; {sibling}", "commands": ["make check"]}))
"""


def _project(tmp_path: Path) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\n", ".docdelta/tasks/test-cmd.yaml": TASK})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    return repo


def _run(repo: GitRepo, workdir: Path, cmd: str) -> int:
    return main([
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir), "--repeats", "1",
        "--agent", "command", "--agent-cmd", cmd, "--conditions", "head",
    ])  # fmt: skip


def _answers(workdir: Path) -> list[str]:
    results = [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/**/result.json")]
    return [r.outcome.answer.answer for r in results if r.outcome.answer is not None]


def _agent_outside(tmp_path: Path) -> Path:
    folder = tmp_path / "my-agents"
    folder.mkdir()
    (folder / "secret.txt").write_text("not for the agent\n")
    agent = folder / "agent.py"
    agent.write_text(PROBE)
    return agent


def test_a_script_named_by_absolute_path_runs_read_only_without_its_folder(tmp_path: Path) -> None:
    agent = _agent_outside(tmp_path)
    repo = _project(tmp_path)
    assert _run(repo, tmp_path / "work", f"python3 {agent}") == 0
    assert _answers(tmp_path / "work") == ["read-only; sibling hidden"]


def test_a_relative_executable_from_the_working_directory_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _agent_outside(tmp_path)
    script = agent.with_name("agent.sh")
    script.write_text(f'#!/bin/sh\nexec python3 "$(dirname "$0")/{agent.name}"\n')
    script.chmod(0o755)
    repo = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    # agent.sh is shown, agent.py beside it is not: the script's own reference fails, told plainly.
    assert _run(repo, tmp_path / "work", "./my-agents/agent.sh") == 3
    assert _answers(tmp_path / "work") == []
    script.write_text(f"#!/bin/sh\nexec python3 {agent}\n")
    assert _run(repo, tmp_path / "work2", f"./my-agents/agent.sh {agent}") == 0
    assert _answers(tmp_path / "work2") == ["read-only; sibling hidden"]


def test_a_file_in_the_tasks_directory_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "test-cmd.yaml").write_text(TASK)
    (tasks / "agent.py").write_text(PROBE)
    code = main([
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--tasks", str(tasks),
        "--workdir", str(tmp_path / "work"), "--agent", "command", "--agent-cmd", f"python3 {tasks}/agent.py",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert f"names {tasks}/agent.py, which is in the tasks directory" in err
    assert "Traceback" not in err


def test_the_example_agent_runs_as_documented(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _project(tmp_path)
    monkeypatch.chdir(ROOT)
    assert _run(repo, tmp_path / "work", f"python3 {EXAMPLE_AGENT}") == 0
    (result,) = [
        RunResult.model_validate_json(p.read_text()) for p in (tmp_path / "work").glob("runs/**/result.json")
    ]
    assert result.outcome.answer is not None
    assert result.outcome.answer.commands == ["make check"]
    assert result.outcome.answer.citations[0].path == "AGENTS.md"
    assert result.outcome.metrics.files_read == ["AGENTS.md"]


def test_agent_check_shows_what_the_agent_received_and_what_was_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("DOCDELTA_SECRET_PROBE", "value-never-shown")
    tasks = str(repo.path / ".docdelta/tasks")
    code = main(
        ["agent-check", "--repo", str(repo.path), "--tasks", tasks, "--agent-cmd", f"python3 {EXAMPLE_AGENT}"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"host files shown read-only: {ROOT / EXAMPLE_AGENT}" in out
    assert "How do I run the tests before I push?" in out  # the prompt
    assert "DOCDELTA_METRICS" in out and "PATH" in out  # env names ...
    assert "value-never-shown" not in out and "DOCDELTA_SECRET_PROBE" not in out  # ... never the host's
    assert "   AGENTS.md" in out and "   README.md" in out  # the files it sees
    assert ".docdelta/tasks" not in out  # never the gold
    assert '"make check"' in out and "status: ok" in out


def test_agent_check_names_a_script_given_by_its_absolute_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The path the user typed is already the one the sandbox shows: the file is still listed."""
    agent = _agent_outside(tmp_path)
    repo = _project(tmp_path)
    tasks = str(repo.path / ".docdelta/tasks")
    code = main(
        ["agent-check", "--repo", str(repo.path), "--tasks", tasks, "--agent-cmd", f"python3 {agent}"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"== host files shown read-only: {agent}\n" in out
    assert "read-only; sibling hidden" in out


def test_agent_check_says_when_no_host_file_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    tasks = str(repo.path / ".docdelta/tasks")
    code = main(["agent-check", "--repo", str(repo.path), "--tasks", tasks, "--agent", "fake"])
    out = capsys.readouterr().out
    assert code == 0
    assert "== host files shown read-only: none\n" in out


def test_agent_check_names_the_problem_of_an_agent_without_an_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    agent = tmp_path / "mute.py"
    agent.write_text("import sys\nprint('I forgot the JSON \\x1b[2J')\nsys.exit(0)\n")
    tasks = str(repo.path / ".docdelta/tasks")
    code = main(
        ["agent-check", "--repo", str(repo.path), "--tasks", tasks, "--agent-cmd", f"python3 {agent}"]
    )
    out = capsys.readouterr().out
    assert code == 2
    assert "status: no_answer" in out
    assert "problem: no JSON object in the agent's output" in out
    assert "\x1b" not in out and "\\x1b[2J" in out  # the agent's escape sequence is shown, not obeyed


def test_agent_check_names_the_tasks_for_an_unknown_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    tasks = str(repo.path / ".docdelta/tasks")
    code = main(
        ["agent-check", "--repo", str(repo.path), "--tasks", tasks, "--task", "nope", "--agent-cmd", "true"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--task nope" in err and "test-cmd" in err


def test_an_interpreter_the_sandbox_shows_anyway_is_left_where_it_is(tmp_path: Path) -> None:
    """A virtualenv's `python3` is a link that needs its folder: named in `sandbox.paths`, it
    stays as named (binding its target alone would leave it without its library)."""
    agent = _agent_outside(tmp_path)
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({
        "README.md": "# proj\n", "AGENTS.md": "# Agents\n", ".docdelta/tasks/test-cmd.yaml": TASK,
        ".docdelta.yml": sandbox_config(),
    })  # fmt: skip
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    assert _run(repo, tmp_path / "work", f"{sys.executable} {agent}") == 0
    assert _answers(tmp_path / "work") == ["read-only; sibling hidden"]


def test_an_inline_program_is_not_taken_for_a_file(tmp_path: Path) -> None:
    """`python3 -c '<source>'`: a word too long (or too odd) to be a file name stays an argument."""
    repo = _project(tmp_path)
    source = "import json\n" + "# padding\n" * 600 + 'print(json.dumps({"answer": "inline"}))\n'
    assert _run(repo, tmp_path / "work", f"/usr/bin/python3 -c {shlex.quote(source)}") == 0
    assert _answers(tmp_path / "work") == ["inline"]


def test_a_mistyped_script_path_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python3 /nonexistent/agent.py`: the interpreter exists, its script does not. Found in
    the sandbox before the matrix, not as "can't open file" in every run's result.json."""
    repo = _project(tmp_path)
    missing = tmp_path / "nowhere" / "agent.py"
    code = _run(repo, tmp_path / "work", f"python3 {missing}")
    err = capsys.readouterr().err
    assert code == 2
    assert f"names {missing}, which the sandbox cannot find" in err
    assert "Traceback" not in err
    assert not list((tmp_path / "work").glob("runs/**/result.json"))


def test_a_script_in_the_tasks_folder_inside_the_repository_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tasks folder usually sits in the repository (`.docdelta/tasks`): a file there is
    refused for what it is beside (the gold), not used as a file of the checkout."""
    repo = _project(tmp_path)
    (repo.path / ".docdelta/tasks/agent.py").write_text(PROBE)
    monkeypatch.chdir(repo.path)
    code = _run(repo, tmp_path / "work", "python3 .docdelta/tasks/agent.py")
    err = capsys.readouterr().err
    assert code == 2
    assert "names .docdelta/tasks/agent.py, which is in the tasks directory" in err
    assert not list((tmp_path / "work").glob("runs/**/result.json"))


FAILING = """\
import sys
sys.stdin.read()
sys.exit("agent: cannot reach the model at http://localhost:9")
"""


def test_a_matrix_whose_first_round_fails_alike_stops_and_quotes_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every run of the first round failing with one error will not go better in the next
    23: the matrix stops there, says the error, and keeps no result (the failed runs are set
    aside), so the corrected command can run in the same workdir."""
    repo = GitRepo.init(tmp_path / "proj")
    second = TASK.replace("test-cmd", "test-two")
    tasks = {".docdelta/tasks/test-cmd.yaml": TASK, ".docdelta/tasks/test-two.yaml": second}
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\n", **tasks})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    agent = tmp_path / "failing.py"
    agent.write_text(FAILING)
    work = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(work), "--repeats", "3",
        "--agent", "command", "--agent-cmd", f"python3 {agent}", "--conditions", "base,head",
    ]  # fmt: skip
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert "all 4 runs of the first round failed with the same error" in err
    assert "agent: cannot reach the model at http://localhost:9" in err
    assert len(list(work.glob("runs/**/result.json"))) == 0
    assert len(list(work.glob("runs/**/agent_error-1.json"))) == 4
    agent.write_text(PROBE)
    assert main(args) == 0
    assert len(_answers(work)) == 12


def test_a_refused_command_leaves_a_workdir_the_corrected_one_can_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal comes after the plan is written (its check runs in a sandbox on a sealed
    checkout); a workdir that holds no result is planned anew, not "a different experiment"."""
    repo = _project(tmp_path)
    work = tmp_path / "work"
    assert _run(repo, work, "/nonexistent/agent") == 2
    capsys.readouterr()
    agent = _agent_outside(tmp_path)
    assert _run(repo, work, f"python3 {agent}") == 0, capsys.readouterr().err
    assert _answers(work) == ["read-only; sibling hidden"]


def test_a_workdir_with_results_refuses_another_command_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    agent = _agent_outside(tmp_path)
    work = tmp_path / "work"
    assert _run(repo, work, f"python3 {agent}") == 0
    capsys.readouterr()
    assert _run(repo, work, f"python3 -B {agent}") == 2
    err = capsys.readouterr().err
    assert f"agent command: 'python3 {agent}' -> 'python3 -B {agent}'" in err
    assert "cmd-" not in err
