"""Which lines of an instruction file `tasks draft` turns into tasks, and what each task asks
and expects: pure functions over Markdown text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import ONE_SHELL_BLOCK

from docdelta.improve.task_audit import FileKind, GoldLabel, SourceText, audit_items, task_label
from docdelta.improve.task_draft import BLANK, RuleKind, RuleTaskDraft, covers, draft_from_text
from docdelta.tasks.models import Task
from docdelta.tasks.quotes import locate

GUIDE = """\
# Guide

Intro: this repository uses `make` for everything.

## Commands

```bash
make test         # Run the Python tests with coverage
make build        # make build regenerates the bundled data
```

Run focused checks for one package:

```sh
vp run logfire#test
vp run logfire#typecheck
```

```python
print("not a shell command")
```

## Rules

- Always run `make build`, not `make build-prices` alone.
- **Never** force-push to `main` (no `git push --force`); revert instead.
- Use `uv` for dependency management (not pip/conda).
- When you add a currency to `pricebook/currencies.py`, edit `pricebook/symbols.py` too.
- Keep notes in `docs/missing.md`.
- `make all` covers the Python side only.
- Local `make test` is fast, so a green `make test` does not mean CI passes.
"""
TREE = ["pricebook/currencies.py", "pricebook/symbols.py", "Makefile"]


def _drafts(text: str = GUIDE) -> dict[str, RuleTaskDraft]:
    return {d.task.id: d for d in draft_from_text(text, "AGENTS.md", TREE)}


def _leaked(task: Task) -> list[str]:
    return [i.expected for i in audit_items(task, SourceText({})) if i.leaked]


def test_each_commented_shell_line_asks_its_comment_and_expects_its_command() -> None:
    draft = _drafts()["command-make-test"]
    assert draft.kind is RuleKind.command and draft.line == 8 and draft.section == "Commands"
    assert draft.task.gold.commands == ["make test"]
    assert '"Run the Python tests with coverage"' in draft.task.prompt
    assert draft.task.gold_citations[0].quote == "make test         # Run the Python tests with coverage"


def test_uncommented_lines_of_a_block_are_one_task_asked_by_the_paragraph_before_it() -> None:
    draft = _drafts()["command-vp-run-logfire-test"]
    assert draft.task.gold.commands == ["vp run logfire#test", "vp run logfire#typecheck"]
    assert '"Run focused checks for one package"' in draft.task.prompt
    assert locate(GUIDE, draft.task.gold_citations[0].quote) is not None


def test_a_comment_that_names_its_command_is_blanked_so_the_prompt_does_not_give_it_away() -> None:
    # "make build" is also the gold of the "Always run" rule, which is kept instead; alone,
    # the code line's own comment would state it.
    only = "```bash\nmake build        # make build regenerates the bundled data\n```\n"
    (draft,) = draft_from_text(only, "AGENTS.md")
    assert draft.task.gold.commands == ["make build"]
    assert "make build" not in draft.task.prompt and f"{BLANK} regenerates" in draft.task.prompt
    assert _leaked(draft.task) == []


def test_a_never_rule_is_a_yes_no_task_guarding_the_commands_it_names() -> None:
    draft = _drafts()["never-force-push-to-main"]
    gold = draft.task.gold
    assert (gold.verdict, gold.guardrails, gold.commands) == ("no", ["git push --force"], [])
    assert (
        draft.task.prompt == "In this repository (Rules): is it OK to force-push to `main`? Answer yes or no."
    )
    assert draft.task.gold_citations[0].quote == "Never** force-push to `main`"
    assert locate(GUIDE, draft.task.gold_citations[0].quote) is not None


def test_always_x_not_y_expects_x_guards_y_and_blanks_both() -> None:
    draft = _drafts()["rule-make-build"]
    assert (draft.task.gold.commands, draft.task.gold.guardrails) == (["make build"], ["make build-prices"])
    assert (
        f'Fill in the blanks of this rule of the repository (Rules): "Always run {BLANK}, not {BLANK} alone."'
        in draft.task.prompt
    )
    assert _leaked(draft.task) == []


def test_a_tooling_choice_asks_which_tool_and_whether_the_one_it_rules_out_is_ok() -> None:
    drafts = _drafts()
    tool = drafts["tool-uv"].task
    assert tool.prompt == "Which tool should I use for dependency management in this repository?"
    assert tool.gold.commands == ["uv"]
    assert tool.gold_citations[0].quote == "Use `uv` for dependency management"
    other = drafts["never-use-pip-or-conda-for-dependency-management"].task
    assert other.prompt == (
        "In this repository (Rules): is it OK to use pip or conda for dependency management? "
        "Answer yes or no."
    )
    assert (other.gold.verdict, other.gold.commands) == ("no", [])
    assert other.gold_citations[0].quote == "Use `uv` for dependency management (not pip/conda)"


def test_paths_are_gold_only_where_the_tree_holds_them() -> None:
    drafts = _drafts()
    currency = drafts["rule-pricebook-currencies-py"].task
    assert currency.gold.files == ["pricebook/currencies.py", "pricebook/symbols.py"]
    assert currency.prompt.count(BLANK) == 2
    assert not any("missing" in task_id for task_id in drafts)


def test_descriptions_other_languages_and_facts_about_commands_draft_nothing() -> None:
    drafts = _drafts()
    assert set(drafts) == {
        "command-make-test",
        "command-vp-run-logfire-test",
        "never-force-push-to-main",
        "rule-make-build",
        "tool-uv",
        "never-use-pip-or-conda-for-dependency-management",
        "rule-pricebook-currencies-py",
    }
    gold = [g for d in drafts.values() for g in d.task.gold.commands]
    assert len(gold) == len(set(gold))  # `make build`: drafted once, from its rule, not its code line


def test_every_draft_is_unreviewed_cites_its_own_line_and_passes_the_leak_check() -> None:
    lines = GUIDE.splitlines()
    for draft in _drafts().values():
        assert not draft.task.reviewed and draft.task.gold.docs == ["AGENTS.md"]
        where = locate(GUIDE, draft.task.gold_citations[0].quote)
        assert where is not None and where.start == draft.line, draft.task.id
        assert draft.rule.split()[0].strip("*`-") in lines[draft.line - 1]
        assert _leaked(draft.task) == [], draft.task.id


def test_ids_stay_unique_across_files() -> None:
    taken: set[str] = set()
    first = draft_from_text("Run `make test` always.\n", "AGENTS.md", taken=taken)
    second = draft_from_text("Run `make test` always.\n", "CLAUDE.md", taken=taken)
    assert [d.task.id for d in first + second] == ["rule-make-test", "rule-make-test-2"]
    assert second[0].task.gold_citations[0].path == "CLAUDE.md"


_WORDS = st.sampled_from(
    ["run", "Never", "Always", "Use", "the", "tests", "before", "not", "don't", "e.g.", "—"]
)
_SPANS = st.sampled_from(
    ["`make test`", "`uv`", "`pricebook/symbols.py`", "`--force`", "`git push -f`", "`a:b`"]
)
_SENTENCE = st.lists(st.one_of(_WORDS, _SPANS), min_size=1, max_size=9).map(lambda ws: " ".join(ws) + ".")
_BLOCK = st.lists(
    st.sampled_from(["make test", "make lint  # Lint it", "$ uv sync", "# a comment", ""]),
    min_size=1,
    max_size=4,
).map(lambda lines: "```bash\n" + "\n".join(lines) + "\n```")
_LINE = st.one_of(
    _SENTENCE,
    _SENTENCE.map(lambda s: f"- {s}"),
    _SENTENCE.map(lambda s: f"- **{s}**"),
    st.lists(_SENTENCE, min_size=2, max_size=3).map("\n".join),  # one paragraph over lines
    st.sampled_from(["## Rules", "### Sub", "Intro:"]),
    _BLOCK,
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_LINE, max_size=12).map("\n\n".join))
def test_any_markdown_drafts_citations_that_stand_and_prompts_that_do_not_leak(text: str) -> None:
    drafts = draft_from_text(text, "AGENTS.md", TREE)
    assert len({d.task.id for d in drafts}) == len(drafts)
    for draft in drafts:
        where = locate(text, draft.task.gold_citations[0].quote)
        assert where is not None and where.start == draft.line
        assert _leaked(draft.task) == []
        assert draft.task.gold.commands or draft.task.gold.files or draft.task.gold.verdict == "no"


def test_an_existing_task_covers_a_rule_it_cites_or_whose_commands_it_expects() -> None:
    drafts = _drafts()
    rule = drafts["rule-make-build"]
    citing = Task.model_validate(
        {
            "id": "mine",
            "prompt": "?",
            "gold_citations": [{"path": "AGENTS.md", "quote": "not `make build-prices`"}],
        }
    )
    same_commands = Task.model_validate({"id": "x", "prompt": "?", "gold": {"commands": ["make build"]}})
    elsewhere = Task.model_validate(
        {"id": "y", "prompt": "?", "gold_citations": [{"path": "README.md", "quote": "Always run"}]}
    )
    assert covers(citing, rule, GUIDE) and covers(same_commands, rule, GUIDE)
    assert not covers(elsewhere, rule, GUIDE)
    assert not covers(citing, drafts["tool-uv"], GUIDE)


@pytest.mark.parametrize(
    ("rule", "prompt"),
    [
        ("Run `make check` before you push.", "which command do I run before I push?"),
        ("Always run `make lint` after you edit `src/`.", "which command do I run after I edit `src/`?"),
        (
            "Remember to run `make gen` when you change the schema.",
            "which command do I run when I change the schema?",
        ),
        ("Run `make docs` to build the docs.", "which command do I run to build the docs?"),
    ],
)
def test_a_rule_with_a_trigger_is_asked_as_the_situation_to_act_in(rule: str, prompt: str) -> None:
    """The agent meets the situation and must act, rather than fill in the rule's sentence."""
    (draft,) = draft_from_text(f"# Rules\n\n- {rule}\n", "AGENTS.md")
    assert draft.task.prompt == f"In this repository (Rules): {prompt} Answer with the exact command."
    assert BLANK not in draft.task.prompt and _leaked(draft.task) == []


