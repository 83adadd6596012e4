"""The scorecard's lead: what changed, how sure we are and what to do next, in words.

A maintainer reads the first lines of a PR comment and little else, so these lines are
made from the same `Summary` as the tables below them and say three things:

* **what changed**, per task, in runs passed (or mean score for partially scored tasks),
  grouped into better / worse / unchanged and naming at most MAX_NAMED tasks per group,
  so a 30-task suite reads as short as the demo;
* **how sure**, one phrase whose mark (significant / not significant / within noise band,
  `models.Certainty`) is the decision rule's own: it names the hypotheses that decided and
  the p they used, and never a band the verdict did not use;
* **cost and time**, head against base per run, in money where the gateway priced the calls
  and in tokens (said so) where it did not;
* **next**, when the verdict is not decisive, the repeats the decision estimates and the
  drop power.py's simulation says this design can catch.

Every phrase is built here rather than in templates because it branches on the decision;
the templates only place the lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from docdelta.scorecard import decision, stats
from docdelta.scorecard.models import Certainty, ConditionStats, Summary, TaskSummary, VerdictSummary
from docdelta.validate import ACTION_MAX_REPEATS
from docdelta.vocabulary import BASE, HEAD, PROJECT_URL

MAX_NAMED = 3
"""Tasks named per group (better, worse, unchanged) before "and N more"."""
SCORECARD_DOCS = f"{PROJECT_URL}/docs/scorecard.md#reading-the-scorecard"
"""Where the scorecard's terms are defined: one docs section, linked from every comment."""
MARK_WORDS = {
    Certainty.significant: "significant",
    Certainty.not_significant: "not significant",
    Certainty.noise_band: "noise band",
}
"""The marks as the tables print them."""


@dataclass(frozen=True)
class Lead:
    """The lead's lines, each one markdown line; `next` is empty when nothing is to be done."""

    changed: str
    certainty: str
    cost: str
    next: str

    def lines(self) -> list[str]:
        return [x for x in (self.changed, self.certainty, self.cost, self.next) if x]


def mark(certainty: Certainty | None) -> str:
    return "" if certainty is None else MARK_WORDS[certainty]


def _italic_list(names: Sequence[str]) -> str:
    shown = [f"*{n}*" for n in names[:MAX_NAMED]]
    more = len(names) - len(shown)
    if more:
        return f"{', '.join(shown)} and {more} more"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def _arms(t: TaskSummary) -> tuple[ConditionStats | None, ConditionStats | None]:
    return t.conditions.get(HEAD), t.conditions.get(BASE)


def _outcome(t: TaskSummary) -> str:
    """`passed 2/2 runs (was 0/2)`, or mean scores when no run of either arm passed outright."""
    head, base = _arms(t)
    if head is None or base is None:
        return ""
    if head.runs_at_1 != base.runs_at_1:
        return f"{head.runs_at_1}/{head.runs} (was {base.runs_at_1}/{base.runs})"
    return f"scored {_score(head.mean_score)} (was {_score(base.mean_score)})"


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _group(tasks: Sequence[TaskSummary], title: str) -> str:
    if not tasks:
        return ""
    ordered = sorted(tasks, key=lambda t: -abs(t.head_vs_base.value or 0.0))
    named = [f"*{t.task}* {_outcome(t)}" for t in ordered[:MAX_NAMED]]
    more = len(ordered) - len(named)
    tail = f" and {more} more" if more else ""
    return f"{title} on {len(ordered)} task{'s' if len(ordered) != 1 else ''}: {', '.join(named)}{tail}"


def changed_line(s: Summary, diff_links: Mapping[str, str]) -> str:
    """What the edit did, task by task, in runs passed (head against base); the changed file
    links to its diff when `diff_links` has it."""
    if len(s.changed) == 1:
        path = s.changed[0].path
        docs = "the new " + (f"[`{path}`]({diff_links[path]})" if path in diff_links else f"`{path}`")
    else:
        docs = f"the {len(s.changed)} changed instruction files"
    compared = [t for t in s.tasks if t.head_vs_base.value is not None]
    if not compared:
        return f"With {docs}: no task has graded runs in both head and base."
    band = s.noise_band
    better = [t for t in compared if (t.head_vs_base.value or 0.0) > band]
    worse = [t for t in compared if (t.head_vs_base.value or 0.0) < -band]
    same = [t.task for t in compared if stats.is_noise(t.head_vs_base.value or 0.0, band)]
    parts = [_group(better, "better"), _group(worse, "worse")]
    if same:
        parts.append(f"unchanged on {_italic_list(same)}")
    return f"With {docs} (head against base, runs passed): {'; '.join(p for p in parts if p)}."


