"""`tasks audit` flags tasks that may not measure their rule: a prompt that recites it, a rule
agents know anyway (every `none` run passed), a quote cut from its condition, a rule or prompt
that starts with a pronoun."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import yaml

from docdelta.improve.task_audit import (
    FileKind,
    Flaw,
    GoldLabel,
    SourceText,
    _Tally,
    audit_suite,
    render,
    task_flaws,
)
from docdelta.tasks.load import LoadedTask
from docdelta.tasks.models import Gold, Task
from docdelta.tasks.quotes import normalize

AGENTS = """\
# Rules

- Run `make check` before you push to the remote branch.
- When you change the schema, never edit `gen/` by hand.
- It must pass before merging.
"""
SOURCE = SourceText({"AGENTS.md": (FileKind.instructions, normalize(AGENTS))})


def _task(prompt: str, quote: str) -> Task:
    return Task.model_validate(
        yaml.safe_load(
            f"id: t\nprompt: {prompt!r}\ngold:\n  commands: [make check]\n"
            f"gold_citations:\n  - path: AGENTS.md\n    quote: {quote!r}\nreviewed: true\n"
        )
    )


def _kinds(task: Task, tally: _Tally | None = None) -> set[Flaw]:
    return {f.kind for f in task_flaws(task, SOURCE, tally)}


def test_a_task_that_asks_to_act_has_no_flaw() -> None:
    assert _kinds(_task("I fixed a typo in src/app.py. What do I do before pushing?", "make check")) == set()


def test_a_prompt_that_repeats_the_rule_recites_it() -> None:
    task = _task(
        "The rules say to run make check before you push to the remote branch. Which command?", "make check"
    )
    (flaw,) = task_flaws(task, SOURCE)
    assert flaw.kind is Flaw.recites and "AGENTS.md" in flaw.detail


def test_a_quote_without_its_condition_is_flagged() -> None:
    (flaw,) = task_flaws(
        _task("May I edit gen/models.py to fix a typo?", "never edit `gen/` by hand"), SOURCE
    )
    assert flaw.kind is Flaw.lost_condition
    assert "`When`" in flaw.detail and "When you change the schema" in flaw.detail
    assert _kinds(_task("May I edit gen/?", "When you change the schema, never edit `gen/` by hand")) == set()


def test_a_rule_or_prompt_starting_with_a_pronoun_is_unresolved() -> None:
    assert _kinds(_task("What must happen before merging?", "It must pass before merging.")) == {
        Flaw.unresolved_reference
    }
    assert Flaw.unresolved_reference in _kinds(_task("It fails. What now?", "make check"))


def test_a_rule_every_run_without_the_file_passes_is_common_sense() -> None:
    task = _task("I fixed a typo in src/app.py. What do I do before pushing?", "make check")
    knows = _Tally(defaultdict(list, {"none": [1.0, 1.0, 1.0], "head": [1.0, 1.0, 1.0]}), runs=6)
    assert _kinds(task, knows) == {Flaw.common_sense}
    learns = _Tally(defaultdict(list, {"none": [1.0, 0.0, 1.0], "head": [1.0, 1.0, 1.0]}), runs=6)
    assert _kinds(task, learns) == set()


def test_a_fill_in_the_blank_quiz_recites_its_rule() -> None:
    task = _task(
        'Fill in the blank of this rule: "Run [blank] before you push." Answer with the command.',
        "make check",
    )
    (flaw,) = task_flaws(task, SOURCE)
    assert flaw.kind is Flaw.recites and "fill in a blank" in flaw.detail


def test_a_condition_around_a_code_block_applies_but_a_keyword_inside_one_does_not() -> None:
    """The intro before a fenced block ("When you release a version:") still conditions the
    prohibition after it; `while` in the block's script, or `--only` in a span, is code."""
    around = (
        "# Rules\n\nWhen you release a version:\n\n```sh\nmake release\n```\n\nNever push tags by hand.\n"
    )
    inside = "# Rules\n\n```sh\nwhile true; do make; done\n```\n\nNever push to `main`; use `make --only`.\n"
    for text, quote, flagged in (
        (around, "Never push tags by hand", True),
        (inside, "Never push to `main`", False),
    ):
        source = SourceText({"AGENTS.md": (FileKind.instructions, normalize(text))})
        flaws = {f.kind for f in task_flaws(_task("May I do that now?", quote), source)}
        assert (Flaw.lost_condition in flaws) is flagged, text