def test_a_trigger_task_is_audited_by_its_on_demand_file_not_left_unlabelled() -> None:
    skill = ".claude/skills/verify/SKILL.md"
    source = SourceText(
        {skill: (FileKind.instructions, "verify the build"), "README.md": (FileKind.docs, "hello")}
    )

    def trigger_task(file: str, prompt: str) -> Task:
        return Task.model_validate(
            {"id": "t", "prompt": prompt, "kind": "trigger", "trigger": {"file": file, "should_load": True}}
        )

    (item,) = audit_items(trigger_task(skill, "Check the build before I merge."), source)
    assert (item.kind, item.label, item.leaked) == ("trigger", GoldLabel.target, False)
    assert task_label([item]) is GoldLabel.target
    (missing,) = audit_items(trigger_task(".claude/skills/gone/SKILL.md", "Check it."), source)
    assert missing.label is GoldLabel.unattainable
    (named,) = audit_items(trigger_task(skill, f"Follow {skill} now."), source)
    assert named.leaked


ONE_BLOCK = ONE_SHELL_BLOCK


def test_commands_each_under_a_comment_line_are_asked_by_their_comment() -> None:
    drafts = draft_from_text(ONE_BLOCK, "CLAUDE.md")
    asked = {d.task.prompt: d.task.gold.commands for d in drafts}
    assert asked == {
        "Which commands should I run in this repository for this (Workflow): "
        '"Lint and style: Check for issues and fix automatically"?': [
            "python -m ruff check src/ tests/ --fix",
            "python -m ruff format src/ tests/",
        ],
        'Which command should I run in this repository for this (Workflow): "Typecheck"?': [
            "python -m mypy src/"
        ],
        'Which command should I run in this repository for this (Workflow): "Run all tests"?': [
            "python -m pytest tests/"
        ],
    }
    for draft in drafts:
        where = locate(ONE_BLOCK, draft.task.gold_citations[0].quote)
        assert where is not None and where.start == draft.line, draft.task.id


