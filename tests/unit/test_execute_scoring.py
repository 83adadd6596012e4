"""gold.execute without a sandbox: what runs in which order, how a run's result scores, which
line is shown as the error, and the task file's switch."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from docdelta.agents.models import AgentAnswer
from docdelta.grading.answer import proposed_commands, score_answer
from docdelta.grading.execute import first_error
from docdelta.results.grades import CommandsExecuted, ExecutedCommand
from docdelta.sandbox.base import ExecResult
from docdelta.tasks.models import Gold, Task

TASK = Task(id="t", prompt="How do I run the tests?", gold=Gold(commands=["make test"], execute=True))
NOWHERE = Path("/nonexistent")


def _ran(command: str, exit_code: int | None, error: str | None = None) -> ExecutedCommand:
    return ExecutedCommand(command=command, exit_code=exit_code, seconds=0.1, first_error=error)


def test_matching_proposals_run_first_then_the_rest_and_prose_spans_only_when_they_match() -> None:
    answer = AgentAnswer(
        answer="Never `rm -rf build`. Run `make test -k`.\n```\n$ make lint\n```",
        commands=["pip install -e .", "make test"],
    )
    assert proposed_commands(TASK, answer) == ["make test", "make test -k", "pip install -e .", "make lint"]


def test_a_matching_proposal_hits_only_if_it_ran_and_a_miss_shows_what_failed() -> None:
    answer = AgentAnswer(commands=["make test --frobnicate"])
    failed = CommandsExecuted(
        isolation="bwrap",
        commands=[_ran("make test --frobnicate", 2, "make: unrecognized option '--frobnicate'")],
    )
    [item] = score_answer(TASK, answer, NOWHERE, failed).items
    assert not item.hit
    assert item.note.endswith("`make test --frobnicate` (exit 2: make: unrecognized option '--frobnicate')")
    assert score_answer(TASK, answer, NOWHERE).items[0].hit  # not executed: matching alone

    wrong = AgentAnswer(commands=["make tests"])
    ran = CommandsExecuted(
        isolation="bwrap",
        commands=[_ran("make tests", 2, "make: *** No rule to make target 'tests'.  Stop.")],
    )
    [item] = score_answer(TASK, wrong, NOWHERE, ran).items
    assert not item.hit and "No rule to make target 'tests'" in item.note


def test_a_matching_proposal_beyond_the_cap_is_a_miss_that_says_so() -> None:
    answer = AgentAnswer(commands=["make test"])
    skipped = CommandsExecuted(isolation="bwrap", skipped=["make test"])
    [item] = score_answer(TASK, answer, NOWHERE, skipped).items
    assert not item.hit and "not run (beyond gold.execute.max_commands)" in item.note


MAKE = b"make: *** No rule to make target 'tests'.  Stop."
PYTEST = b"ERROR: file or directory not found: tests/x.py"
ARGPARSE = b"prog: error: unrecognized arguments: --x"


@pytest.mark.parametrize(
    ("stdout", "stderr", "shown"),
    [
        (b"", MAKE + b"\n", MAKE.decode()),
        (b"collected 0 items\n", PYTEST + b"\n", PYTEST.decode()),
        (b"", b"usage: prog [-h]\n" + ARGPARSE + b"\n", ARGPARSE.decode()),
        (b"first\nlast words\n", b"", "last words"),
    ],
)  # fmt: skip
def test_the_first_error_is_the_line_that_names_the_cause(stdout: bytes, stderr: bytes, shown: str) -> None:
    assert first_error(ExecResult(exit_code=2, stdout=stdout, stderr=stderr, duration_s=0.1)) == shown
    assert first_error(ExecResult(exit_code=0, stdout=stdout, stderr=stderr, duration_s=0.1)) is None


def test_the_task_switch_and_its_errors() -> None:
    assert Gold(execute=False).execute is None
    assert Gold.model_validate({"commands": ["x"], "execute": {"timeout_s": 5}}).execute is not None
    with pytest.raises(ValidationError, match=r"gold\.execute runs proposed commands"):
        Task(id="t", prompt="p", gold=Gold(execute=True))
    with pytest.raises(ValidationError, match="timeout_s"):
        Gold.model_validate({"commands": ["x"], "execute": {"timeout_s": 0}})
