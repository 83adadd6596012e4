"""The HTML report: self-contained, inert agent text, the chart, every run, links to run files.

Pages are parsed with the standard library's HTML parser, so the assertions are about
the elements and attributes a browser would see, not about substrings of markup."""

from __future__ import annotations

from functools import partial
from html.parser import HTMLParser
from pathlib import Path

import pytest
from factories import arm, detection, judged, manifest, result, ruling, summary_of

from docdelta.agents.models import AgentAnswer, CommandRun, RunStatus
from docdelta.cli.main import main
from docdelta.instructions.models import ChangedFile, FileStatus
from docdelta.report.html import PLOT_W, render_html
from docdelta.results.grades import CheckResult, ChecksResult, HiddenTestResult, MistakeHit, TestCounts
from docdelta.results.layout import JUDGED_FILE
from docdelta.results.models import JudgedResult, RunResult
from docdelta.results.store import ResultStore

EVIL = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


class Page(HTMLParser):
    """Every start tag with its attributes, and the text a reader sees."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag]

    @property
    def plain(self) -> str:
        return "".join(self.text)


def with_answer(
    r: RunResult, answer: str, *, ran: tuple[str, ...] = (), read: tuple[str, ...] = ()
) -> RunResult:
    metrics = r.outcome.metrics.model_copy(
        update={"commands": [CommandRun(command=c, exit_code=1) for c in ran], "files_read": list(read)}
    )
    outcome = r.outcome.model_copy(
        update={"answer": AgentAnswer(answer=answer, commands=list(ran)), "metrics": metrics}
    )
    return r.model_copy(update={"outcome": outcome})


@pytest.fixture
def runs() -> list[RunResult]:
    """Task `zeta` flips significantly (base fails 6 of 6, head passes 6 of 6); task `alpha`
    does not; one infra error. The flip sorts last by name, so a report that lists it first
    put it there on purpose."""
    out = [*arm("zeta", "base", [0.0] * 6, missed=["make check"]), *arm("zeta", "head", [1.0] * 6)]
    out += [*arm("alpha", "base", [1.0, 1.0, 0.25]), *arm("alpha", "head", [1.0, 1.0])]
    out += [result("alpha", "head", None, 3, status=RunStatus.infra_error)]
    out[6] = with_answer(
        out[6], f"Run make check. {EVIL}", ran=("make check && echo '<b>ok</b>'",), read=("AGENTS.md",)
    )
    return out


def test_page_is_self_contained(runs: list[RunResult]) -> None:
    html = render_html(summary_of(runs), runs)
    page = Page(html)
    assert not page.all("script")
    assert not page.all("link") and not page.all("img") and not page.all("iframe")
    urls = [v for _, attrs in page.tags for k, v in attrs.items() if k in ("src", "href", "action", "srcset")]
    assert all(u.startswith("#") for u in urls), urls
    assert "http://" not in html and "https://" not in html
    assert "url(" not in html and "@import" not in html
    csp = [a["content"] for a in page.all("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]


def test_agent_text_is_escaped_and_stays_readable(runs: list[RunResult]) -> None:
    html = render_html(summary_of(runs), runs)
    page = Page(html)
    assert EVIL not in html and "<b>ok</b>" not in html
    assert not page.all("script")
    assert not any("onerror" in attrs for _, attrs in page.tags)
    assert EVIL in page.plain  # shown as text, exactly as the agent wrote it
    assert "make check && echo '<b>ok</b>'  → exit 1" in page.plain


def test_untrusted_file_names_from_the_pr_are_escaped(runs: list[RunResult]) -> None:
    s = summary_of(runs)
    evil = ChangedFile(path='x/"><script>alert(1)</script>.md', status=FileStatus.added, families=["codex"])
    html = render_html(s.model_copy(update={"changed": [evil]}), runs)
    assert not Page(html).all("script")
    assert evil.path in Page(html).plain


def test_chart_has_one_bar_per_task_and_arm_sized_by_mean_score(runs: list[RunResult]) -> None:
    page = Page(render_html(summary_of(runs), runs))
    assert len(page.all("svg")) == 1
    bars = [a for a in page.all("rect") if a.get("height") == "13"]
    assert len(bars) == 4  # 2 tasks x 2 arms
    widths = sorted(float(b["width"]) for b in bars)
    assert widths == [0.0, 0.75 * PLOT_W, PLOT_W, PLOT_W]  # zeta base 0, alpha base 0.75, heads 1.0


def test_every_run_is_listed_with_its_numbers_flips_first(runs: list[RunResult]) -> None:
    page = Page(render_html(summary_of(runs), runs))
    rows = [a["id"] for a in page.all("tr") if a.get("id", "").startswith("run-")]
    assert sorted(rows) == sorted(f"run-{r.cell.task}-{r.cell.condition}-{r.cell.repeat}" for r in runs)
    details = [a for a in page.all("details") if a.get("class") == "task"]
    assert [d["id"] for d in details] == ["task-zeta", "task-alpha"]  # the flip first
    assert "open" in details[0] and "open" not in details[1]
    assert "infra_error" in page.plain
    assert "command make check" in " ".join(page.plain.split())  # what the failing base runs missed


def test_links_point_at_the_run_files_that_exist(tmp_path: Path, runs: list[RunResult]) -> None:
    store = ResultStore(tmp_path / "work")
    for r in runs:
        store.save("demo", r)
    transcript = store.cell_dir("demo", runs[0].cell) / "transcript.txt"
    transcript.write_text("hello")
    root = tmp_path / "site"
    root.mkdir()
    html = render_html(summary_of(runs), runs, cell_dir=partial(store.cell_dir, "demo"), link_root=root)
    hrefs = [a["href"] for a in Page(html).all("a") if not a["href"].startswith("#")]
    assert len([h for h in hrefs if h.endswith("/result.json")]) == len(runs)
    assert [h for h in hrefs if not h.endswith("/result.json")] == [
        "../work/runs/demo/zeta/base/r1/transcript.txt"
    ]
    assert all((root / h).resolve().is_file() for h in hrefs)


def test_cli_writes_the_html_report_with_links_relative_to_the_current_directory(
    tmp_path: Path, runs: list[RunResult], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ResultStore(tmp_path / "results")
    store.write_manifest(manifest(["zeta", "alpha"], ("base", "head")))
    store.write_detection(detection())
    for r in runs:
        store.save("demo", r)
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--workdir", "results", "--format", "html"]) == 0
    page = Page(capsys.readouterr().out)
    hrefs = [a["href"] for a in page.all("a") if not a["href"].startswith("#")]
    assert len(hrefs) == len(runs)
    assert all((tmp_path / h).is_file() for h in hrefs)
    assert "docdelta scorecard: " in page.plain


def test_tokens_cost_and_duration_of_a_run_are_shown() -> None:
    r = result("a", "head", 1.0, tokens=(1200, 34), cost=0.5, duration=12.3)
    page = Page(render_html(summary_of([r]), [r]))
    cells = {" ".join(t.split()) for t in page.text}
    assert {"1,234", "$0.50", "12.3s"} <= cells


def test_a_change_runs_hidden_tests_checks_and_mistakes_are_shown() -> None:
    hidden = HiddenTestResult(status="fail", exit_code=1, counts=TestCounts(passed=3, failed=1))
    checks = ChecksResult(
        checks=[
            CheckResult(name="require_changed", passed=True),
            CheckResult(name="max_files", passed=False),
        ],
        mistakes=[MistakeHit(rule="no-force-push", count=2), MistakeHit(rule="no-sudo", count=0)],
    )
    r = result("a", "head", 0.0).model_copy(update={"hidden_tests": hidden, "checks": checks})
    text = " ".join(Page(render_html(summary_of([r]), [r])).plain.split())
    assert "hidden tests: fail (3 passed, 1 failed)" in text
    assert "checks 1/2 passed; mistake no-force-push hit 2x" in text
    assert "no-sudo" not in text


def _judged_run() -> tuple[RunResult, dict[str, JudgedResult]]:
    r = with_answer(result("a", "head", 1.0, points=3), f"Run make check. {EVIL}")
    verdict = judged(
        r,
        ruling("point", "names make check", met=True, quote=EVIL),
        ruling("point", "names the lint step", met=True, quote="made up", supported=False),
        ruling("point", "mentions CI", met=False).model_copy(update={"reason": "no word on CI"}),
        ruling("rule", "never force-push", met=False, quote="git push --force"),
        ruling("rule", "never sudo", met=True),
    )
    return r, {r.cell.key: verdict}


def _ruling_lines(page: Page) -> list[str]:
    """The rulings list of the first judged run, one line per ruling."""
    text = page.plain.split("judge openai/judge-model:", 1)[1]
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()][:5]


def test_judge_rulings_show_each_quote_escaped_and_whether_it_stood() -> None:
    r, verdicts = _judged_run()
    # the summary is left unjudged (score 1.00), so a 0.40 on the page can only be the run's row
    html = render_html(summary_of([r]), [r], judged=verdicts)
    page = Page(html)
    assert not page.all("script") and not any("onerror" in attrs for _, attrs in page.tags)
    assert len(page.all("q")) == 3  # one per quote the judge gave
    assert [a["id"] for a in page.all("tr") if a.get("class") == "rulings"] == ["rulings-a-head-1"]
    assert _ruling_lines(page) == [
        f"✓ point names make check: made, quoting {EVIL} (quote found verbatim in the answer)",
        "✗ point names the lint step: claimed made, unsupported, quoting made up "
        "(quote not found in the answer)",
        "✗ point mentions CI: not made (no quote needed) — no word on CI",
        "✗ rule never force-push: broken, quoting git push --force (quote found verbatim in the answer)",
        "✓ rule never sudo: respected (no quote needed)",
    ]
    cells = {" ".join(t.split()) for t in page.text}
    assert "0.40" in cells  # the run's score with the judge's 2 hits of 5, as the scorecard counts it
    assert "0.40" not in {" ".join(t.split()) for t in Page(render_html(summary_of([r]), [r])).text}


def test_runs_without_a_judgement_show_no_rulings(runs: list[RunResult]) -> None:
    page = Page(render_html(summary_of(runs), runs))
    assert not [a for a in page.all("tr") if a.get("class") == "rulings"]
    assert "judge " not in page.plain


def test_the_cli_report_reads_each_runs_judged_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    r, verdicts = _judged_run()
    other = result("a", "base", 1.0, points=3)
    store = ResultStore(tmp_path / "results")
    store.write_manifest(manifest(["a"], ("base", "head"), repeats=1))
    store.write_detection(detection())
    for run in (r, other):
        store.save("demo", run)
    (store.cell_dir("demo", r.cell) / JUDGED_FILE).write_text(verdicts[r.cell.key].model_dump_json())
    (store.cell_dir("demo", other.cell) / JUDGED_FILE).write_text("{not json")  # unreadable: not judged
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--workdir", "results", "--format", "html"]) == 0
    page = Page(capsys.readouterr().out)
    assert [a["id"] for a in page.all("tr") if a.get("class") == "rulings"] == ["rulings-a-head-1"]
    assert _ruling_lines(page)[0].startswith("✓ point names make check: made, quoting <script>")
    assert "judged.json" in [t.strip() for t in page.text]  # linked beside result.json


def test_header_shows_the_aa_noise_band(runs: list[RunResult]) -> None:
    s = summary_of(runs)
    assert s.aa_noise is not None
    page = Page(render_html(s, runs))
    header = page.plain.split("Verdict:", 1)[0]
    assert f"A/A noise at this size: ±{s.aa_noise.band:.2f} — differences up to this" in header
    assert "The verdict does not use this band" in header
    assert [a for a in page.all("p") if a.get("class") == "aa"]