def test_a_heredoc_is_one_command_and_its_body_no_command() -> None:
    text = "# Setup\n\nWrite the env file:\n\n```bash\ncat > .env <<'EOF'\nKEY=1\nEOF\n```\n"
    (draft,) = draft_from_text(text, "SKILL.md")
    assert draft.task.gold.commands == ["cat > .env <<'EOF'\nKEY=1\nEOF"]
    assert '"Write the env file"' in draft.task.prompt
    assert locate(text, draft.task.gold_citations[0].quote) is not None


def test_a_line_ending_in_a_backslash_continues_its_command() -> None:
    text = "# Build\n\n```bash\n# Build the image\ndocker build \\\n    -t app .\nmake test\n```\n"
    (draft,) = draft_from_text(text, "AGENTS.md")
    assert draft.task.gold.commands == ["docker build -t app .", "make test"]
    assert locate(text, draft.task.gold_citations[0].quote) is not None


HARNESS = """\
## The harness

```bash
SB=$(mktemp -d); mkdir -p $SB/stub $SB/home
cp scripts/download_cli.py $SB/repo/scripts/

cat > $SB/stub/curl <<'END'
#!/bin/bash
echo "[stub curl] argv: $*" >> "$MARKER"
exit ${CURL_EXIT:-0}
END
chmod +x $SB/stub/*

cd $SB/repo
env -i HOME=$SB/home PATH=$SB/stub:/usr/bin:/bin MARKER=$SB/m \\
    .venv/bin/python scripts/download_cli.py
```

Run the tests with `make test` before you push.
"""


def test_a_script_that_sets_up_state_for_its_later_lines_drafts_nothing() -> None:
    drafts = draft_from_text(HARNESS, "SKILL.md")
    assert [d.task.gold.commands for d in drafts] == [["make test"]]


def test_a_long_rule_gives_an_id_cut_between_words() -> None:
    text = "# Agents\n\n- Do not `git commit` anything unless instructed to do so.\n"
    (draft,) = draft_from_text(text, "AGENTS.md")
    assert draft.task.id == "never-git-commit-anything-unless-instructed-to"
