"""The whole pipeline through the real CLI: refs -> detection -> sealed checkouts -> local
sandbox -> agent -> scoring -> store -> scorecard, with real git and real subprocesses."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clirun import run_args, saved_results
from gitrepo import GitRepo
from toolchain import sandbox_config

import docdelta
from docdelta.agents.models import RunStatus
from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.experiment.plan import plan_order
from docdelta.scorecard import power as power_module
from docdelta.scorecard.models import Summary

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


def test_demo_shows_head_beating_base_and_none_and_a_tied_control(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "3"]) == 0
    assert "docdelta scorecard" in capsys.readouterr().out
    assert main(["report", "--workdir", str(tmp_path / "results"), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    by_task = {t.task: t for t in summary.tasks}
    assert len(saved_results(tmp_path / "results")) == 4 * 3 * 3
    control = by_task.pop("install-dev")
    assert control.head_vs_base.noise
    for task in by_task.values():
        assert (task.head_vs_base.value or 0) >= 0.3, task.task
        assert (task.head_vs_none.value or 0) >= 0.3, task.task


def test_rerun_reuses_complete_results_and_runs_only_missing_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "2"]) == 0
    first = {r.cell.key: r for r in saved_results(tmp_path / "results")}
    victims = sorted(tmp_path.glob("results/runs/*/run-tests/*/r1/result.json"))
    for path in victims:
        path.unlink()
    capsys.readouterr()
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "2"]) == 0
    assert f"({len(victims)} ran, {len(first) - len(victims)} reused)" in capsys.readouterr().err
    second = {r.cell.key: r for r in saved_results(tmp_path / "results")}
    assert second.keys() == first.keys()
    untouched = [k for k in first if not k.startswith("run-tests/") or not k.endswith("/r1")]
    assert all(second[k] == first[k] for k in untouched)  # never rewritten


HANGS = """\
import json, select, sys
if "Hang forever" in sys.stdin.read():
    select.select([], [], [])  # blocks until the sandbox kills it
print(json.dumps({"answer": "run make check", "commands": ["make check"]}))
"""


def _cells_before_the_first_hang(seed: int, repeats: int) -> int:
    """How many quick cells the plan runs before the first `hang` cell: after that many
    progress lines the matrix is blocked in (or entering) a run that never ends by itself."""
    order = plan_order(["hang", "quick"], ["base", "head", "none"], repeats, seed)
    first = next(i for i, cell in enumerate(order) if cell.task == "hang")
    assert first >= 1, "pick a seed whose plan starts with a quick cell"
    return first


def _hanging_matrix(tmp_path: Path) -> tuple[list[str], int]:
    """A project whose `hang` task never answers, the command that runs its matrix, and how
    many cells the plan finishes before it blocks in the first hang cell."""
    repo = _project(tmp_path, tasks={"quick": "How do I run the tests?", "hang": "Hang forever please."})
    agent = f"{sys.executable} -c {shlex.quote(HANGS)}"
    args = run_args(repo, tmp_path / "work", agent, "--repeats", "1", "--seed", "4")
    return [sys.executable, "-m", "docdelta", *args], _cells_before_the_first_hang(seed=4, repeats=1)


def _interrupt_when_blocked(
    tmp_path: Path, cmd: list[str], finished: int, sig: signal.Signals
) -> tuple[int, bytes, list[bytes]]:
    """Run `cmd`, wait (on progress lines, not on time) until the cells before the first
    hang cell are done, then send `sig`: the matrix is blocked in a run that never ends by
    itself, so it cannot have finished first. Returns the exit code, stderr and the
    progress lines seen."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "CI": "1", "TMPDIR": str(tmp)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    seen: list[bytes] = []
    while len(seen) < finished:
        line = proc.stderr.readline()
        assert line, f"docdelta ended before {finished} runs: {b''.join(seen)!r}"
        if line.startswith(b"["):
            seen.append(line)
    proc.send_signal(sig)
    _, err = proc.communicate()
    assert list(tmp.iterdir()) == [], "every temporary file is removed on the way out"
    return proc.returncode, err, seen


