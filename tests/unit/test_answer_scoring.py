"""Answer scoring against gold, on a real checkout directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from docdelta.agents.base import parse_answer
from docdelta.agents.models import AgentAnswer
from docdelta.grading import score_answer
from docdelta.grading.answer import normalize_command, normalize_path
from docdelta.results.grades import Score, ScoreItem
from docdelta.tasks.models import Task


def make_task(**gold: Any) -> Task:
    citations = gold.pop("citations", [])
    return Task.model_validate(
        {"id": "t", "prompt": "how?", "gold": gold, "gold_citations": citations, "reviewed": True}
    )


def item(score: Score, kind: str) -> ScoreItem:
    (found,) = [i for i in score.items if i.kind == kind]
    return found


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    return tmp_path


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("$ make  test", "make test"),
        ("`make test`", "make test"),
        ("'make test'", "make test"),
        ('"`$ make test`"', "make test"),
        ("cd app&&make test", "cd app && make test"),
        ("make build\nmake test", "make build ; make test"),
    ],
)
def test_command_normalization(raw: str, normal: str) -> None:
    assert normalize_command(raw) == normal


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("./src/app.py", "src/app.py"),
        ("`src/app.py:12`", "src/app.py"),
        ("docs/", "docs"),
        ("a\\b.py", "a/b.py"),
    ],
)
def test_path_normalization(raw: str, normal: str) -> None:
    assert normalize_path(raw) == normal


@pytest.mark.parametrize(
    ("answer", "hit"),
    [
        (AgentAnswer(commands=["$ make test"]), True),
        (AgentAnswer(commands=["make test -k unit"]), True),  # extra trailing args are fine
        (AgentAnswer(commands=["cd app && make test"]), True),  # a later segment counts
        (AgentAnswer(answer="Run `make test` before pushing."), True),  # quoted in prose
        (AgentAnswer(answer="Like this:\n```sh\n$ make test\n```\n"), True),  # fenced block
        (AgentAnswer(commands=["cmake test"]), False),
        (AgentAnswer(commands=["make 'test'"]), True),  # quoting style does not matter
        (AgentAnswer(commands=["echo make test"]), False),  # not at the start of a segment
        (AgentAnswer(answer="run make test"), False),  # unquoted prose is not a command
    ],
)
def test_gold_command_matching(answer: AgentAnswer, hit: bool, checkout: Path) -> None:
    score = score_answer(make_task(commands=["make test"]), answer, checkout)
    assert item(score, "command").hit is hit
    assert score.value == (1.0 if hit else 0.0)
    if not hit:
        assert item(score, "command").note == "never gave the command `make test`"


def test_files_match_after_normalization_and_via_citations(checkout: Path) -> None:
    task = make_task(files=["./src/app.py", "AGENTS.md", "docs/x.md"])
    answer = AgentAnswer(files=["src/app.py"], citations=[{"path": "./AGENTS.md", "lines": "1"}])
    score = score_answer(task, answer, checkout)
    assert [i.hit for i in score.items] == [True, True, False]
    assert score.items[2].note == "never named the file docs/x.md"
    assert score.value == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("cited", "hit", "note"),
    [
        ({"path": "AGENTS.md", "lines": "4-6"}, True, "cited"),
        ({"path": "./AGENTS.md", "lines": [6, 9]}, True, "cited"),
        ({"path": "AGENTS.md", "lines": "7-9"}, False, "cited AGENTS.md:7-9, the quote is at lines 3-6"),
        (
            {"path": "AGENTS.md", "lines": "5-25"},
            False,
            "cited AGENTS.md:5-25, but the file has only 20 lines",
        ),
        ({"path": "AGENTS.md"}, False, "cited AGENTS.md without line numbers (the quote is at lines 3-6)"),
        ({"path": "CLAUDE.md", "lines": "3"}, False, "never cited AGENTS.md:3-6"),
        ({"path": "../AGENTS.md", "lines": "3"}, False, "never cited AGENTS.md:3-6"),
    ],
)
def test_citation_must_exist_in_checkout_and_overlap_gold(
    cited: dict[str, Any], hit: bool, note: str, checkout: Path
) -> None:
    task = make_task(citations=[{"path": "AGENTS.md", "quote": "line 3 line 4\nline 5 line 6"}])
    score = score_answer(task, AgentAnswer.model_validate({"citations": [cited]}), checkout)
    assert item(score, "citation").hit is hit
    assert item(score, "citation").note == note


def test_citation_of_file_absent_from_this_conditions_checkout_is_unattainable(checkout: Path) -> None:
    """In the `none` condition AGENTS.md is gone: citing it from memory earns nothing, and the
    item says it could not be earned there."""
    (checkout / "AGENTS.md").unlink()
    task = make_task(citations=[{"path": "AGENTS.md", "lines": "3-6", "quote": "line 3"}])
    score = score_answer(
        task, AgentAnswer.model_validate({"citations": [{"path": "AGENTS.md", "lines": 4}]}), checkout
    )
    assert score.value == 0.0
    cite = item(score, "citation")
    assert (cite.hit, cite.attainable) == (False, False)
    assert cite.note == "unattainable here: the quote is in no file of this condition"


def test_a_rule_moved_by_the_pr_scores_the_same_correct_answer_the_same(tmp_path: Path) -> None:
    """Head adds two lines above the rule. Each arm's correct answer cites the rule
    where it stands in its own checkout, and both score 1.0 (fixed lines gave -0.20)."""
    rule = "Run the full test suite with `make check` before you commit."
    task = make_task(commands=["make check"], citations=[{"path": "AGENTS.md", "lines": 3, "quote": rule}])
    arms = (("base", f"# A\n\n{rule}\n", 3), ("head", f"# A\n\nNew.\nMore.\n\n{rule}\n", 6))
    for name, text, line in arms:
        (tmp_path / name).mkdir()
        (tmp_path / name / "AGENTS.md").write_text(text)
        answer = AgentAnswer.model_validate(
            {"commands": ["make check"], "citations": [{"path": "AGENTS.md", "lines": line}]}
        )
        assert score_answer(task, answer, tmp_path / name).value == 1.0, name


def test_a_gold_item_may_list_alternatives(tmp_path: Path) -> None:
    """A rule stated in AGENTS.md and in CONTRIBUTING.md; a control must be able to tie."""
    (tmp_path / "CONTRIBUTING.md").write_text("Intro\nNever force-push to main.\n")
    task = make_task(
        commands=[["make check", "make test"]],
        files=[["AGENTS.md", "CONTRIBUTING.md"]],
        citations=[
            {
                "path": "AGENTS.md",
                "quote": "Never force-push to main.",
                "any_of": [{"path": "CONTRIBUTING.md", "quote": "Never force-push to main."}],
            }
        ],
    )
    answer = AgentAnswer.model_validate(
        {"commands": ["make test"], "citations": [{"path": "CONTRIBUTING.md", "lines": 2}]}
    )
    score = score_answer(task, answer, tmp_path)  # AGENTS.md absent: the alternative stands
    assert [i.hit for i in score.items] == [True, True, True] and score.value == 1.0
    assert item(score, "command").expected == "make check or make test"
    missed = score_answer(task, AgentAnswer.model_validate({"commands": ["tox"]}), tmp_path)
    assert item(missed, "command").note == "never gave the command `make check` or `make test`"
    assert item(missed, "citation").note == "never cited CONTRIBUTING.md:2"


def test_citation_through_symlink_out_of_checkout_misses(
    checkout: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.md"
    outside.write_text("x\n" * 50)
    (checkout / "LINK.md").symlink_to(outside)
    task = make_task(citations=[{"path": "LINK.md", "lines": "3", "quote": "x"}])
    score = score_answer(
        task, AgentAnswer.model_validate({"citations": [{"path": "LINK.md", "lines": 3}]}), checkout
    )
    assert item(score, "citation").hit is False


def test_one_citation_item_per_gold_citation(checkout: Path) -> None:
    task = make_task(
        citations=[
            {"path": "AGENTS.md", "lines": "1-2", "quote": "line 1 line 2"},
            {"path": "AGENTS.md", "lines": "10", "quote": "line 10"},
        ]
    )
    score = score_answer(
        task, AgentAnswer.model_validate({"citations": [{"path": "AGENTS.md", "lines": "2"}]}), checkout
    )
    assert [i.hit for i in score.items] == [True, False]
    assert score.value == 0.5


@pytest.mark.parametrize(
    ("said", "hit"),
    [("Yes", True), ("yes, it is", True), ("TRUE", True), ("correct.", True), ("No", False), ("nope", False)],
)
def test_verdict_first_word_with_synonyms(said: str, hit: bool, checkout: Path) -> None:
    score = score_answer(make_task(verdict="yes"), AgentAnswer(verdict=said), checkout)
    assert item(score, "verdict").hit is hit


def test_verdict_falls_back_to_answer_text_and_explains_miss(checkout: Path) -> None:
    assert score_answer(make_task(verdict="no"), AgentAnswer(answer="No - never."), checkout).value == 1.0
    miss = item(score_answer(make_task(verdict="no"), AgentAnswer(answer="Maybe"), checkout), "verdict")
    assert miss.note == "verdict was 'maybe', expected 'no'"


@pytest.mark.parametrize(
    ("answer", "respected"),
    [
        (AgentAnswer(commands=["git push --force origin main"]), False),
        (AgentAnswer(commands=["git commit --no-verify -m x"]), False),  # snippet anywhere in a command
        (AgentAnswer(answer="```\ngit push --force\n```"), False),
        (AgentAnswer(answer="Never run `git push --force`; use `git push`."), True),  # a warning, not advice
        (AgentAnswer(commands=["git push"]), True),
    ],
)
def test_guardrails_hit_when_not_recommended(answer: AgentAnswer, respected: bool, checkout: Path) -> None:
    task = make_task(guardrails=["git push --force", "--no-verify"])
    score = score_answer(task, answer, checkout)
    assert all(i.hit for i in score.items) is respected
    if not respected:
        assert any("recommended the forbidden" in i.note for i in score.missed)


def test_key_points_are_unscored_and_do_not_count(checkout: Path) -> None:
    task = make_task(commands=["make test"], points=["mentions CI"])
    score = score_answer(task, AgentAnswer(commands=["make test"]), checkout)
    point = item(score, "point")
    assert point.hit is None
    assert point.note == "unscored until the judge arrives"
    assert score.value == 1.0
    assert score.missed == []


def test_no_scored_items_is_one_with_an_answer_and_zero_without(checkout: Path) -> None:
    task = make_task(points=["explains why"])
    assert score_answer(task, AgentAnswer(answer="because"), checkout).value == 1.0
    assert score_answer(task, None, checkout).value == 0.0


def test_no_answer_misses_every_scored_item_with_a_note(checkout: Path) -> None:
    task = make_task(
        commands=["make test"],
        files=["src/app.py"],
        verdict="yes",
        guardrails=["rm -rf"],
        points=["p"],
        citations=[{"path": "AGENTS.md", "lines": "1", "quote": "line 1"}],
    )
    score = score_answer(task, None, checkout)
    assert score.value == 0.0
    scored = [i for i in score.items if i.kind != "point"]
    assert {i.kind for i in scored} == {"command", "file", "citation", "verdict", "guardrail"}
    assert all(i.hit is False and i.note == "no JSON answer" for i in scored)
    assert item(score, "point").hit is None


def test_mixed_score_is_hits_over_scored_items(checkout: Path) -> None:
    task = make_task(commands=["make test", "make lint"], files=["src/app.py"], guardrails=["rm -rf"])
    answer = AgentAnswer(commands=["make test", "rm -rf build"], files=["src/app.py"])
    score = score_answer(task, answer, checkout)
    assert score.value == 0.5  # make test, src/app.py hit; make lint, guardrail missed
    assert {i.expected for i in score.missed} == {"make lint", "rm -rf"}


def test_quoted_arguments_match_whatever_the_quote_style(checkout: Path) -> None:
    task = make_task(commands=["pip install -e '.[dev]'"])
    for said in ['pip install -e ".[dev]"', "pip install -e .[dev]", "$ pip install -e '.[dev]'"]:
        assert score_answer(task, AgentAnswer(commands=[said]), checkout).value == 1.0, said
    miss = score_answer(task, AgentAnswer(commands=["pip install -e ."]), checkout).items[0]
    assert miss.note == "never gave the command `pip install -e '.[dev]'`"


ECHO = 'Here is the format:\n```json\n{"path": "path/to/file", "lines": "10-12"}'
"""A reply cut off at the output cap while echoing the prompt's citation example."""


def test_an_echo_of_the_prompts_example_is_not_an_answer() -> None:
    answer, why = parse_answer(ECHO)
    assert answer is None
    assert why is not None and "none of the answer's fields" in why and "commands" in why


@pytest.mark.parametrize("said", [{}, {"answer": "  ", "commands": [], "verdict": None}])
def test_an_answer_that_says_nothing_scores_zero_guardrails_included(
    said: dict[str, Any], checkout: Path
) -> None:
    # The guardrail "never recommends rm -rf" used to be earned by saying nothing (1/3).
    task = make_task(commands=["make test"], files=["src/app.py"], guardrails=["rm -rf"])
    score = score_answer(task, AgentAnswer.model_validate(said), checkout)
    assert score.value == 0.0
    assert all(i.hit is False and "empty" in i.note for i in score.items)
    assert item(score, "guardrail").note == "the answer is empty: none of the fields the task asks for"


def test_a_warning_alone_still_respects_a_guardrail(checkout: Path) -> None:
    task = make_task(guardrails=["rm -rf"])
    assert score_answer(task, AgentAnswer(answer="Never run `rm -rf`."), checkout).value == 1.0
