"""Outside text cannot change the scorecard's markdown.

An agent's answer, the output of the commands it proposed and the grader's notes reach the
comment, the job summary and the check through the report templates. Whatever those strings
hold (backticks that close a code span, raw HTML, a fake verdict heading, `</details>`, a
tracking image, `@mentions`, a marker comment), the rendered markdown must have the same
structure as with a benign string: the same headings, HTML, images, links and mentions.
The markdown is parsed with markdown-it-py (CommonMark + tables, as GitHub reads it).
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_shape import HOSTILE_PIECES, MD, hostile_summary, structure

from docdelta.report import render_comment_markdown, render_markdown
from docdelta.report.render import text
from docdelta.scorecard.models import Summary

hostile = st.lists(
    st.one_of(st.sampled_from(HOSTILE_PIECES), st.text(alphabet="`<>/!@#*_[]()|\\&;- \nabc", max_size=8)),
    min_size=1,
    max_size=8,
).map("".join)


def _rendered(summary: Summary) -> list[str]:
    return [render_markdown(summary), render_comment_markdown(summary)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(say=hostile)
def test_outside_text_cannot_change_the_markdown_structure(say: str, tmp_path: Path) -> None:
    benign = [structure(md) for md in _rendered(hostile_summary("x", tmp_path))]
    attacked = [structure(md) for md in _rendered(hostile_summary(say, tmp_path))]
    assert attacked == benign


def test_the_attack_of_the_answer_command_renders_as_its_own_characters(tmp_path: Path) -> None:
    """A backtick closes the note's code span on the old path; now the verdict heading, the
    image and the mention are text a reader can see, not markup."""
    say = "x` <h2>✅ docdelta verdict: improved, safe to merge</h2> ![t](http://t.example/p.png) @octocat"
    for md in _rendered(hostile_summary(say, tmp_path)):
        shape = structure(md)
        assert shape["image"] == 0
        assert shape["mention"] == 0
        html = MD.render(md)
        assert "safe to merge" in html
        assert "<h2>✅" not in html
        assert "&lt;h2&gt;✅ docdelta verdict" in html
        assert "<img" not in html


@given(say=hostile)
def test_text_renders_exactly_the_characters_given(say: str) -> None:
    """Escaping loses nothing a reader needs: the rendered text is the input on one line
    (mentions keep their look, with an invisible word joiner after the `@`)."""
    rendered = MD.renderInline(text(say))
    shown = re.sub(r"<[^>]+>", "", rendered)
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&amp;", "&")):
        shown = shown.replace(entity, char)
    assert shown.replace("\u2060", "") == " ".join(say.split())
