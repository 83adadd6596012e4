"""The forecast before a matrix starts, through the real CLI: a command
agent that reports a cost, with and without earlier results of its own in the workdir.
The Action's job summary is covered in tests/integration/test_cache.py."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from clirun import run_args, saved_results
from gitrepo import GitRepo
from toolchain import MAKE_CHECK_TASK, sandbox_config

from docdelta.cli.main import main
from docdelta.experiment.forecast import Forecast

AGENT = """\
import json, os
with open(os.environ["DOCDELTA_METRICS"], "w") as fh:
    json.dump({"cost_usd": 0.25}, fh)
print(json.dumps({"answer": "make check", "commands": ["make check"]}))
"""


def _project(tmp_path: Path) -> tuple[GitRepo, str]:
    repo = GitRepo.init(tmp_path / "proj")
    bin_dir = tmp_path / "agent-bin"
    bin_dir.mkdir()
    (bin_dir / "agent.py").write_text(textwrap.dedent(AGENT))
    config = {".docdelta.yml": sandbox_config(bin_dir), ".docdelta/tasks/test-cmd.yaml": MAKE_CHECK_TASK}
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\nbe nice\n", **config})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    return repo, f"{sys.executable} {bin_dir / 'agent.py'}"


def _forecast(err: str) -> list[str]:
    return [line.removeprefix("docdelta: forecast: ") for line in err.splitlines() if "forecast:" in line]


def test_no_estimate_without_earlier_runs_then_one_from_the_runs_already_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, agent = _project(tmp_path)
    workdir = tmp_path / "work"
    capsys.readouterr()
    assert main(run_args(repo, workdir, agent, "--repeats", "2", "--shard", "1/2")) == 0
    first = _forecast(capsys.readouterr().err)
    assert first == [
        "3 runs planned, 0 already done, 3 to run",
        "no estimate: no earlier results of command in this workdir or the results store",
    ]
    assert len(saved_results(workdir)) == 3

    assert main(run_args(repo, workdir, agent, "--repeats", "2", "--jobs", "2")) == 0
    second = _forecast(capsys.readouterr().err)
    assert second[0] == "6 runs planned, 3 already done, 3 to run"
    assert second[1].startswith("estimated wall time: ") and "(2 at once; mean " in second[1]
    assert second[1].endswith("s per run over 3 earlier runs of command)")
    assert second[2] == (
        "estimated cost: $0.75 (95% CI 0.75 to 0.75) (mean $0.2500 per run over 3 earlier runs)"
    )

    assert main(run_args(repo, workdir, agent, "--repeats", "2")) == 0
    assert _forecast(capsys.readouterr().err) == [
        "6 runs planned, 6 already done, 0 to run: nothing to spend"
    ]


def test_the_forecast_states_the_spend_cap_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, agent = _project(tmp_path)
    capsys.readouterr()
    args = run_args(repo, tmp_path / "work", agent, "--repeats", "2", "--cap-usd", "2")
    assert main(args) == 0
    assert _forecast(capsys.readouterr().err)[-1] == (
        "spend cap: $2.00: no run starts once model spend could pass it"
    )


def test_a_model_agent_without_a_cap_is_told_nothing_bounds_its_spend() -> None:
    """`run` never stops to ask before spending, so for an agent that calls a model the
    forecast is where a user learns that no cap holds, and which flag sets one."""
    ahead = Forecast(
        agent="claude_code",
        model="claude-sonnet-4-5",
        planned=288,
        done=0,
        jobs=1,
        adaptive=True,
        cost=None,
        seconds=None,
        samples=0,
        calls_model=True,
    )
    assert ahead.lines()[-1] == (
        "no spend cap: nothing stops the model spend before the matrix ends; "
        "pass --cap-usd USD (Action input cap-usd) to bound it"
    )
    assert "no spend cap" in ahead.markdown()  # the Action's job summary says it too
    assert replace(ahead, done=288).lines()[-1].endswith("0 to run: nothing to spend")  # nothing to bound


def test_the_forecast_warns_before_spending_when_the_agent_reads_no_changed_file() -> None:
    """Claude Code does not load AGENTS.md: a matrix on an AGENTS.md edit can only tie, which
    the scorecard says afterwards; the forecast says it before the money is spent."""
    ahead = Forecast(
        agent="claude_code",
        model="claude-sonnet-4-5",
        planned=12,
        done=0,
        jobs=1,
        adaptive=False,
        cost=None,
        seconds=None,
        samples=0,
        calls_model=True,
        cap_usd=5.0,
        unread=("AGENTS.md",),
    )
    assert ahead.lines()[-2:] == [
        "AGENTS.md changed, but claude_code does not read it natively: these runs cannot tell base from "
        "head; use an agent that reads it (docs/agents.md), or an instruction file this one loads that "
        "imports it",
        "spend cap: $5.00: no run starts once model spend could pass it",
    ]
