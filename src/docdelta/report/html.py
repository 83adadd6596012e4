"""The HTML report: one self-contained file for people who would rather look than read.

Same numbers as the markdown scorecard (it renders the same `Summary`), plus what a
comment has no room for: a bar chart of per-task scores per arm, and every run's
details (status, score, usage, what it missed, the commands it ran, its answer, the
judge's rulings with the quotes it gave) with links to the files in its cell directory.
A run's judged.json is folded into the score it shows, as the summary folds it, so
a run's row and the scorecard never disagree.

Self-contained means it can be attached to a CI run or mailed and still open: inline
CSS, inline SVG, no scripts, fonts, images or URLs of its own. Agent text is
untrusted, so the templates (`templates/html/*.html.j2`) are autoescaped by the
shared environment; a `<script>` in an answer shows as text. Links to run files are
relative to `link_root` (where the report will be saved), so the report and the
workdir can move together.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from docdelta.grading.judge import needs_quote
from docdelta.grading.judged import apply_judgement, read_judged
from docdelta.report.plain import lead
from docdelta.report.render import environment
from docdelta.results.grades import JudgeRuling
from docdelta.results.layout import DIFF_FILE, JUDGED_FILE, REPORT_FILE, RESULT_FILE, TRANSCRIPT_FILE
from docdelta.results.models import Cell, JudgedResult, RunResult
from docdelta.scorecard.models import Summary, TaskSummary
from docdelta.vocabulary import BASE, HEAD, NONE, PATCHED

RUN_FILES = (RESULT_FILE, JUDGED_FILE, TRANSCRIPT_FILE, DIFF_FILE)
"""Files of a cell directory the report links to, each only when it exists."""

COLORS = {BASE: "#8a94a6", HEAD: "#2f6fde", NONE: "#d2a24c", PATCHED: "#3a9d5d"}
FALLBACK_COLORS = ("#9b59b6", "#e0607e", "#16a3a3", "#6b6b6b")
"""Conditions beyond the four known ones take these in order."""

# Chart geometry, in SVG user units (px at 100%).
LABEL_W, PLOT_W, VALUE_W = 210, 620, 50
BAR_H, BAR_GAP, GROUP_GAP, TOP, LEGEND_H = 13, 2, 14, 28, 26
MAX_LABEL = 30


@dataclass(frozen=True)
class Bar:
    y: float
    width: float
    color: str
    value: str
    value_x: float
    """Where the value label starts: past both the bar and its whisker."""
    title: str
    whisker: tuple[float, float] | None
    """x of the lowest and highest run score: the spread behind the mean."""


@dataclass(frozen=True)
class ChartRow:
    label: str
    title: str
    y: float
    bars: list[Bar]


@dataclass(frozen=True)
class Chart:
    """Horizontal grouped bars: one group per task, one bar per arm, scores 0..1."""

    width: int
    height: float
    plot_x: int
    plot_w: int
    bar_h: int
    top: int
    rows: list[ChartRow]
    ticks: list[tuple[float, str]]
    legend: list[tuple[str, str]]


def colors(conditions: Sequence[str]) -> dict[str, str]:
    extra = iter(FALLBACK_COLORS * (len(conditions) // len(FALLBACK_COLORS) + 1))
    return {c: COLORS.get(c) or next(extra) for c in conditions}


def chart(summary: Summary) -> Chart:
    """The bar geometry for the template (the template only draws)."""
    palette = colors(summary.conditions)
    rows: list[ChartRow] = []
    y = float(TOP)
    for t in summary.tasks:
        bars = []
        for i, c in enumerate(summary.conditions):
            st = t.conditions[c]
            mean = st.mean_score
            spread = None
            if st.score_min is not None and st.score_max is not None and st.score_min < st.score_max:
                spread = (LABEL_W + st.score_min * PLOT_W, LABEL_W + st.score_max * PLOT_W)
            value = "—" if mean is None else f"{mean:.2f}"
            width = 0.0 if mean is None else mean * PLOT_W
            bars.append(
                Bar(
                    y=y + i * (BAR_H + BAR_GAP),
                    width=width,
                    color=palette[c],
                    value=value,
                    value_x=max(LABEL_W + width, spread[1] if spread else 0.0) + 5,
                    title=f"{t.task} · {c}: mean {value} over {st.runs} graded run(s)",
                    whisker=spread,
                )
            )
        group_h = len(bars) * (BAR_H + BAR_GAP) - BAR_GAP
        label = t.task if len(t.task) <= MAX_LABEL else t.task[: MAX_LABEL - 1] + "…"
        rows.append(ChartRow(label=label, title=t.task, y=y + group_h / 2, bars=bars))
        y += group_h + GROUP_GAP
    ticks = [(LABEL_W + v * PLOT_W, f"{v:.2f}".rstrip("0").rstrip(".")) for v in (0, 0.25, 0.5, 0.75, 1)]
    return Chart(
        width=LABEL_W + PLOT_W + VALUE_W,
        height=y + LEGEND_H,
        plot_x=LABEL_W,
        plot_w=PLOT_W,
        bar_h=BAR_H,
        top=TOP,
        rows=rows,
        ticks=ticks,
        legend=[(c, palette[c]) for c in summary.conditions],
    )


@dataclass(frozen=True)
class RulingView:
    """One judge ruling in words: what was ruled, the quote, and whether the quote stood."""

    ruling: JudgeRuling
    outcome: str
    """made / not made / respected / broken, or "claimed ..., unsupported"."""
    evidence: str
    """Whether the quote the claim needs was found verbatim in the answer."""


def ruling_view(r: JudgeRuling) -> RulingView:
    words = {"point": ("made", "not made"), "rule": ("respected", "broken")}[r.kind]
    claim = words[0] if r.met else words[1]
    needed = needs_quote(r.kind, r.met)
    outcome = claim if r.supported or not needed else f"claimed {claim}, unsupported"
    if not needed:
        evidence = "no quote needed"
    elif r.supported:
        evidence = "quote found verbatim in the answer"
    else:
        evidence = "quote not found in the answer" if r.quote else "no quote given"
    return RulingView(r, outcome, evidence)


@dataclass(frozen=True)
class RunView:
    """One run as the details table shows it."""

    result: RunResult
    tokens: int | None
    missed: list[tuple[str, str]]
    """(kind, expected) of each scored item the run missed."""
    ran: list[str]
    answer: str
    links: list[tuple[str, str]]
    judge: str | None = None
    """`provider/model` of the judge, when the run was judged."""
    rulings: tuple[RulingView, ...] = ()


@dataclass(frozen=True)
class TaskView:
    summary: TaskSummary
    runs: list[RunView]


def _ran(result: RunResult) -> list[str]:
    """What the agent ran, then (gold.execute) its proposals as they ran afterwards."""
    agent = [
        c.command if c.exit_code is None else f"{c.command}  → exit {c.exit_code}"
        for c in result.outcome.metrics.commands
    ]
    executed = result.executed.commands if result.executed is not None else []
    return agent + [
        f"proposed: {c.command}  → {'timed out' if c.timed_out else f'exit {c.exit_code}'}"
        + (f": {c.first_error}" if c.first_error else "")
        for c in executed
    ]


def _links(cell: Cell, cell_dir: Callable[[Cell], Path] | None, link_root: Path) -> list[tuple[str, str]]:
    if cell_dir is None:
        return []
    directory = cell_dir(cell)
    return [
        (name, quote(Path(os.path.relpath(directory / name, link_root)).as_posix()))
        for name in RUN_FILES
        if (directory / name).is_file()
    ]


def _run_view(
    result: RunResult,
    judged: JudgedResult | None,
    cell_dir: Callable[[Cell], Path] | None,
    link_root: Path,
) -> RunView:
    if judged is not None and result.score is not None:
        result = result.model_copy(update={"score": apply_judgement(result.score, judged)})
    outcome = result.outcome
    items = result.score.missed if result.score else []
    missed: list[tuple[str, str]] = [(i.kind, i.expected) for i in items]
    m = outcome.metrics
    tokens = None if m.tokens_in is None or m.tokens_out is None else m.tokens_in + m.tokens_out
    answer = outcome.answer.answer if outcome.answer and outcome.answer.answer else outcome.final_text
    return RunView(
        result,
        tokens,
        missed,
        _ran(result),
        answer,
        _links(result.cell, cell_dir, link_root),
        judge=None if judged is None else str(judged.judge),
        rulings=() if judged is None else tuple(ruling_view(r) for r in judged.rulings),
    )


def _judged_in_cells(
    results: Sequence[RunResult], cell_dir: Callable[[Cell], Path] | None
) -> dict[str, JudgedResult]:
    """Each run's judged.json, read the way `load_judged` reads it for the scorecard (an
    unreadable one counts as not judged), so the rows and the scorecard fold the same rulings."""
    if cell_dir is None:
        return {}
    found = {r.cell.key: read_judged(cell_dir(r.cell) / JUDGED_FILE) for r in results}
    return {key: j for key, j in found.items() if j is not None}


def task_views(
    summary: Summary,
    results: Sequence[RunResult],
    cell_dir: Callable[[Cell], Path] | None = None,
    link_root: Path = Path(),
    judged: Mapping[str, JudgedResult] | None = None,
) -> list[TaskView]:
    """Tasks with their runs (arm order, then repeat), flips first: the tasks to open first.

    `judged` (by cell key, as `load_judged` gives) defaults to the judged.json found in
    each run's cell directory."""
    rulings = _judged_in_cells(results, cell_dir) if judged is None else judged
    order = {c: i for i, c in enumerate(summary.conditions)}
    views = []
    for t in summary.tasks:
        runs = sorted(
            (r for r in results if r.cell.task == t.task),
            key=lambda r: (order.get(r.cell.condition, len(order)), r.cell.condition, r.cell.repeat),
        )
        views.append(TaskView(t, [_run_view(r, rulings.get(r.cell.key), cell_dir, link_root) for r in runs]))
    return sorted(views, key=lambda v: not v.summary.head_vs_base.flip)


def render_html(
    summary: Summary,
    results: Sequence[RunResult],
    *,
    cell_dir: Callable[[Cell], Path] | None = None,
    link_root: Path = Path(),
    judged: Mapping[str, JudgedResult] | None = None,
) -> str:
    """The report as one HTML document. `cell_dir` maps a cell to its directory (e.g.
    `partial(store.cell_dir, repo)`); without it the runs are listed without links.
    `judged`: the judge's rulings by cell key; by default each cell's judged.json."""
    return (
        environment()
        .get_template("html/report.html.j2")
        .render(
            s=summary,
            tasks=task_views(summary, results, cell_dir, link_root, judged),
            chart=chart(summary),
            colors=colors(summary.conditions),
            lead=lead(summary, repeats_flag="--repeats {n}"),
        )
    )


def write_html(
    directory: Path, summary: Summary, results: Sequence[RunResult], cell_dir: Callable[[Cell], Path]
) -> Path:
    """`REPORT_FILE` in `directory`, its links to run files relative to it, so the directory
    (an uploaded artifact) opens as one page with every run's transcript, answer and rulings."""
    path = directory / REPORT_FILE
    html = render_html(summary, results, cell_dir=cell_dir, link_root=path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
