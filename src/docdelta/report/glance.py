"""What a PR comment shows before its first fold: the answer to "did it help?" in ten seconds.

A lead reads the heading (the verdict) and a few lines under it, so those lines carry
exactly: what changed, as counts of tasks that got better or worse with their runs passed
(`t3 20/24 → 11/24`); how sure, in words with one number; what it cost; and the next step.
Per-task significance marks, Holm, bands, hypotheses and looks are statistics vocabulary:
they live in the comment's folds, which link to the docs page that defines them
(`plain.SCORECARD_DOCS`), so no visible line can read "not significant" beside a
significant total.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from docdelta.report.plain import MAX_NAMED, cost_line, next_line, no_verdict_reason
from docdelta.scorecard import stats
from docdelta.scorecard.models import Summary, TaskSummary
from docdelta.vocabulary import BASE, HEAD

_CONFIDENT = "**How sure:** confident — identical docs give a call like this in at most {alpha:.0%} of PRs."
SURENESS = {
    "improved": _CONFIDENT,
    "regressed": _CONFIDENT,
    "no_change": "**How sure:** confident it did nothing that matters — "
    "every plausible effect is within ±{band:.2f}.",
    "inconclusive": "**How sure:** not yet — these runs cannot tell this change from chance (p = {p:.2g}).",
}
"""How sure, per verdict, in words with one number: the false-call rate the gate holds,
the band the effect lies in, or the p that fell short."""
UNTESTABLE = "not at all — at this many runs no test can tell this change from chance."
"""How sure when the design has no p (e.g. one repeat): said, not a number made up."""
SETTLED_NEXT = {
    "improved": "**Next:** review the diff as usual; the transcripts (linked below) show what changed.",
    "no_change": "**Next:** nothing to fix: these tasks do not tell the two versions apart; "
    "keep the edit for its own reasons, or add a task it should change.",
}
"""The next step where the scorecard's own (`plain.next_line`) has none: a settled verdict."""


@dataclass(frozen=True)
class Glance:
    """The visible lines, each one markdown line; empty ones are left out."""

    changed: str
    sure: str
    cost: str
    next: str

    def lines(self) -> list[str]:
        return [x for x in (self.changed, self.sure, self.cost, self.next) if x]


def _passed(t: TaskSummary) -> str:
    """`20/24 → 11/24` (runs passed, base → head), or mean scores when no run count moved."""
    head, base = t.conditions.get(HEAD), t.conditions.get(BASE)
    if head is None or base is None:
        return ""
    if head.runs_at_1 != base.runs_at_1:
        return f"{base.runs_at_1}/{base.runs} → {head.runs_at_1}/{head.runs}"
    old, new = base.mean_score, head.mean_score
    return f"score {old or 0:.2f} → {new or 0:.2f}"


def _named(tasks: Sequence[TaskSummary]) -> str:
    ordered = sorted(tasks, key=lambda t: (-abs(t.head_vs_base.value or 0.0), t.task))
    shown = [f"*{t.task}* {_passed(t)}" for t in ordered[:MAX_NAMED]]
    more = len(ordered) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def changed_counts(s: Summary, diff_links: Mapping[str, str]) -> str:
    """`**2 of 8 tasks got worse** with `AGENTS.md` (runs passed, base → head): *t3* 20/24 → 11/24,
    …; 6 unchanged.` The first count is bold: it is the line's answer."""
    compared = [t for t in s.tasks if t.head_vs_base.value is not None]
    if not compared:
        return "**Nothing measurable changed:** no task has graded runs in both head and base."
    what = ""
    if len(s.changed) == 1:
        path = s.changed[0].path
        what = " with " + (f"[`{path}`]({diff_links[path]})" if path in diff_links else f"`{path}`")
    worse = [t for t in compared if (t.head_vs_base.value or 0.0) < -s.noise_band]
    better = [t for t in compared if (t.head_vs_base.value or 0.0) > s.noise_band]
    same = sum(1 for t in compared if stats.is_noise(t.head_vs_base.value or 0.0, s.noise_band))
    n = len(compared)
    moved = [(group, word) for group, word in ((worse, "worse"), (better, "better")) if group]
    if not moved:
        return f"**{same} of {n} task{'s' if n != 1 else ''} unchanged**{what} (runs passed, base → head)."
    (first, word), *rest = moved
    parts = [_named(first), *(f"{len(g)} got {w}: {_named(g)}" for g, w in rest)]
    if same:
        parts.append(f"{same} unchanged")
    head = f"{len(first)} of {n} task{'s' if n != 1 else ''} got {word}"
    return f"**{head}**{what} (runs passed, base → head): {'; '.join(parts)}."


def sureness(s: Summary) -> str:
    """How sure, in words with one number; nothing for a broken evaluation (its warning says why)."""
    v = s.verdict
    if s.broken:
        return ""
    if v is None:
        return f"**How sure:** no verdict — {no_verdict_reason(s)}."
    if v.p_value is None:  # a degenerate design: no test could reject, so no p to quote
        return f"**How sure:** {UNTESTABLE}"
    return SURENESS[v.kind].format(alpha=v.alpha, band=v.band, p=v.p_value)


def glance(s: Summary, diff_links: Mapping[str, str], max_runs: int | None) -> Glance:
    """The visible part of the comment: its cost and next step are the scorecard's own lines;
    `max_runs` is the Action's cap, so the next step proposes only a plan it accepts."""
    settled = SETTLED_NEXT.get(s.verdict.kind, "") if s.verdict and not s.broken else ""
    step = next_line(s, max_runs=max_runs) or settled
    return Glance(changed_counts(s, diff_links), sureness(s), cost_line(s), step)
