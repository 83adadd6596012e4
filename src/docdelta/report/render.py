"""Render a `Summary` as a markdown scorecard or as JSON.

Templates live in `report/templates/` and are loaded from the installed package
(PackageLoader), so a wheel renders the same as a checkout. The scorecard is built
from partials (`_verdict`, `_table`, `_usage`, `_missed`, `_confounds`, `_changed`) that the
GitHub comment wraps with its own marker and header, so both always show the same
numbers. The environment is sandboxed and strict: a template typo fails loudly
instead of printing an empty cell, and text that came from agents, commands or task files
passes through the `text` (escaped prose) or `code` filters, so it cannot add markup,
close a section or break the table; `cell`/`inline` only keep a line one line.
The HTML report (`report/html.py`) shares this environment; its `*.html.j2`
templates are autoescaped.

Compiling the templates costs more than rendering them (most of a second), so their
compiled code is kept in the user's cache directory (`template_cache`) under a key of
everything the compiled code depends on; a cache that cannot be made private is not used.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

import jinja2
from jinja2 import Environment, FileSystemBytecodeCache, PackageLoader, StrictUndefined, select_autoescape
from jinja2.sandbox import SandboxedEnvironment
from markdown_it import MarkdownIt
from markupsafe import Markup

from docdelta.report.glance import glance
from docdelta.report.plain import SCORECARD_DOCS, lead, mark
from docdelta.scorecard import thresholds
from docdelta.scorecard.models import (
    Certainty,
    Delta,
    InstructionRef,
    SuiteRepoState,
    SuiteSummary,
    Summary,
    TaskSummary,
    VerdictSummary,
)
from docdelta.text import LISTED
from docdelta.vocabulary import sha256_hex

NO_VALUE = "—"
VERDICT_TITLES = {
    "improved": "improved",
    "regressed": "regressed",
    "no_change": "no change (noise)",
    "inconclusive": "inconclusive",
}
"""How the header names each verdict: a difference inside the noise band is called noise."""


def fmt_score(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.2f}"


def fmt_signed(value: float | None) -> str:
    """`+0.12` / `-0.04`; a value that rounds to zero prints as `0.00`, never `-0.00`."""
    if value is None:
        return NO_VALUE
    return "0.00" if round(value, 2) == 0 else f"{value:+.2f}"


def fmt_delta(delta: Delta) -> str:
    """A delta with its certainty mark (`models.Certainty`, the decision rule's own):
    `+0.54 (significant)`, `+0.67 (not significant)`, `0.00 (noise band)`; bare without a decision."""
    text = fmt_signed(delta.value)
    word = mark(delta.certainty)
    return f"{text} ({word})" if word and delta.value is not None else text


def fmt_aa_noise(summary: Summary) -> str:
    """The A/A band in one sentence, shared by the markdown verdict block and the HTML header.

    It says where head - base falls and that the verdict ignores this band, so a reader
    does not take "inside A/A noise" and "improved" for a contradiction."""
    a = summary.aa_noise
    if a is None:
        return ""
    d = summary.head_vs_base
    where = ""
    if d.value is not None:
        where = f"; head - base {fmt_signed(d.value)} lies {'inside' if d.aa_noise else 'outside'} it"
    return (
        f"A/A noise at this size: ±{a.band:.2f} — differences up to this are what identical docs produce "
        f"({a.quantile:.0%} of {a.simulations:,} simulated A/A experiments of {a.tasks} "
        f"task{'s' if a.tasks != 1 else ''} x {a.repeats} repeats, drawn from each task's observed "
        f"scores, stay within it){where}; each task's delta is held to its own, wider band. "
        f"The verdict does not use this band: it stays the significance test and the configured "
        f"±{summary.noise_band:.2f}."
    )


def fmt_pnum(value: float | None) -> str:
    """A p-value as a table cell: two significant digits, and never a bare 0."""
    if value is None:
        return NO_VALUE
    return "<0.001" if value < 0.001 else f"{value:.2g}"


def fmt_p(value: float | None) -> str:
    """`p = 0.1`, `p < 0.001`."""
    text = fmt_pnum(value)
    return text if value is None else (f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}")


def by_p(refs: Sequence[InstructionRef]) -> list[InstructionRef]:
    """Instruction-usage rows, the smallest head vs base p first: the lines whose edit
    changed what the agents did lead, whatever file the diff lists first; rows without a
    p (no head or no base runs) last; ties keep the diff's order."""
    return sorted(refs, key=lambda r: (r.p_value is None, r.p_value or 0.0))


def fmt_verdict(verdict: VerdictSummary | None) -> str:
    return "no verdict" if verdict is None else VERDICT_TITLES[verdict.kind]


def fmt_usage_shift(value: float, metric: str) -> str:
    """A usage shift in the metric's unit: `+1,234 tokens`, `-$0.01`."""
    if metric == "cost_usd":
        return ("-" if value < 0 else "+") + fmt_usd(abs(value))
    return f"{value:+,.0f} {metric}"


def fmt_vs(value: float | None, base: float | None) -> str:
    """` (+26%)`: a value against base's, for usage cells; empty when either is missing or base is 0."""
    if value is None or base is None or base == 0:
        return ""
    return f" ({(value - base) / base:+.0%})"


def fmt_count(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:,.0f}"


def fmt_usd(value: float | None) -> str:
    if value is None:
        return NO_VALUE
    return f"${value:.4f}" if 0 < value < 0.01 else f"${value:.2f}"


def fmt_seconds(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.1f}s"


_INLINE_MD = MarkdownIt("commonmark", {"html": False})
"""Lead lines to HTML: CommonMark with raw HTML off, so any `<tag>` in a task id or path is text."""


def lead_html(line: str) -> Markup:
    """A lead line (markdown: bold, italics, code, links) as HTML for the report."""
    return Markup(_INLINE_MD.renderInline(line))  # noqa: S704 - markdown-it escapes raw HTML (html=False)


def inline(text: object) -> str:
    """One line of markdown: newlines collapse to spaces so a list item stays one item."""
    return " ".join(str(text).split())


def cell(text: object) -> str:
    """A table cell: one line, with pipes escaped so the row keeps its columns."""
    return inline(text).replace("|", "\\|")


_MARKUP_RE = re.compile(r"([\\`*_\[\]()<>#!|~&])")
"""Punctuation that opens markup anywhere in a line: emphasis, code, links and images, raw
HTML and entities, table cells, strikethrough. CommonMark lets each be backslash-escaped."""
_BLOCK_START_RE = re.compile(r"^(\d+)([.)])|^([-+=])")
"""What opens a block only at the start of a line: an ordered or bullet list, a setext rule."""
_MENTION_RE = re.compile(r"@(?=[A-Za-z0-9])")
WORD_JOINER = "\u2060"
"""Put after an `@` that starts a name: GitHub links and notifies `@name` even when it is
backslash-escaped, but not `@\u2060name`, which reads the same."""


def text(value: object) -> str:
    """Outside text (an agent's words, command output, file names, PR text) as one line of
    markdown that renders as exactly those characters: every mark that could open markup is
    escaped (other punctuation, such as a path's dots, stays as typed) and mentions are
    broken, so nothing in it can open markup, HTML, an image or a notification. This and
    `code` are the only ways such text enters markdown; grading writes plain text."""
    escaped = _MARKUP_RE.sub(r"\\\1", inline(value))
    escaped = _BLOCK_START_RE.sub(lambda m: f"{m[1] or ''}\\{m[2] or m[3]}", escaped)
    return _MENTION_RE.sub("@" + WORD_JOINER, escaped)


def code(text: object) -> str:
    """An inline code span whose fence is longer than any backtick run inside it."""
    s = inline(text)
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def fence(text: object) -> str:
    """A fenced code block of `text` (a command's output) that nothing inside can close."""
    s = str(text).strip("\n") or "(the command printed nothing)"
    longest = max((len(m) for m in re.findall(r"`{3,}", s)), default=2)
    ticks = "`" * (longest + 1)
    return f"{ticks}text\n{s}\n{ticks}"


@lru_cache(maxsize=1)
def environment() -> SandboxedEnvironment:
    """The shared template environment (also used by the GitHub comment renderer)."""
    env = SandboxedEnvironment(
        loader=PackageLoader("docdelta.report", "templates"),
        # HTML templates (`*.html.j2`) escape everything: answers are untrusted agent text.
        autoescape=select_autoescape(("html.j2",), default_for_string=False, default=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        score=fmt_score,
        signed=fmt_signed,
        delta=fmt_delta,
        count=fmt_count,
        usd=fmt_usd,
        seconds=fmt_seconds,
        pnum=fmt_pnum,
        by_p=by_p,
        pvalue=fmt_p,
        verdict_title=fmt_verdict,
        aa_noise=fmt_aa_noise,
        signed_usage=fmt_usage_shift,
        inline=inline,
        cell=cell,
        code=code,
        text=text,
        fence=fence,
        mermaid_label=mermaid_label,
        mark=mark,
        vs=fmt_vs,
        lead_html=lead_html,
        anchor=task_anchor,
        bar=lambda found: thresholds.describe_bar(found.threshold),
        arm_pass=lambda arm, found: thresholds.describe_arm(arm, found.threshold),
    )
    env.globals["listed"] = LISTED
    env.bytecode_cache = template_cache(env)
    return env


TEMPLATE_CACHE = "DOCDELTA_TEMPLATE_CACHE"
"""Overrides where compiled templates are kept (default: `$XDG_CACHE_HOME/docdelta/templates`)."""


_COMPILE_OPTIONS = (
    "block_start_string",
    "block_end_string",
    "variable_start_string",
    "variable_end_string",
    "comment_start_string",
    "comment_end_string",
    "line_statement_prefix",
    "line_comment_prefix",
    "trim_blocks",
    "lstrip_blocks",
    "keep_trailing_newline",
    "newline_sequence",
    "optimized",
    "is_async",
)
"""The `Environment` settings its code generator reads."""


def _compiled_key(env: Environment) -> str:
    """What a template's compiled code depends on besides its source (which Jinja checks
    itself): Python, Jinja and the environment's compile-time options, each template's
    autoescape decision included, so a changed option never runs stale code."""
    autoescape = env.autoescape
    parts = [
        list(sys.version_info[:2]),
        jinja2.__version__,
        [getattr(env, option) for option in _COMPILE_OPTIONS],
        [getattr(env.finalize, "__qualname__", None), sorted(env.extensions)],
        [[n, autoescape(n) if callable(autoescape) else autoescape] for n in env.list_templates()],
    ]
    return sha256_hex(json.dumps(parts).encode())[:16]


def template_cache(env: Environment) -> FileSystemBytecodeCache | None:
    """The compiled templates' cache for `env`: a directory only this user can write (another
    user's code there would run in every render), or None (templates compiled every time)
    when it cannot be made so."""
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    root = Path(os.environ.get(TEMPLATE_CACHE) or Path(xdg, "docdelta", "templates"))
    directory = root / _compiled_key(env)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = directory.lstat()
    except OSError:
        return None
    private = stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid() and not found.st_mode & 0o077
    return FileSystemBytecodeCache(str(directory)) if private and os.access(directory, os.W_OK) else None


SCREEN_LINES = 25
"""The most markdown lines a comment may have before its first folded section: what one
screen shows of a PR comment (about 25 rendered lines at GitHub's width and font)."""
TOP_TASKS = 5
"""Tasks in the table above the fold (significant ones first, then the largest changes);
every task is in the folded full table."""


def task_anchor(task: str) -> str:
    """The HTML report's anchor of a task's runs (`id="task-…"` in templates/html/_runs.html.j2)."""
    return "task-" + quote(task, safe="")


def top_tasks(summary: Summary) -> list[TaskSummary]:
    """The tasks worth a row above the fold: significant first, then by the size of the change."""

    def key(t: TaskSummary) -> tuple[bool, float, str]:
        d = t.head_vs_base
        return (d.certainty is not Certainty.significant, -abs(d.value or 0.0), t.task)

    return sorted(summary.tasks, key=key)[:TOP_TASKS]


def render_markdown(summary: Summary) -> str:
    """The compact scorecard a maintainer reads in 20 seconds."""
    return (
        environment()
        .get_template("scorecard.md.j2")
        .render(s=summary, links={}, lead=lead(summary, repeats_flag="--repeats {n}"), terms=SCORECARD_DOCS)
    )


SUITE_STATES = {
    SuiteRepoState.no_change: "nothing to evaluate (no instruction file changed)",
    SuiteRepoState.no_verdict: "no verdict",
}
"""A suite row's verdict cell when the repository has no verdict of its own."""


def render_suite_markdown(suite: SuiteSummary) -> str:
    """`docdelta run --repos`'s closing section: a row per repository, then the pooled call
    and what it pools. Names and reasons are outside text: they pass `text`."""
    lines = [
        "## All repositories",
        "",
        "| repository | verdict | head - base | tasks |",
        "| --- | --- | ---: | ---: |",
    ]
    for r in suite.repos:
        verdict = VERDICT_TITLES[r.verdict] if r.verdict else SUITE_STATES.get(r.state, "no verdict")
        why = f": {text(r.why)}" if r.why else ""
        lines.append(f"| {text(r.name)} | {verdict}{why} | {fmt_signed(r.head_vs_base)} | {r.tasks} |")
    v = suite.pooled
    pooled = sum(r.state is SuiteRepoState.evaluated for r in suite.repos)
    lines.append("")
    if v is None:
        lines.append("**Pooled: no verdict** — no repository has a verdict to pool.")
        return "\n".join(lines) + "\n"
    interval = (
        f"{v.confidence:.0%} interval [{fmt_signed(v.ci_low)}, {fmt_signed(v.ci_high)}], {fmt_p(v.p_value)}"
        if v.ci_low is not None and v.confidence is not None
        else "no interval (too few runs per arm)"
    )
    lines += [
        f"**Pooled: {fmt_verdict(v)}** — head - base {fmt_signed(v.estimate)} over {v.tasks} "
        f"task{'s' * (v.tasks != 1)} of {pooled} repositor{'ies' if pooled != 1 else 'y'}, {interval}. "
        f"{inline(v.reason)}.",
        "",
        f"Pooled: every task of every repository with a verdict is a stratum of its own, weighing the "
        f"same; one Holm family of all of them and their mean, noise band ±{suite.band:.2f} "
        f"(the widest of theirs); {v.design}.",
    ]
    return "\n".join(lines) + "\n"


def render_comment_markdown(
    summary: Summary,
    *,
    diff_links: Mapping[str, str] | None = None,
    report_url: str | None = None,
    artifacts_url: str | None = None,
    files_url: str | None = None,
    max_runs: int | None = None,
) -> str:
    """The same scorecard for a pull request: the glance (`report/glance.py`: verdict, what
    changed, how sure, cost, next) and the tasks that changed within one screen
    (SCREEN_LINES), then folded `<details>` (which the comment
    trimmer empties first when GitHub's size limit is near): the statistics, every task,
    a mermaid chart, usage, misses, instruction usage. `report_url`: where the HTML report
    opens in a browser, so task rows link into it (at `#task-<id>`); without it they link to
    `artifacts_url` (the run's artifacts, which hold report.html) and name the anchor in the
    link's title. `files_url`: the PR's "Files changed" tab. `max_runs`: the Action's cap on a
    plan, which the next step's advice stays within."""
    return (
        environment()
        .get_template("comment.md.j2")
        .render(
            s=summary,
            links=dict(diff_links or {}),
            lead=lead(summary, diff_links=diff_links),
            glance=glance(summary, diff_links or {}, max_runs),
            terms=SCORECARD_DOCS,
            report_url=report_url,
            artifacts_url=artifacts_url,
            files_url=files_url,
            top=top_tasks(summary),
        )
    )


def mermaid_label(text: str) -> str:
    """A label safe inside a quoted mermaid string (no quotes, brackets or newlines)."""
    return re.sub(r'["\[\]\n\r`]', " ", text)[:40]


def render_json(summary: Summary) -> str:
    """The same numbers as the markdown, as JSON (the `Summary` model, versioned)."""
    return summary.model_dump_json(indent=2) + "\n"