def no_verdict_reason(s: Summary) -> str:
    """Why a summary has no verdict, as a clause (no final stop)."""
    return (s.verdict_refused or "no task has graded runs in both head and base").rstrip(".")


def certainty_line(s: Summary) -> str:
    """One phrase of certainty, the decision's own: who decided, with which p, under which rule."""
    v = s.verdict
    if s.saturated:
        return "**No verdict:** no score could move, so nothing was measured (see the warning above)."
    if s.broken:
        return "**No verdict:** the evaluation is broken (see the warning above)."
    if v is None:
        return f"**No verdict:** {no_verdict_reason(s)}."
    numbers = _verdict_numbers(v)
    if v.kind in ("improved", "regressed"):
        who = ", ".join("all tasks together" if k == "overall" else f"*{k}*" for k in v.decided_by)
        alone = ""
        if list(v.decided_by) == ["overall"]:
            alone = f"; no single task is significant on its own at {s.repeats} runs per arm"
        return (
            f"**Significant** ({v.kind}): decided by {who}; {numbers} ≤ {v.alpha:g}, "
            f"so identical docs get this call in at most {v.alpha:.0%} of PRs{alone}."
        )
    if v.kind == "no_change":
        return (
            f"**Within the noise band:** {numbers}: the interval lies inside ±{v.band:.2f}, "
            f"and every task's own interval inside ±{decision.task_band(v.band):.2f}."
        )
    if v.p_value is None:
        return "**No test possible** (inconclusive): an arm has too few runs for any test to reject."
    return f"**Not significant** (inconclusive): {numbers}; no task changed significantly either."


def _verdict_numbers(v: VerdictSummary) -> str:
    """The verdict's one statistic: whose it is, its estimate, its interval and its own p."""
    who = "all tasks" if v.subject == "overall" else f"*{v.subject}*"
    if v.ci_low is None or v.ci_high is None or v.p_value is None:
        return f"{who} {v.estimate:+.2f}"
    test = "TOST p" if v.kind == "no_change" else "Holm-adjusted p"
    return (
        f"{who} {v.estimate:+.2f}, {v.confidence or 0:.0%} interval [{v.ci_low:+.2f}, {v.ci_high:+.2f}], "
        f"{test} = {v.p_value:.2g}"
    )


def _percent(new: float, old: float) -> str:
    return "" if old == 0 else f"{(new - old) / old:+.0%}"


def cost_line(s: Summary) -> str:
    """Per run, head against base: money when every run was priced, else tokens (said so); time."""
    head, base = s.overall.get(HEAD), s.overall.get(BASE)
    if head is None or base is None or not head.runs or not base.runs:
        return ""
    parts = []
    if head.median_cost_usd is not None and base.median_cost_usd is not None:
        diff = head.median_cost_usd - base.median_cost_usd
        sign = "-" if diff < 0 else "+"
        pct = _percent(head.median_cost_usd, base.median_cost_usd)
        parts.append(
            f"cost {_usd(base.median_cost_usd)} → {_usd(head.median_cost_usd)} per run "
            f"({pct + ', ' if pct else ''}{sign}{_usd(abs(diff))})"
        )
    elif head.median_tokens is not None and base.median_tokens is not None:
        pct = _percent(head.median_tokens, base.median_tokens)
        parts.append(
            f"tokens {base.median_tokens:,.0f} → {head.median_tokens:,.0f} per run"
            f"{f' ({pct})' if pct else ''}, not priced: the gateway priced none of these calls"
        )
    if head.median_duration_s is not None and base.median_duration_s is not None:
        pct = _percent(head.median_duration_s, base.median_duration_s)
        parts.append(
            f"time {base.median_duration_s:.1f}s → {head.median_duration_s:.1f}s{f' ({pct})' if pct else ''}"
        )
    return f"**Cost** (medians, base → head): {'; '.join(parts)}." if parts else ""


def _usd(value: float) -> str:
    """Per-run costs are cents: three decimals under a dollar so $0.010 and $0.013 differ."""
    if value == 0:
        return "$0"
    if value < 0.01:
        return f"${value:.4f}"
    return f"${value:.3f}" if value < 1 else f"${value:.2f}"


