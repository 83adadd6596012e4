"""Markdown structure as a reader sees it, and a scorecard whose outside text says what a test
chooses: shared by the escaping property test and the fake-GitHub attack test."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from factories import result, summary_of
from markdown_it import MarkdownIt
from markdown_it.token import Token

from docdelta.agents.models import AgentAnswer
from docdelta.grading.answer import score_answer
from docdelta.results.grades import CommandsExecuted, ExecutedCommand, GradingFailure
from docdelta.scorecard.models import Summary
from docdelta.tasks.models import Gold, Task

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
    "1. ",
    "2) ",
    "- ",
    "+ ",
    "= ",
    "> quote",
    ".cursor/rules/<img src=x>.mdc",
]
MD = MarkdownIt("commonmark").enable("table")
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

    walk(MD.parse(markdown))
    return shape


def hostile_summary(say: str, tmp: Path) -> Summary:
    """A scorecard whose every agent- or command-derived string carries `say`: a forbidden
    command the answer recommended, a failed proposal and its first error line, and a
    hidden-test grading failure's reason, and why the PR's own code gave no verdict (its
    `conftest.py`'s output, quoted in the lead of an evaluation decided on base's code)."""
    task = Task(id="a", prompt="How are tests run?", gold=Gold(commands=["make test"], guardrails=["rm -rf"]))
    answer = AgentAnswer(answer="see commands", commands=[f"rm -rf {say}", f"make test {say}"])
    ran = ExecutedCommand(command=f"make test {say}", exit_code=2, seconds=0.1, first_error=say)
    score = score_answer(task, answer, tmp, CommandsExecuted(isolation="bwrap", commands=[ran]))
    head = result("a", "head", score.value)
    runs = [head.model_copy(update={"score": score}), result("a", "base", 1.0)]
    failure = GradingFailure(task="a", where=["head r1"], reason=say, output=say)
    return summary_of(runs).model_copy(
        update={"grading_failures": [failure], "decided_on_base": say, "broken": say}
    )
