"""`docdelta schema answer`: the answer format a command agent prints, as a JSON Schema whose
descriptions are the prompt's own words."""

from __future__ import annotations

import json

import pytest

from docdelta.agents.prompt import ANSWER_SHAPE
from docdelta.cli.main import main


def test_schema_answer_lists_every_field_with_the_prompts_description(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema", "answer"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert list(schema["properties"]) == ["answer", "commands", "files", "citations", "verdict"]
    for key, meaning in ANSWER_SHAPE.items():
        assert schema["properties"][key]["description"] == meaning
    assert schema["properties"]["commands"]["type"] == "array"
    assert "citations" not in schema.get("required", [])


def test_schema_task_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "task"]) == 0
    assert "prompt" in json.loads(capsys.readouterr().out)["properties"]