def test_tasks_that_ask_the_same_prompt_for_different_gold_are_flagged(tmp_path: Path) -> None:
    prompt = 'Which command should I run in this repository for "Workflow"?'
    tasks = [
        LoadedTask(
            Task(id=name, prompt=prompt, gold=Gold(commands=[command]), reviewed=True), tmp_path / name, name
        )
        for name, command in (("lint", "make lint"), ("test", "make test"), ("also-test", "make test"))
    ]
    audit = audit_suite(
        [*tasks, LoadedTask(_task("What do I run before I push?", "make check"), tmp_path, "t")],
        SOURCE,
        "0" * 40,
    )
    flaws = {e.task: [f for f in e.flaws if f.kind is Flaw.same_prompt] for e in audit.tasks}
    assert [f.detail for f in flaws["lint"]] == [
        "tasks also-test, test ask the same prompt with other gold: no answer passes all of them"
    ]
    assert "lint" in flaws["test"][0].detail and "also-test" not in flaws["test"][0].detail
    assert flaws["t"] == []
    assert "! same-prompt: tasks also-test, test ask the same prompt" in render(audit)


def test_the_audit_marks_unreviewed_tasks_on_their_line_and_in_a_count(tmp_path: Path) -> None:
    reviewed = LoadedTask(_task("What do I run before I push?", "make check"), tmp_path, "a")
    draft = LoadedTask(reviewed.task.model_copy(update={"id": "draft", "reviewed": False}), tmp_path, "b")
    audit = audit_suite([reviewed, draft], SOURCE, "0" * 40)
    assert {e.task: e.reviewed for e in audit.tasks} == {"t": True, "draft": False}
    lines = render(audit).splitlines()
    assert "target        draft  [unreviewed: `docdelta run` refuses it]" in lines
    assert "target        t" in lines
    assert "unreviewed tasks (set `reviewed: true` once checked): 1 of 2" in lines


def test_a_target_whose_gold_code_also_holds_says_so(tmp_path: Path) -> None:
    workflow = "jobs:\n  test:\n    steps:\n      - run: make check\n"
    source = SourceText({**SOURCE.files, ".github/workflows/ci.yml": (FileKind.code, normalize(workflow))})
    task = LoadedTask(
        _task("What do I run before I push?", "Run `make check` before you push"), tmp_path, "a"
    )
    (entry,) = audit_suite([task], source, "0" * 40).tasks
    assert entry.label is GoldLabel.target
    (flaw,) = [f for f in entry.flaws if f.kind is Flaw.in_code]
    assert flaw.detail == (
        "command `make check` also stands in code (.github/workflows/ci.yml): an agent that reads it "
        "can answer without the instruction files"
    )


def test_a_multi_line_quote_stays_on_its_item_line(tmp_path: Path) -> None:
    text = "# Dev\n\n```bash\npython -m ruff check src/\npython -m ruff format src/\n```\n"
    source = SourceText({"CLAUDE.md": (FileKind.instructions, normalize(text))})
    task = Task(
        id="lint",
        prompt="How do I lint?",
        gold=Gold(commands=["python -m ruff check src/"]),
        gold_citations=[
            {"path": "CLAUDE.md", "quote": "python -m ruff check src/\npython -m ruff format src/"}
        ],
        reviewed=True,
    )
    lines = render(audit_suite([LoadedTask(task, tmp_path, "a")], source, "0" * 40)).splitlines()
    assert (
        "    target        citation `CLAUDE.md: python -m ruff check src/ python -m ruff format src/` "
        "in instructions: CLAUDE.md"
    ) in lines
    assert not any(line.startswith("python") for line in lines)
