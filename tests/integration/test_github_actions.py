"""The Actions runtime: outputs file, step summary and workflow commands as the runner reads them."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from docdelta.github.actions import ActionsRuntime


def read_outputs(path: Path) -> dict[str, str]:
    """Parse $GITHUB_OUTPUT the way the runner does (`name<<DELIM` ... `DELIM`)."""
    outputs: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").split("\n"))
    for line in lines:
        if not line:
            continue
        name, delimiter = line.split("<<", 1)
        value: list[str] = []
        for body_line in lines:
            if body_line == delimiter:
                break
            value.append(body_line)
        else:
            raise AssertionError(f"output {name} is not terminated")
        outputs[name] = "\n".join(value)
    return outputs


def runtime(tmp_path: Path) -> tuple[ActionsRuntime, io.StringIO]:
    stream = io.StringIO()
    env = {"GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
    return ActionsRuntime.from_env(env, stream), stream


def test_outputs_survive_multiline_values_and_lookalike_delimiters(tmp_path: Path) -> None:
    rt, _ = runtime(tmp_path)
    tricky = "line 1\nEOF\nverdict<<EOF\n\nlast"

    assert rt.set_output("verdict", "regression")
    assert rt.set_output("report", tricky)
    assert rt.set_output("empty", "")

    assert read_outputs(tmp_path / "out") == {"verdict": "regression", "report": tricky, "empty": ""}


def test_output_names_that_would_corrupt_the_file_are_refused(tmp_path: Path) -> None:
    rt, _ = runtime(tmp_path)
    with pytest.raises(ValueError, match="output name"):
        rt.set_output("a\nb", "x")


def test_the_summary_is_appended(tmp_path: Path) -> None:
    rt, _ = runtime(tmp_path)
    rt.append_summary("# one")
    rt.append_summary("two\n")
    assert (tmp_path / "summary").read_text() == "# one\ntwo\n"


def test_outside_actions_nothing_is_written(tmp_path: Path) -> None:
    rt = ActionsRuntime.from_env({}, io.StringIO())
    assert rt.set_output("verdict", "x") is False
    assert rt.append_summary("x") is False
    assert list(tmp_path.iterdir()) == []


def test_annotations_escape_data_and_properties(tmp_path: Path) -> None:
    rt, stream = runtime(tmp_path)

    rt.annotate("error", "100% worse\r\nsee: a,b", file="docs/a,b:c.md", line=3, end_line=4, title="Re: 50%")
    rt.annotate("warning", "::set-output name=x::pwned")
    rt.annotate("notice", "plain")

    assert stream.getvalue().splitlines() == [
        "::error file=docs/a%2Cb%3Ac.md,line=3,endLine=4,title=Re%3A 50%25::100%25 worse%0D%0Asee: a,b",
        "::warning::::set-output name=x::pwned",
        "::notice::plain",
    ]


def test_an_annotation_message_cannot_start_a_second_command(tmp_path: Path) -> None:
    rt, stream = runtime(tmp_path)
    rt.annotate("error", "first\n::add-mask::oops")
    assert len(stream.getvalue().splitlines()) == 1


def test_mask_registers_every_line_of_a_secret(tmp_path: Path) -> None:
    rt, stream = runtime(tmp_path)
    rt.mask("sk-one\nsk-two%")
    assert re.findall(r"^::add-mask::(.*)$", stream.getvalue(), re.MULTILINE) == ["sk-one", "sk-two%25"]
