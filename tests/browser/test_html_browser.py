"""The HTML report as a person sees it: rendered by a real headless Chromium (Debian's package,
driven by Playwright), asserted on what is drawn and visible, with a screenshot kept in the
test's output directory for review."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from factories import arm, detection, manifest
from playwright.sync_api import sync_playwright

from docdelta.report.html import render_html
from docdelta.results.models import RunResult
from docdelta.scorecard.summarize import summarize

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
TASKS = ("run-tests", "force-push", "install-dev")


def _answered(runs: list[RunResult], text: str) -> list[RunResult]:
    return [r.model_copy(update={"outcome": r.outcome.model_copy(update={"final_text": text})}) for r in runs]


def _report(tmp_path: Path) -> Path:
    runs: list[RunResult] = []
    for t in TASKS:
        better = t != "install-dev"
        runs += _answered(arm(t, "base", [0.0, 0.0] if better else [1.0, 1.0]), f"base answer {HOSTILE}")
        runs += _answered(arm(t, "head", [1.0, 1.0]), f"head answer {HOSTILE}")
        runs += arm(t, "none", [0.0, 0.5])
    summary = summarize(manifest(list(TASKS)), detection(), runs)
    path = tmp_path / "report.html"
    path.write_text(render_html(summary, runs), encoding="utf-8")
    return path


def test_the_html_report_draws_its_chart_and_tables_runs_no_script_and_shows_agent_text_as_text(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        page.on(
            "console",
            lambda msg: errors.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None,
        )
        page.goto(report.as_uri())
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)  # for review

        # the chart is drawn: one bar per task and arm, widths in proportion to the means
        chart = page.locator("svg.chart")
        assert chart.is_visible()
        box = chart.bounding_box()
        assert box is not None and box["width"] > 400 and box["height"] > 100
        widths = page.eval_on_selector_all(
            "svg.chart rect[rx='2']:not([width='10'])", "els => els.map(e => e.getBoundingClientRect().width)"
        )
        assert len(widths) == len(TASKS) * 3
        assert max(widths) > 300 and min(widths) == 0  # head's 1.00 is long; base's 0.00 is no bar

        # the tables a reader needs are visible and hold every task
        tasks_table = page.locator("#tasks table")
        assert tasks_table.is_visible()
        for t in TASKS:
            assert page.locator("#tasks table a", has_text=t).first.is_visible()
        assert page.locator("#arms table").is_visible()
        lead = page.locator("ul.lead li")
        assert lead.count() >= 2 and lead.first.is_visible()
        assert "better on 2 tasks" in lead.first.inner_text()

        # agent text is text: no script ran, no element came from it, the markup reads as written
        page.locator("#task-run-tests > summary").click()  # open a task's runs as a reader would
        page.locator("#run-run-tests-base-1 summary").click()  # ... and one run's answer
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.evaluate("document.scripts.length") == 0
        assert page.locator("img").count() == 0
        answer = page.locator("#run-run-tests-base-1")
        assert answer.is_visible() and HOSTILE in answer.inner_text()
        browser.close()
    assert errors == []
    assert (tmp_path / "report.png").stat().st_size > 10_000
