"""Task files: loading, errors with file/field/line, duplicate ids, citations, review gate, schema."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from docdelta.errors import TaskError
from docdelta.tasks.load import (
    check_citations,
    citation_holders,
    load_tasks,
    require_reviewed,
    task_json_schema,
)

GOOD_YAML = """\
id: test-command
prompt: How do I run the tests?
gold:
  commands: [make test]
gold_citations:
  - path: AGENTS.md
    lines: 2-3
    quote: "Run   the tests with
      make test"
reviewed: true
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def test_yaml_and_json_tasks_load_with_the_hash_of_their_bytes(tmp_path: Path) -> None:
    y = write(tmp_path, "a.yaml", GOOD_YAML)
    write(
        tmp_path,
        "b.json",
        json.dumps({"id": "b", "prompt": "p", "gold_citations": [{"path": "x", "lines": 4, "quote": "q"}]}),
    )
    write(tmp_path, "notes.txt", "ignored")
    loaded = load_tasks(tmp_path)
    assert [t.task.id for t in loaded] == ["test-command", "b"]
    assert loaded[0].path == y and loaded[0].sha256 == hashlib.sha256(y.read_bytes()).hexdigest()
    first, second = loaded[0].task.gold_citations[0].lines, loaded[1].task.gold_citations[0].lines
    assert first is not None and first.start == 2
    assert second is not None and second.end == 4 and not loaded[1].task.reviewed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD_YAML.replace("    lines: 2-3", "    lines: two"),
            r"bad\.yaml:7: field 'gold_citations\[0\]\.lines'",
        ),
        (
            GOOD_YAML.replace("gold:\n", "gold:\n  comands: [x]\n"),
            r"bad\.yaml:4: field 'gold\.comands': unknown field",
        ),
        (
            GOOD_YAML.replace("prompt: How do I run the tests?\n", ""),
            r"bad\.yaml:1: field 'prompt': required field is missing",
        ),
        (
            GOOD_YAML.replace("id: test-command", "id: Has Spaces"),
            r"bad\.yaml:1: field 'id': String should match",
        ),
        ("id: x\nprompt: [unclosed\n", r"bad\.yaml:3: invalid YAML"),
        ("", r"bad\.yaml: field 'id': required field is missing"),
    ],
)
def test_malformed_yaml_names_file_field_and_line(tmp_path: Path, text: str, message: str) -> None:
    write(tmp_path, "bad.yaml", text)
    with pytest.raises(TaskError, match=message) as info:
        load_tasks(tmp_path)
    assert "docdelta schema task" in info.value.hint


def test_malformed_json_names_the_line_too(tmp_path: Path) -> None:
    write(tmp_path, "bad.json", '{\n  "id": "x",\n  "prompt": "p",\n  "reviewed": "perhaps"\n}\n')
    with pytest.raises(TaskError, match=r"bad\.json:4: field 'reviewed'"):
        load_tasks(tmp_path)
    write(tmp_path, "bad.json", '{\n  "id": "x",\n  oops\n}')
    with pytest.raises(TaskError, match=r"bad\.json:3: invalid JSON"):
        load_tasks(tmp_path)


def test_duplicate_ids_name_both_files(tmp_path: Path) -> None:
    write(tmp_path, "one.yaml", GOOD_YAML)
    write(tmp_path, "two.yml", GOOD_YAML)
    with pytest.raises(TaskError, match=r"'test-command' is used by both .*one\.yaml and .*two\.yml"):
        load_tasks(tmp_path)


def test_missing_or_empty_directory_is_an_error_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="does not exist") as info:
        load_tasks(tmp_path / "nope")
    assert "--tasks" in info.value.hint
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskError, match="holds no"):
        load_tasks(tmp_path / "empty")


@pytest.fixture
def conditions(tmp_path: Path) -> dict[str, Path]:
    """Three condition checkouts: head holds the rule two lines lower than base, none lacks it."""
    base = write(tmp_path / "base", "AGENTS.md", "# Rules\nRun the tests\n   with make test.\nNever push.\n")
    head = write(tmp_path / "head", "AGENTS.md", "# Rules\n\nIntro.\nRun the tests with make test.\n")
    none = write(tmp_path / "none", "README.md", "hello\n")
    return {"base": base.parent, "head": head.parent, "none": none.parent}


def test_citations_that_stand_in_some_condition_pass(tmp_path: Path, conditions: dict[str, Path]) -> None:
    write(tmp_path / "t", "a.yaml", GOOD_YAML)
    loaded = load_tasks(tmp_path / "t")
    check_citations(loaded, conditions, "s" * 40)
    assert citation_holders(loaded[0].task.gold_citations[0], conditions) == ["base", "head"]
    # The stale `lines` hint does not matter: the quote is located by content.
    check_citations(
        load_tasks(write(tmp_path / "u", "a.yaml", GOOD_YAML.replace("2-3", "9")).parent),
        conditions,
        "s" * 40,
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ('make test"', 'make check"'),
            r"task 'test-command' .*gold_citations\[0\] quotes AGENTS\.md: .* stands in no condition "
            r"\(base, head, none\) of source ssssssssssss",
        ),
        (("path: AGENTS.md", "path: CLAUDE.md"), r"CLAUDE\.md: .* stands in no condition"),
    ],
)
def test_citations_that_stand_nowhere_are_refused(
    tmp_path: Path, conditions: dict[str, Path], edit: tuple[str, str], message: str
) -> None:
    write(tmp_path / "t", "a.yaml", GOOD_YAML.replace(*edit))
    with pytest.raises(TaskError, match=message) as info:
        check_citations(load_tasks(tmp_path / "t"), conditions, "s" * 40)
    assert "--source" in info.value.hint


def test_an_alternative_quote_is_enough(tmp_path: Path, conditions: dict[str, Path]) -> None:
    text = GOOD_YAML.replace(
        'make test"', 'make check"\n    any_of:\n      - {path: AGENTS.md, quote: Never push}'
    )
    write(tmp_path / "t", "a.yaml", text)
    loaded = load_tasks(tmp_path / "t")
    check_citations(loaded, conditions, "s" * 40)
    assert citation_holders(loaded[0].task.gold_citations[0], conditions) == ["base"]


def test_unreviewed_gold_is_refused_unless_allowed(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD_YAML.replace("reviewed: true", "reviewed: false"))
    loaded = load_tasks(tmp_path)
    with pytest.raises(TaskError, match=r"unreviewed gold in 1 task\(s\): test-command") as info:
        require_reviewed(loaded, allow_unreviewed=False)
    assert "--allow-unreviewed" in info.value.hint
    require_reviewed(loaded, allow_unreviewed=True)


def test_schema_describes_task_files_and_their_line_shorthands() -> None:
    schema = task_json_schema()
    assert {"id", "prompt", "gold", "gold_citations", "reviewed"} <= set(schema["properties"])
    assert schema["required"] == ["id", "prompt"]
    lines = schema["$defs"]["GoldCitation"]["properties"]["lines"]
    assert {"type": "integer", "minimum": 1} in lines["anyOf"][0]["anyOf"]  # optional: a hint
    assert schema["$defs"]["GoldCitation"]["required"] == ["path", "quote"]
    json.dumps(schema)
