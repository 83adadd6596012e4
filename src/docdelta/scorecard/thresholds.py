"""Per-task pass thresholds: a second, simpler gate beside the statistical verdict.

Users state a bar ("this task passes in at least 80 % of runs", or pass^k: "k runs in a
row all pass") as well as asking whether head differs from base. A task's bar is its own
`pass_threshold` / `pass_k` (task file), else the run's default (`--pass-threshold`, the
`pass-threshold` input); the plan records the one that applies (`Manifest.thresholds`) so a
later `docdelta report` judges alike.

The check fails on a task only when its head arm misses the bar and its base arm did not:
a miss base already had (a hard task, a flaky test) is not the PR's doing and must not block
it. An arm with fewer than k graded runs has no pass^k and neither meets nor misses. Unlike
the verdict this rule has no error control: on identical docs it fails whenever head lands
below the bar by chance while base lands on it, which is frequent for a task whose true pass
rate is near the bar. bench/bench_thresholds.py measures that A/A rate; docs/tasks.md
states it.

Holdout tasks are never gated by a threshold: naming one as the reason would show its result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from docdelta.scorecard import stats
from docdelta.scorecard.models import ArmPass, Summary, ThresholdSummary
from docdelta.tasks.models import PassThreshold, Task
from docdelta.vocabulary import BASE, HEAD


def effective(tasks: Mapping[str, Task], default: PassThreshold | None) -> dict[str, PassThreshold]:
    """Task id -> the bar that applies: the task's own, else `default`; tasks without either
    are left out."""
    out = {tid: t.threshold or default for tid, t in sorted(tasks.items())}
    return {tid: bar for tid, bar in out.items() if bar is not None}


def arm_pass(scores: Sequence[float], bar: PassThreshold) -> ArmPass:
    """One arm's graded scores against `bar`."""
    value = stats.pass_k(scores, bar.k)
    met = None if value is None else value >= bar.fraction - 1e-9
    return ArmPass(passes=stats.passes(scores), runs=len(scores), value=value, met=met)


def blocks(arms: Mapping[str, ArmPass]) -> bool:
    """Head missed the bar and base did not (met it, or has no value: no evidence the miss
    was there before)."""
    head, base = arms.get(HEAD), arms.get(BASE)
    return head is not None and head.met is False and (base is None or base.met is not False)


def summarize(bar: PassThreshold, scores: Mapping[str, Sequence[float]], *, gate: bool) -> ThresholdSummary:
    """A task's bar per arm (`scores`: condition -> graded scores). `gate` False (a holdout
    task, or runs refused as a sample) reports it without blocking."""
    order = sorted(scores, key=lambda c: (c != HEAD, c != BASE, c))  # the gate's two arms first
    arms = {c: arm_pass(scores[c], bar) for c in order}
    return ThresholdSummary(threshold=bar, arms=arms, blocks=gate and blocks(arms))


def describe_bar(bar: PassThreshold) -> str:
    """`≥ 80 %` or `pass^3 ≥ 80 %`."""
    what = "" if bar.k == 1 else f"pass^{bar.k} "
    return f"{what}≥ {bar.fraction:.0%}".replace("%", " %")


def describe_arm(arm: ArmPass, bar: PassThreshold) -> str:
    """`5/6 ✓`, `3/6 ✗`, `pass^3 0.40 ✗`, or `1/1 (fewer than 3 runs)`."""
    shown = f"{arm.passes}/{arm.runs}"
    if bar.k > 1 and arm.value is not None:
        shown += f" (pass^{bar.k} {arm.value:.2f})"
    if arm.met is None:
        return f"{shown} (fewer than {bar.k} graded run{'s' * (bar.k != 1)})"
    return f"{shown} {'✓' if arm.met else '✗'}"


def gate_reason(summary: Summary) -> str | None:
    """Why the check fails on thresholds, or None when no task blocks."""
    if not summary.threshold_failures:
        return None
    parts = []
    for task in summary.tasks:
        if task.task in summary.threshold_failures and task.threshold is not None:
            bar, arms = task.threshold.threshold, task.threshold.arms
            base = f", base {describe_arm(arms[BASE], bar)}" if BASE in arms else ""
            parts.append(f"{task.task}: head {describe_arm(arms[HEAD], bar)} {describe_bar(bar)}{base}")
    return "pass threshold missed by head where base met it — " + "; ".join(parts)


def with_failures(decision: stats.GateDecision, failures: Sequence[str]) -> stats.GateDecision:
    """`decision` with the blocking tasks of a recorded evaluation applied (the history keeps
    their ids, not the arms): a receipt is never issued for a content whose check failed."""
    if not failures:
        return decision
    named = ", ".join(failures)
    return stats.GateDecision(
        "failure", f"pass threshold missed by head where base met it: {named}; verdict: {decision.reason}"
    )


def with_thresholds(decision: stats.GateDecision, summary: Summary) -> stats.GateDecision:
    """The check's conclusion with the pass thresholds applied: a blocking task fails it
    whatever the verdict (and whatever `fail-on`: a threshold is an explicit bar)."""
    reason = gate_reason(summary)
    if reason is None:
        return decision
    return stats.GateDecision("failure", f"{reason}; verdict: {decision.reason}")