def test_sigint_mid_matrix_keeps_finished_results_and_a_rerun_resumes(tmp_path: Path) -> None:
    cmd, finished = _hanging_matrix(tmp_path)
    code, err, first = _interrupt_when_blocked(tmp_path, cmd, finished, signal.SIGINT)
    assert code == ExitCode.INTERRUPTED, err
    assert b"rerun the same command to resume" in err
    saved = saved_results(tmp_path / "work")  # every saved file is complete and valid
    assert len(saved) == finished and all(r.status is RunStatus.ok for r in saved)
    # The rerun reuses every finished cell and goes on with the first unfinished one.
    code, err, again = _interrupt_when_blocked(tmp_path, cmd, finished, signal.SIGINT)
    assert code == ExitCode.INTERRUPTED, err
    assert [line.rsplit(b": ", 1)[-1].strip() for line in again] == [b"reused"] * finished
    assert [line.split(b"] ", 1)[1].split(b":")[0] for line in again] == [
        line.split(b"] ", 1)[1].split(b":")[0] for line in first
    ]
    assert saved_results(tmp_path / "work") == saved, "a complete result is never rewritten"


def test_sigterm_is_handled_like_sigint_with_exit_143(tmp_path: Path) -> None:
    cmd, finished = _hanging_matrix(tmp_path)
    code, err, _ = _interrupt_when_blocked(tmp_path, cmd, finished, signal.SIGTERM)
    assert code == ExitCode.TERMINATED, err
    assert b"terminated (SIGTERM)" in err and b"rerun the same command to resume" in err
    assert b"Traceback" not in err
    assert len(saved_results(tmp_path / "work")) == finished


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
    args = run_args(repo, workdir, agent, "--repeats", "4", "--cap-usd", "1.0", "--reserve-usd", "0.3")
    proc = subprocess.run([sys.executable, "-m", "docdelta", *args], capture_output=True, check=False)
    assert proc.returncode == 1
    assert b"spend cap reached" in proc.stderr
    # 0.0+0.3, 0.4+0.3 fit under 1.0; 0.8+0.3 does not: exactly two runs, both saved.
    assert len(saved_results(workdir)) == 2


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
    args = run_args(repo, workdir, agent, "--repeats", "1", "--conditions", "head", "--timeout", "1")
    assert main(args) == ExitCode.INFRA  # one run in two timed out: no verdict
    by_task = {r.cell.task: r for r in saved_results(workdir)}
    assert by_task["prose"].status is RunStatus.no_answer
    assert by_task["hang"].status is RunStatus.timeout
    for result in by_task.values():
        assert result.score is not None and result.score.value == 0.0
    transcript = (workdir / "runs" / "proj" / "prose" / "head" / "r1" / "transcript.txt").read_text()
    assert "I looked around but I will not answer in JSON." in transcript  # kept for a maintainer to read


def test_agent_sees_neither_gold_nor_conditions_nor_thesaved_results(tmp_path: Path) -> None:
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
    assert main(run_args(repo, workdir, agent, "--repeats", "1")) == 0
    for result in saved_results(workdir):
        assert result.outcome.answer is not None
        assert json.loads(result.outcome.answer.answer) == [[], [], False, False], result.cell.key
        assert result.isolation == "bwrap"


def test_unreviewed_tasks_are_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path, reviewed=False)
    agent = _agent(tmp_path, 'print(\'{"answer": "make check", "commands": ["make check"]}\')\n')
    args = run_args(repo, tmp_path / "work", agent, "--repeats", "1", "--conditions", "head")
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
    assert main(run_args(repo, workdir, agent, "--repeats", "1", "--conditions", "head")) == 0
    assert main(run_args(repo, workdir, agent, "--repeats", "1", "--conditions", "head", "--seed", "9")) == 2
    assert "holds a different experiment" in capsys.readouterr().err


def test_a_refused_resume_names_only_what_makes_the_experiment_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--noise-band judges runs, it does not change them: a resume may change it (and does), so
    the refusal of a resume that changed the seed too names the seed, not the band."""
    repo = _project(tmp_path)
    agent = _agent(tmp_path, 'print(\'{"answer": "make check"}\')\n')
    base = run_args(repo, tmp_path / "work", agent, "--repeats", "1", "--conditions", "head", "--seed", "7")
    assert main([*base, "--noise-band", "0.1"]) == 0
    capsys.readouterr()
    assert main([*base, "--noise-band", "0.2", "--seed", "9"]) == 2
    err = capsys.readouterr().err
    assert "differs in: seed: 7 -> 9)" in err and "noise_band" not in err


def test_a_resume_under_another_run_limit_is_refused_with_the_difference_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run allowed 600 s is not comparable with one allowed 300 s: the limits and docdelta's
    version are part of the manifest, and a resume that changes one names it."""
    repo = _project(tmp_path)
    agent = _agent(tmp_path, 'print(\'{"answer": "make check"}\')\n')
    workdir = tmp_path / "work"
    base = run_args(repo, workdir, agent, "--repeats", "1", "--conditions", "head")
    assert main(base) == 0
    manifest = json.loads((workdir / "manifest.json").read_text())
    assert manifest["bounds"] == {
        "timeout_s": 600.0, "turn_cap": None, "run_budget_usd": None,
        "gateway_budget": None, "upstreams": None,
    }  # fmt: skip
    assert manifest["docdelta_version"] == docdelta.__version__
    capsys.readouterr()

    assert main([*base, "--timeout", "300"]) == 2
    assert "differs in: bounds.timeout_s: 600.0 -> 300.0" in capsys.readouterr().err
    assert main([*base, "--reserve-usd", "0.5"]) == 2
    assert "bounds.run_budget_usd: None -> 0.5" in capsys.readouterr().err
    # what decides only which cells run now (the cap, retries) may change on resume
    assert main([*base, "--cap-usd", "5", "--infra-retries", "0"]) == 0