def planned_runs(s: Summary, repeats: int) -> int:
    """The runs a rerun at `repeats` plans: every task (holdouts too) in every column, as
    `planning.prepare` counts them against the cap."""
    return (len(s.tasks) + s.holdout_tasks) * len(s.conditions) * repeats


def _rerun(s: Summary, repeats: int, repeats_flag: str, max_runs: int | None) -> str:
    """The settings of a rerun at `repeats`. With the Action's `max_runs`: at most the repeats the
    Action accepts (said so when the spread asks for more), and `max-runs` raised to fit the plan."""
    capped = max_runs is not None and repeats > ACTION_MAX_REPEATS
    n = ACTION_MAX_REPEATS if capped else repeats
    flag = f"`{repeats_flag.format(n=n)}`"
    runs = planned_runs(s, n)
    if max_runs is not None and runs > max_runs:
        flag += f" and `max-runs: {runs}` (the plan is {runs:,} runs, over the cap of {max_runs:,})"
    return flag


def _power_phrase(s: Summary) -> str:
    """What this design can catch, as a clause for the Next line ("" without a power figure)."""
    at = f"at {s.repeats} repeat{'s' if s.repeats != 1 else ''}"
    d = s.power
    if d is None:
        return ""
    if s.repeats < decision.MIN_ARM_RUNS:
        return f"; {at} no test can reject, so every drop is missed"
    if d.drop is not None:
        return f"; {at} one task has to drop by {d.drop:.1f} to be caught in {d.target:.0%} of simulated PRs"
    missed = f"{1 - d.target:.0%}"
    return f"; {at} even a drop of {d.largest:.1f} on one task is missed in over {missed} of simulated PRs"


def next_line(s: Summary, repeats_flag: str = "repeats: {n}", *, max_runs: int | None = None) -> str:
    """What to do now. `repeats_flag` spells the setting: `repeats: {n}` (Action), `--repeats {n}`
    (CLI). `max_runs`: the Action's cap on a plan; a rerun over it is proposed with `max-runs`
    raised to fit, so following the advice never meets the Action's refusal."""
    v = s.verdict
    if s.saturated:
        return (
            "**Next:** make the tasks measurable (the warning above says how: `docdelta agent-check` "
            "for an agent that may answer nothing, `docdelta suggest` for files that say nothing "
            "the tasks ask), then rerun."
        )
    if s.broken or (v is None and s.verdict_refused):
        if s.grading_failures:
            return "**Next:** fix what kept the hidden tests from running (*Grading failures*), then rerun."
        return "**Next:** fix what made the runs fail (a failed run's `outcome.error`), then rerun."
    if v is None:
        return ""
    if v.kind == "regressed":
        # in the order the change line lists them (decided_by leads with the deciding task)
        order = {t.task: i for i, t in enumerate(s.tasks)}
        worse = sorted((k for k in v.decided_by if k != "overall"), key=lambda k: order.get(k, len(order)))
        which = _italic_list(worse) if worse else "the tasks that dropped"
        return f"**Next:** open the transcripts of {which} (linked below) before merging."
    if v.kind != "inconclusive":
        return ""
    seen = _power_phrase(s)
    flag = _rerun(s, v.repeats_needed or 0, repeats_flag, max_runs)
    if v.repeats_needed is not None and v.ci_low is None:
        return (
            f"**Next:** rerun with {flag} or more: the spread of an arm needs at least "
            f"{v.repeats_needed} runs to be estimated{seen}."
        )
    if v.repeats_needed is not None and max_runs is not None and v.repeats_needed > ACTION_MAX_REPEATS:
        return (
            f"**Next:** rerun with {flag}, the most the Action runs, or add tasks: this spread needs "
            f"{v.repeats_needed} repeats to show no change if there is none{seen}."
        )
    if v.repeats_needed is not None:
        return f"**Next:** rerun with {flag}: this spread would then show no change if there is none{seen}."
    return (
        "**Next:** more repeats or more tasks: the estimate lies outside the band but is not "
        f"significant{seen}."
    )


def lead(
    s: Summary, *, repeats_flag: str = "repeats: {n}", diff_links: Mapping[str, str] | None = None
) -> Lead:
    return Lead(
        changed_line(s, diff_links or {}), certainty_line(s), cost_line(s), next_line(s, repeats_flag)
    )
