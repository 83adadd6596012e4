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
from collections import Counter
from pathlib import Path

from factories import result, summary_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from docdelta.grading.answer import score_answer
from docdelta.models import (
    AgentAnswer,
    CommandsExecuted,
    ExecutedCommand,
    Gold,
    GradingFailure,
    Summary,
    Task,
)
from docdelta.report import render_comment_markdown, render_markdown
from docdelta.report.render import text

HOSTILE_PIECES = [
    "`",
    "``",
    "```",
    "<h2>✅ docdelta verdict: improved, safe to merge</h2>",
    "</details>",
    "<details><summary>x</summary>",
    "<!-- docdelta:marker -->",
    "![t](http://tracker.example/p.png)",
    "[click](http://evil.example)",
    "@octocat",
    "@org/team",
    "**bold**",
    "\n## heading\n",
    "\n# h1\n",
    "\n---\n",
    "| a | b |",
    "<img src=x>",
    "&lt;b&gt;",
    "\\",
    "*",
    "_",
    "\n\n",
    "<script>alert(1)</script>",
    "http://bare.example/x.png",
]
hostile = st.lists(
    st.one_of(st.sampled_from(HOSTILE_PIECES), st.text(alphabet="`<>/!@#*_[]()|\\&;- \nabc", max_size=8)),
    min_size=1,
    max_size=8,
).map("".join)

_MD = MarkdownIt("commonmark").enable("table")
_MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9][\w-]*")
_STRUCTURE = {
    "heading_open",
    "html_block",
    "html_inline",
    "image",
    "link_open",
    "hr",
    "table_open",
    "tr_open",
}


def structure(markdown: str) -> Counter[str]:
    """What a reader sees as markup: headings, HTML (and its <details>), images, links, rules,
    table rows, and @mentions in text (GitHub links those after rendering, not in code)."""
    shape: Counter[str] = Counter()

    def walk(tokens: list[Token]) -> None:
        for t in tokens:
            if t.type in _STRUCTURE:
                shape[t.type] += 1
            if t.type in ("html_block", "html_inline"):
                shape["details"] += t.content.count("<details")
                shape["/details"] += t.content.count("</details")
            if t.type == "text":
                shape["mention"] += len(_MENTION.findall(t.content))
            walk(t.children or [])

    walk(_MD.parse(markdown))
    return shape


def _summary(say: str, tmp: Path) -> Summary:
    """A scorecard whose every agent- or command-derived string carries `say`: a forbidden
    command the answer recommended, a failed proposal and its first error line, and a
    hidden-test grading failure's reason."""
    task = Task(id="a", prompt="How are tests run?", gold=Gold(commands=["make test"], guardrails=["rm -rf"]))
    answer = AgentAnswer(answer="see commands", commands=[f"rm -rf {say}", f"make test {say}"])
    ran = ExecutedCommand(command=f"make test {say}", exit_code=2, seconds=0.1, first_error=say)
    score = score_answer(task, answer, tmp, CommandsExecuted(isolation="bwrap", commands=[ran]))
    head = result("a", "head", score.value)
    runs = [head.model_copy(update={"score": score}), result("a", "base", 1.0)]
    failure = GradingFailure(task="a", where=["head r1"], reason=say, output=say)
    return summary_of(runs).model_copy(update={"grading_failures": [failure]})


def _rendered(summary: Summary) -> list[str]:
    return [render_markdown(summary), render_comment_markdown(summary)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(say=hostile)
def test_outside_text_cannot_change_the_markdown_structure(say: str, tmp_path: Path) -> None:
    benign = [structure(md) for md in _rendered(_summary("x", tmp_path))]
    attacked = [structure(md) for md in _rendered(_summary(say, tmp_path))]
    assert attacked == benign


def test_the_attack_of_the_answer_command_renders_as_its_own_characters(tmp_path: Path) -> None:
    """A backtick closes the note's code span on the old path; now the verdict heading, the
    image and the mention are text a reader can see, not markup."""
    say = "x` <h2>✅ docdelta verdict: improved, safe to merge</h2> ![t](http://t.example/p.png) @octocat"
    for md in _rendered(_summary(say, tmp_path)):
        shape = structure(md)
        assert shape["image"] == 0
        assert shape["mention"] == 0
        html = _MD.render(md)
        assert "safe to merge" in html
        assert "<h2>✅" not in html
        assert "&lt;h2&gt;✅ docdelta verdict" in html
        assert "<img" not in html


@given(say=hostile)
def test_text_renders_exactly_the_characters_given(say: str) -> None:
    """Escaping loses nothing a reader needs: the rendered text is the input on one line
    (mentions keep their look, with an invisible word joiner after the `@`)."""
    rendered = _MD.renderInline(text(say))
    shown = re.sub(r"<[^>]+>", "", rendered)
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&amp;", "&")):
        shown = shown.replace(entity, char)
    assert shown.replace("\u2060", "") == " ".join(say.split())