def test_no_instruction_change_means_nothing_to_evaluate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    repo.commit({"README.md": "# proj\nmore words\n"})
    args = run_args(repo, tmp_path / "work", "true")
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


def test_a_source_whose_files_hold_no_gold_quote_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--source` at a commit whose files no condition receives scored correct
    answers as misses, silently. The gold quotes head's README; with `--source base` every
    condition holds base's README, so the run stops before any agent starts."""
    repo = GitRepo.init(tmp_path / "proj")
    task = TASK.format(id="install", prompt="How do I install it?", reviewed="true")
    task = task.replace("path: AGENTS.md", "path: README.md").replace("quote: make check", "quote: uv sync")
    repo.commit(
        {"README.md": "# proj\npip install .\n", "AGENTS.md": "be nice\n", ".docdelta/tasks/i.yaml": task}
    )
    repo.commit({"README.md": "# proj\nuv sync\n", "AGENTS.md": "Run `make check`.\n"})
    workdir = tmp_path / "work"
    assert main(run_args(repo, workdir, "true", "--source", "base")) == 2
    err = capsys.readouterr().err
    assert "gold_citations[0] quotes README.md: 'uv sync'" in err and "stands in no condition" in err
    assert not saved_results(workdir)
    assert main(run_args(repo, tmp_path / "ok", "true", "--repeats", "1")) == 0  # source head: it stands


def test_repeats_auto_runs_rounds_until_the_task_is_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that finds the test command only where AGENTS.md names it (head): the round
    loop stops once the task's improvement is significant, well before the cap of 12."""
    repo = _project(tmp_path)
    agent = _agent(
        tmp_path,
        """\
        import json, pathlib
        docs = pathlib.Path("AGENTS.md")
        known = docs.exists() and "make check" in docs.read_text()
        answer = {"answer": "make check", "commands": ["make check"]} if known else {"answer": "no idea"}
        print(json.dumps(answer))
        """,
    )
    workdir = tmp_path / "work"
    assert main(run_args(repo, workdir, agent, "--repeats", "auto", "--max-repeats", "12")) == 0
    captured = capsys.readouterr()
    out = captured.out
    # before the first run: what this plan can see
    (power,) = [line for line in captured.err.splitlines() if line.startswith("docdelta: power: ")]
    looks = "looks after rounds 2 (allocation only), 5, 8, 12"
    assert power.startswith(f"docdelta: power: 1 task, auto, {looks}: ")
    assert (workdir / "power.json").is_file()  # kept for the next run of this design
    results = saved_results(workdir)
    rounds = max(r.cell.repeat for r in results)
    assert 2 < rounds < 12 and len(results) == 3 * rounds  # base, head, none per round
    assert "**Verdict: improved**" in out and f"auto, {looks}" in out
    assert "planned run" not in out  # the rounds the loop did not need are not "missing"
    assert f"a fixed design at the cap runs 12 each): test-cmd {rounds} (improved)" in out

    # the stored workdir reports the same decision without rerunning anything: no simulation,
    # the power line comes from the run's power.json
    def no_simulation(*args: object, **kwargs: object) -> None:
        raise AssertionError("docdelta report ran a power simulation")

    monkeypatch.setattr(power_module, "simulate", no_simulation)
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert summary.power is not None and f"docdelta: {summary.power.text}" == power
    assert summary.verdict is not None and summary.verdict.kind == "improved"
    assert summary.tasks[0].decision is not None and summary.tasks[0].decision.rounds == rounds


def test_repeats_must_be_a_number_or_auto(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _project(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(run_args(repo, tmp_path / "work", "true", "--repeats", "many"))
    assert exc.value.code == 2
    assert "expected a number of repeats or 'auto', got 'many'" in capsys.readouterr().err
