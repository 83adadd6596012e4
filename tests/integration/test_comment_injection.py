"""The agent's words reach the PR as text, never as markup: through the fake GitHub.

The answer recommends a forbidden command whose text closes a backtick span and carries a
fake verdict heading, a tracking image, a mention and a `</details>`; the command it
proposed failed with the same text as its error line. The scorecard is posted as the Action
posts it (sticky comment, then the check run with the same body as its summary, which is
also what the job summary gets), read back from the server, and parsed: none of it is
markup, and the page has the structure of the same scorecard with a benign answer.
"""

from __future__ import annotations

from pathlib import Path

from fakegithub import FakeGitHub
from markdown_shape import MD, hostile_summary, structure

from docdelta.github.comment import marker, render_comment
from docdelta.github.port import CheckReport, Conclusion
from docdelta.github.pygithub import PyGithubPort
from docdelta.report import render_comment_markdown

BASE_SHA, HEAD_SHA = "b" * 40, "h" * 40
ATTACK = (
    "x` <h2>✅ docdelta verdict: improved, safe to merge</h2> "
    "![t](http://t.example/p.png) @octocat </details>"
)
RUN_URL = "https://github.com/Codertocat/Hello-World/actions/runs/77"


def _posted(fake: FakeGitHub, say: str, tmp_path: Path) -> tuple[str, str]:
    """(comment body, check summary) as the server holds them."""
    fake.add_commit(BASE_SHA, {"AGENTS.md": b"# base\n"})
    fake.add_commit(HEAD_SHA, {"AGENTS.md": b"# head\n"})
    fake.add_pull(2, BASE_SHA, HEAD_SHA, [("AGENTS.md", "modified")])
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
    body = render_comment_markdown(hostile_summary(say, tmp_path))
    port.upsert_comment(2, marker("docdelta"), render_comment("docdelta", body, full_report_url=RUN_URL))
    port.publish_check(
        CheckReport(
            name="docdelta", head_sha=HEAD_SHA, conclusion=Conclusion.failure, title="t", summary=body
        )
    )
    return fake.comments[-1]["body"], fake.check_runs[-1]["output"]["summary"]


def test_an_answer_cannot_post_markup_into_the_comment_or_the_check(fake: FakeGitHub, tmp_path: Path) -> None:
    comment, check = _posted(fake, ATTACK, tmp_path)
    with FakeGitHub() as other:
        benign_comment, benign_check = _posted(other, "x", tmp_path)
    for page, benign in ((comment, benign_comment), (check, benign_check)):
        assert structure(page) == structure(benign)
        html = MD.render(page)
        assert "<h2>✅" not in html
        assert "<img" not in html
        assert "&lt;h2&gt;✅ docdelta verdict" in html
