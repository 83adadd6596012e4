"""Render a `Summary` as a markdown scorecard or as JSON.

Templates live in `report/templates/` and are loaded from the installed package
(PackageLoader), so a wheel renders the same as a checkout. The scorecard is built
from partials (`_verdict`, `_table`, `_usage`, `_missed`, `_confounds`, `_changed`) that the
GitHub comment wraps with its own marker and header, so both always show the same
numbers. The environment is sandboxed and strict: a template typo fails loudly
instead of printing an empty cell, and text that came from agents or task files
passes through the `cell`/`inline`/`code` filters so it cannot break the table.
The HTML report (`report/html.py`) shares this environment; its `*.html.j2`
templates are autoescaped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from jinja2 import PackageLoader, StrictUndefined, select_autoescape
from jinja2.sandbox import SandboxedEnvironment

from docdelta.models import Delta, Summary, VerdictSummary

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
    """A delta with its noise mark: `+0.04 (noise)` inside the configured band, `+0.10 (A/A noise)`
    outside it but inside the A/A band (what identical docs produce at this size)."""
    text = fmt_signed(delta.value)
    if delta.noise:
        return f"{text} (noise)"
    return f"{text} (A/A noise)" if delta.aa_noise else text


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
        where = (
            f"; head - base {fmt_signed(d.value)} lies {'inside it: noise' if d.aa_noise else 'outside it'}"
        )
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


def fmt_verdict(verdict: VerdictSummary | None) -> str:
    return "no verdict" if verdict is None else VERDICT_TITLES[verdict.kind]


def fmt_usage_shift(value: float, metric: str) -> str:
    """A usage shift in the metric's unit: `+1,234 tokens`, `-$0.01`."""
    if metric == "cost_usd":
        return ("-" if value < 0 else "+") + fmt_usd(abs(value))
    return f"{value:+,.0f} {metric}"


def fmt_count(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:,.0f}"


def fmt_usd(value: float | None) -> str:
    if value is None:
        return NO_VALUE
    return f"${value:.4f}" if 0 < value < 0.01 else f"${value:.2f}"


def fmt_seconds(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.1f}s"


def inline(text: object) -> str:
    """One line of markdown: newlines collapse to spaces so a list item stays one item."""
    return " ".join(str(text).split())


def cell(text: object) -> str:
    """A table cell: one line, with pipes escaped so the row keeps its columns."""
    return inline(text).replace("|", "\\|")


def code(text: object) -> str:
    """An inline code span whose fence is longer than any backtick run inside it."""
    s = inline(text)
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


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
        pvalue=fmt_p,
        verdict_title=fmt_verdict,
        aa_noise=fmt_aa_noise,
        signed_usage=fmt_usage_shift,
        inline=inline,
        cell=cell,
        code=code,
        mermaid_label=mermaid_label,
    )
    return env


def render_markdown(summary: Summary) -> str:
    """The compact scorecard a maintainer reads in 20 seconds."""
    return environment().get_template("scorecard.md.j2").render(s=summary, links={})


def render_comment_markdown(summary: Summary, *, diff_links: Mapping[str, str] | None = None) -> str:
    """The same scorecard for a pull request: a mermaid chart, the changed files linked to
    their diff, the long sections folded into `<details>` (which the comment trimmer
    empties first when GitHub's size limit is near)."""
    return environment().get_template("comment.md.j2").render(s=summary, links=dict(diff_links or {}))


def mermaid_label(text: str) -> str:
    """A label safe inside a quoted mermaid string (no quotes, brackets or newlines)."""
    return re.sub(r'["\[\]\n\r`]', " ", text)[:40]


def render_json(summary: Summary) -> str:
    """The same numbers as the markdown, as JSON (the `Summary` model, versioned)."""
    return summary.model_dump_json(indent=2) + "\n"
