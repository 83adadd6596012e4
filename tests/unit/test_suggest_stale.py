"""`suggest.stale_commands`: which documented commands the execution evidence condemns, and
what takes their place. Only a command that names what the project lacks (every run that
ran it failed with "No rule to make target", an unknown flag, exit 127...) is stale; one
that exists but whose tests failed, or that worked once, is no documentation error."""

from __future__ import annotations

from factories import result

from docdelta.action.suggest_loop import Proven, offer, place
from docdelta.improve.suggest import Measured, Suggestion, _patch, stale_commands
from docdelta.results.grades import CommandsExecuted, ExecutedCommand
from docdelta.results.models import RunResult
from docdelta.tasks.models import Task

DOCS = {"AGENTS.md": "# Agents\n\n- Run the tests with `make tests`.\n- Lint with `ruff check --fast`.\n"}
NO_TARGET = "make: *** No rule to make target 'tests'.  Stop."


def _task(commands: list[str | list[str]]) -> Task:
    return Task.model_validate(
        {"id": "t", "prompt": "How?", "gold": {"commands": commands, "execute": {}}, "reviewed": True}
    )


def _run(repeat: int, *ran: tuple[str, int | None, str | None], missed: str = "make test") -> RunResult:
    executed = CommandsExecuted(
        isolation="bwrap",
        commands=[ExecutedCommand(command=c, exit_code=e, seconds=0.1, first_error=f) for c, e, f in ran],
    )
    return result("t", "head", 0.0, repeat, missed=[missed] if missed else []).model_copy(
        update={"executed": executed}
    )


def test_a_wrong_make_target_in_every_run_is_replaced_by_the_nearest_gold_command() -> None:
    runs = [_run(i, ("make tests", 2, NO_TARGET)) for i in (1, 2, 3)]
    [found] = stale_commands(_task(["ruff check", "make test"]), runs, DOCS)
    assert (found.stale, found.command, found.file, found.line) == ("make tests", "make test", "AGENTS.md", 3)
    assert found.evidence == f"`make tests` failed in 3 of 3 runs: {NO_TARGET}"
    patch, text = _patch("AGENTS.md", DOCS["AGENTS.md"], [], [found])
    assert "-- Run the tests with `make tests`.\n+- Run the tests with `make test`.\n" in patch
    assert "Rules agents missed" not in text and "`ruff check --fast`" in text


def test_an_alternative_no_run_saw_fail_takes_the_place_of_the_one_that_failed() -> None:
    runs = [_run(1, ("make tests", 2, NO_TARGET), missed="make tests or make test")]
    [found] = stale_commands(_task([["make tests", "make test"]]), runs, DOCS)
    assert found.command == "make test"


def test_a_command_that_exists_but_whose_checks_failed_or_that_worked_once_is_kept() -> None:
    task = _task(["make test", "ruff check"])
    failing_tests = [_run(1, ("make tests", 2, "make: *** [Makefile:4: tests] Error 1"))]
    assert stale_commands(task, failing_tests, DOCS) == []
    once = [_run(1, ("make tests", 2, NO_TARGET)), _run(2, ("make tests", 0, None))]
    assert stale_commands(task, once, DOCS) == []
    hung = [_run(1, ("make tests", None, None))]
    assert stale_commands(task, hung, DOCS) == []


def test_a_program_the_sandbox_lacks_or_a_wrong_flag_is_stale_only_where_the_docs_state_it() -> None:
    flag = "ruff: error: unexpected argument '--fast' found; unrecognized option"
    runs = [_run(1, ("ruff check --fast", 2, flag), missed="ruff check")]
    [found] = stale_commands(_task(["make test", "ruff check"]), runs, DOCS)
    assert (found.stale, found.command, found.line) == ("ruff check --fast", "ruff check", 4)
    elsewhere = [_run(1, ("tox -e lint", 127, "sh: 1: tox: not found"), missed="ruff check")]
    assert stale_commands(_task(["ruff check"]), elsewhere, DOCS) == []  # the docs never say tox


def test_without_gold_execute_or_a_missed_gold_command_nothing_is_replaced() -> None:
    runs = [_run(1, ("make tests", 2, NO_TARGET))]
    plain = Task.model_validate({"id": "t", "prompt": "How?", "gold": {"commands": ["make test"]}})
    assert stale_commands(plain, runs, DOCS) == []
    hit = [_run(1, ("make tests", 2, NO_TARGET), ("make test", 0, None), missed="")]
    assert stale_commands(_task(["make test"]), hit, DOCS) == []


def test_the_replacement_is_one_review_suggestion_on_its_line_with_the_evidence_beside_the_claim() -> None:
    runs = [_run(i, ("make tests", 2, NO_TARGET)) for i in (1, 2, 3, 4)]
    [found] = stale_commands(_task(["make test"]), runs, DOCS)
    patch, _ = _patch("AGENTS.md", DOCS["AGENTS.md"], [], [found])
    suggestion = Suggestion(
        condition="head", file="AGENTS.md", tasks={"t": 0.0}, rules=[], replaced=[found],
        patch=patch, patched_sha256="x",
    )  # fmt: skip
    placed = place(suggestion, [frozenset({3})])  # the PR's diff changed that line
    assert placed is not None and placed.replacement == "- Run the tests with `make test`.\n"
    raised = Measured(task="t", before=0.0, after=1.0, runs=4, p_value=0.00714, raised=True)
    section = offer(Proven(suggestion, [raised]), placed)
    claim = "replacing `make tests` with `make test` raised t from 0.00 to 1.00 in 4 runs, p = 0.00714"
    assert section.startswith(f"<details><summary>Suggested fix, measured: {claim}</summary>")
    assert f"- why: `make tests` failed in 4 of 4 runs: {NO_TARGET}\n" in section
