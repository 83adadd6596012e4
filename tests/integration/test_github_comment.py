"""The sticky comment body: marker first, always under GitHub's limit, never a failure."""

from __future__ import annotations

import pytest
from jinja2 import TemplateRuntimeError

from docdelta.github.comment import COMMENT_LIMIT, marker, render_comment, render_template

LINK = "https://github.com/o/r/actions/runs/1"


def details(title: str, size: int) -> str:
    return f"<details><summary>{title}</summary>\n\n" + ("detail line\n" * (size // 12)) + "</details>\n"


def test_a_small_report_is_left_untouched_behind_the_marker() -> None:
    body = "## docdelta: head improves on base\n| task | base | head |\n"
    assert render_comment("api", body, full_report_url=LINK) == f"<!-- docdelta:api -->\n{body}"


def test_a_200k_report_is_trimmed_in_its_details_first_keeping_the_table() -> None:
    table = "## Verdict: regression\n| task | base | head |\n|---|---|---|\n" + "| t | 0.5 | 0.4 |\n" * 100
    body = table + details("What the agent missed", 120_000) + details("Transcripts", 80_000)

    out = render_comment("default", body, full_report_url=LINK)

    assert len(body) > 200_000
    assert len(out) <= COMMENT_LIMIT
    assert out.startswith("<!-- docdelta:default -->\n## Verdict: regression")
    assert table in out
    assert "<summary>What the agent missed</summary>" in out
    assert "<summary>Transcripts</summary>" in out
    assert out.count("<details>") == out.count("</details>") == 2
    assert f"[job summary]({LINK})" in out


def test_a_report_without_details_is_cut_at_the_tail_with_fences_closed() -> None:
    body = "## Verdict\n```text\n" + "log line\n" * 30_000

    out = render_comment("default", body, full_report_url=LINK)

    assert len(out) <= COMMENT_LIMIT
    assert out.startswith("<!-- docdelta:default -->\n## Verdict\n```text\nlog line\n")
    before_notice = out[: out.index("> **Trimmed**")]
    assert before_notice.count("```") % 2 == 0
    assert out.rstrip().endswith(f"[job summary]({LINK}).")


def test_only_details_that_do_not_fit_are_emptied() -> None:
    small = details("Confounds", 500)
    body = small + details("Transcripts", 100_000)

    out = render_comment("default", body, full_report_url=LINK)

    assert small in out
    assert "detail line" * 2 not in out[len(small) + 30 :].replace("\n", "")


def test_the_template_refuses_to_render_without_a_marker() -> None:
    for bad in (None, "", "<!-- something else -->"):
        with pytest.raises(TemplateRuntimeError, match="marker"):
            render_template(bad, "body")
    assert render_template(marker("x"), "body") == "<!-- docdelta:x -->\nbody"


@pytest.mark.parametrize("config_id", ["", "a--b", "a -->x", "a\nb"])
def test_config_ids_that_could_break_the_marker_are_refused(config_id: str) -> None:
    with pytest.raises(ValueError, match="config id"):
        marker(config_id)
