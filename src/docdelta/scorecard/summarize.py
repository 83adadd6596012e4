"""From stored results to the scorecard's numbers (`Summary`), which every renderer shares.

All arithmetic is delegated to `docdelta.scorecard.stats`; this module only groups runs by
task and condition, decides which runs count, and collects the confounds a reader
must see before trusting a delta.

Which runs count: `infra_error` runs (and any run without a score) are our
machinery failing, so they are excluded from scores, tokens, cost and isolation
and only counted in `infra_errors`. Every other status (timeout, no_answer, ...) is
the agent's result and is graded as such (a timeout scores 0: the runner never grades
what a hung agent printed before its deadline).

A broken evaluation is not a result: when more than MAX_FAULT_RATE of all runs are
FAULTS (infra_error, agent_error, timeout), `Summary.broken` says so, the scorecard
leads with it, no verdict is given, and the gate is not green. Unless the agent's own
failures concentrate in head (`arm_failures`): then they are the result, and head regressed.
A suite in which no score could move (every task at 0, or at 1, in every run of every
condition: `stats.saturation`) gets no verdict either (`Summary.saturated` leads): its
identical arms would pass the equivalence test as a confident "no change" about nothing. It
is not broken (the harness worked, and `docdelta suggest` reads its misses), so the run
exits 0, as for any other refused verdict.

The verdict is `decision.decide` on head vs base (and vs none): per-task and overall
hypotheses under Holm, equivalence against the noise band, the manifest's design
(fixed repeats or adaptive rounds) deciding the looks; seeded with the manifest's seed so
a report is reproducible. It is
refused (and the gate goes neutral) when more than MAX_INFRA_ERROR_RATE of the runs are
infra errors: the surviving runs may no longer be a fair sample of either arm.

Beside the configured noise band, the summary carries the A/A band: how far apart
head and base land by chance when the docs are identical, simulated at this
experiment's tasks x repeats from its own per-task scores. Deltas inside it are
marked as noise in words, but the verdict rule (significance test + configured band)
does not read it, so the check stays the one the A/A calibration test proved.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Literal

from docdelta.agents.models import RunStatus
from docdelta.instructions.detect import unread_by
from docdelta.instructions.models import Detection
from docdelta.results.grades import GradingFailure, SelftestReport
from docdelta.results.models import Cell, Manifest, RunResult
from docdelta.scorecard import arms, decision, instruction_usage, stats, thresholds, triggers
from docdelta.scorecard.models import (
    AANoise,
    Certainty,
    ConditionStats,
    Confounds,
    Delta,
    InstructionRef,
    JudgedTally,
    MissedItem,
    PooledControl,
    PoolSummary,
    PowerSummary,
    Quartiles,
    ShiftSummary,
    Summary,
    TaskDecisionSummary,
    TaskSummary,
    VerdictSummary,
)
from docdelta.text import quoted
from docdelta.vocabulary import BASE, BUILTIN_CONDITIONS, HEAD, NONE

_CANONICAL_ORDER = BUILTIN_CONDITIONS
FULL_ISOLATION = frozenset({"bwrap", "docker-none", "docker-internal"})
"""Isolation values (as sandbox/local.py and sandbox/docker.py record them) that mean
"no network but the gateway"; anything else (`none`, `docker-open`, ...) is a confound."""
MAX_MISSED = 5
MAX_INFRA_ERROR_RATE = 0.10
FAULTS = (RunStatus.infra_error, RunStatus.agent_error, RunStatus.timeout)
"""Statuses that say the harness or the agent command failed, not how well the docs worked:
a matrix full of them (a broken --agent-cmd, a sandbox that cannot start the agent, a model
server that is down) measures the breakage, so a large share of them means no verdict."""
MAX_FAULT_RATE = 0.25
"""Above this share of runs in FAULTS the scorecard leads with the failure and gives no
verdict (and the Action's check is not green). A quarter: one arm in three failing outright
already crosses it, while an occasional hung or crashed agent run does not."""


def _graded(run: RunResult) -> bool:
    return run.status is not RunStatus.infra_error and run.score is not None and _measured(run)


def _measured(run: RunResult) -> bool:
    """Whether the run's score measured anything: a score whose every item is unscored (key
    points only, no judge yet) says nothing about the answer, so it is no score at all and
    the run is left out of every statistic (its task is named in `Summary.unmeasured`)."""
    items = run.score.items if run.score is not None else []
    return not items or any(i.hit is not None for i in items)


def _unmeasured(results: Sequence[RunResult]) -> list[str]:
    """Tasks with completed runs none of which measured anything."""
    done = [r for r in results if r.status is not RunStatus.infra_error and r.score is not None]
    return sorted({r.cell.task for r in done} - {r.cell.task for r in done if _measured(r)})


def _scores(runs: Iterable[RunResult]) -> list[float]:
    return [r.score.value for r in runs if r.score is not None and _graded(r)]


def _tokens(run: RunResult) -> float | None:
    m = run.outcome.metrics
    return None if m.tokens_in is None or m.tokens_out is None else float(m.tokens_in + m.tokens_out)


_USAGE: dict[str, Callable[[RunResult], float | None]] = {
    "tokens": _tokens,
    "cost_usd": lambda r: r.outcome.metrics.cost_usd,
    "turns": lambda r: None if r.outcome.metrics.turns is None else float(r.outcome.metrics.turns),
    "duration_s": lambda r: r.outcome.metrics.duration_s,
}
"""The per-run usage metrics, by the name the summary and report use for them."""


def _present(values: Iterable[float | int | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


def _condition_stats(condition: str, runs_by_task: Mapping[str, Sequence[RunResult]]) -> ConditionStats:
    """Stats of one condition over one or more tasks (mean of per-task means, pooled medians)."""
    runs = [r for rs in runs_by_task.values() for r in rs]
    graded = [r for r in runs if _graded(r)]
    scores = _scores(graded)
    per_task = [_scores(rs) for rs in runs_by_task.values()]
    usage = {name: _present(get(r) for r in graded) for name, get in _USAGE.items()}
    spreads = {name: stats.spread(values) for name, values in usage.items()}
    return ConditionStats(
        condition=condition,
        runs=len(graded),
        infra_errors=len(runs) - len(graded),
        mean_score=stats.mean(_present(stats.mean(xs) for xs in per_task)),
        score_min=min(scores, default=None),
        score_max=max(scores, default=None),
        runs_at_1=stats.passes(scores),
        median_tokens=stats.median(usage["tokens"]),
        median_cost_usd=stats.median(usage["cost_usd"]),
        total_cost_usd=math.fsum(usage["cost_usd"]) if usage["cost_usd"] else None,
        median_turns=stats.median(usage["turns"]),
        median_duration_s=stats.median(usage["duration_s"]),
        statuses=dict(sorted(Counter(str(r.status) for r in runs).items())),
        pass_rate=stats.mean(_present(stats.pass_rate(xs) for xs in per_task)),
        pass_all=stats.mean(_present(stats.pass_k(xs) for xs in per_task)),
        spreads={k: Quartiles(**asdict(v)) for k, v in spreads.items() if v is not None},
    )


def _delta(
    treatment: str, control: str, value: float | None, band: float, aa_band: float | None = None
) -> Delta:
    """A delta with its noise marks: `noise` against the configured band (the verdict's),
    `aa_noise` against the A/A band when one is given (words only, never the verdict)."""
    noise = None if value is None else stats.is_noise(value, band)
    aa_noise = None if value is None or aa_band is None else stats.is_noise(value, aa_band)
    return Delta(treatment=treatment, control=control, value=value, noise=noise, aa_noise=aa_noise)


def _task_delta(
    treatment: str,
    control: str,
    by_condition: Mapping[str, Sequence[RunResult]],
    band: float,
    aa_band: float | None = None,
    call: decision.TaskDecision | None = None,
) -> Delta:
    """A task's delta, its p and whether it flipped. With the task's `call` (head vs base)
    the p is the one the decision used and a flip counts only when the change is
    significant; without one (head vs none) the p is Fisher's on passes."""
    t, c = (_scores(by_condition.get(x, ())) for x in (treatment, control))
    value = stats.compare(stats.ArmSample(treatment, tuple(t)), stats.ArmSample(control, tuple(c))).delta
    majority_t, majority_c = stats.majority_passes(t), stats.majority_passes(c)
    flip = None if majority_t is None or majority_c is None else majority_t != majority_c
    p = stats.fisher_passes(t, c)
    certainty = None
    if call is not None:
        # no interval: no test can reject, and a p of 1 would read as a measured "no effect"
        p = None if call.interval is None else call.p_regressed if (value or 0.0) < 0 else call.p_improved
        flip = bool(flip) and call.kind in CHANGES
        certainty = certainty_of(value, call.kind in CHANGES, band)
    return _delta(treatment, control, value, band, aa_band).model_copy(
        update={"p_value": p, "flip": flip, "certainty": certainty}
    )


CHANGES = ("improved", "regressed")
"""Decision kinds that reject a hypothesis: the only ones a `significant` mark may stand for."""


def certainty_of(value: float | None, rejected: bool, band: float) -> Certainty | None:
    """The mark of one delta under the decision rule: rejected -> significant; inside the
    configured band -> noise band (the rule needs the delta outside it to call a change);
    else not significant."""
    if value is None:
        return None
    if rejected:
        return Certainty.significant
    return Certainty.noise_band if stats.is_noise(value, band) else Certainty.not_significant


def _unmarked(task: TaskSummary) -> TaskSummary:
    return task.model_copy(
        update={
            "head_vs_base": task.head_vs_base.model_copy(update={"certainty": None}),
            "head_vs_none": task.head_vs_none.model_copy(update={"certainty": None}),
        }
    )


def _overall_certainty(d: decision.Decision | None, value: float | None, band: float) -> Certainty | None:
    """The all-tasks row's mark: significant only when the overall hypothesis decided the verdict."""
    if d is None:
        return None
    return certainty_of(value, d.kind in CHANGES and decision.OVERALL in d.decided_by, band)


JUDGED_KINDS = frozenset({"point", "rule"})
"""Score items only the judge rules on: with a hit of True/False they are its rulings."""


def _judged(by_condition: Mapping[str, Sequence[RunResult]]) -> dict[str, JudgedTally]:
    """Per arm, the judge's hits over its rulings; arms with no judged run are left out."""
    out: dict[str, JudgedTally] = {}
    for condition, runs in by_condition.items():
        ruled = [
            [i.hit for i in r.score.items if i.kind in JUDGED_KINDS and i.hit is not None]
            for r in runs
            if _graded(r) and r.score is not None
        ]
        hits = [h for rs in ruled for h in rs]
        if hits:
            out[condition] = JudgedTally(hits=sum(hits), rulings=len(hits), runs=sum(1 for rs in ruled if rs))
    return out


def _aa_band(strata: Sequence[stats.Stratum], repeats: int, seed: int) -> float | None:
    """The A/A band of these strata (tasks with both arms), `repeats` runs per arm.

    One task's own band judges its delta: averaging over tasks shrinks noise, so the
    overall band would call a single task's chance difference real. None below
    MIN_ARM_RUNS repeats: one run per arm shows no spread, and a band of ±0.00 would be a
    claim, not a measurement."""
    if repeats < decision.MIN_ARM_RUNS:
        return None
    return stats.aa_noise_band([[*t, *c] for t, c in strata if t and c], repeats, seed=seed)


def _aa_noise(strata: Sequence[stats.Stratum], repeats: int, seed: int) -> AANoise | None:
    band = _aa_band(strata, repeats, seed)
    if band is None:
        return None
    return AANoise(
        band=band,
        quantile=stats.AA_QUANTILE,
        simulations=stats.AA_SIMULATIONS,
        tasks=sum(1 for t, c in strata if t and c),
        repeats=repeats,
    )


def _strata(
    grid: Mapping[str, Mapping[str, Sequence[RunResult]]], treatment: str, control: str
) -> list[stats.Stratum]:
    return [(_scores(g.get(treatment, ())), _scores(g.get(control, ()))) for g in grid.values()]


def task_runs(
    grid: Mapping[str, Mapping[str, Sequence[RunResult]]],
    treatment: str,
    control: str,
    pooled: Sequence[RunResult] = (),
) -> dict[str, decision.TaskRuns]:
    """Per task, each arm's graded (repeat, score) pairs: the input of `decision.decide`.
    `pooled`: earlier runs of the control arm (`cache.pool`), added to it as repeat POOLED."""

    def arm(runs: Sequence[RunResult]) -> tuple[tuple[int, float], ...]:
        graded = sorted((r for r in runs if _graded(r) and r.score is not None), key=lambda r: r.cell.repeat)
        return tuple((r.cell.repeat, r.score.value) for r in graded if r.score is not None)

    def extra(task: str) -> tuple[tuple[int, float], ...]:
        return tuple((decision.POOLED, s) for s in _scores(r for r in pooled if r.cell.task == task))

    return {
        t: decision.TaskRuns(arm(g.get(treatment, ())), (*extra(t), *arm(g.get(control, ()))))
        for t, g in grid.items()
    }


def _pool_summary(pooled: PooledControl | None, manifest: Manifest) -> PoolSummary | None:
    if pooled is None:
        return None
    since = min(b.finished_at for b in pooled.batches)
    return PoolSummary(
        runs=len(pooled.results),
        batches=pooled.batches,
        since=since,
        drift=pooled.drift,
        only=BASE in manifest.pooled_only,
    )


def design_of(manifest: Manifest) -> decision.Design:
    return (
        decision.Design.auto(manifest.repeats)
        if manifest.adaptive
        else decision.Design.fixed(manifest.repeats)
    )


def _verdict(
    d: decision.Decision | None, treatment: str, control: str, holdout: frozenset[str] = frozenset()
) -> VerdictSummary | None:
    """The call, with holdout tasks that decided it named only as such."""
    if d is None:
        return None
    iv = d.interval
    return VerdictSummary(
        treatment=treatment,
        control=control,
        kind=d.kind,
        subject="a holdout task" if d.subject in holdout else d.subject,
        estimate=d.estimate,
        ci_low=None if iv is None else iv.low,
        ci_high=None if iv is None else iv.high,
        confidence=None if iv is None else iv.confidence,
        p_value=d.p_value,
        threshold=d.threshold,
        decided_by=["a holdout task" if t in holdout else t for t in d.decided_by],
        exact=d.exact,
        alpha=d.alpha,
        band=d.band,
        tasks=len(d.tasks),
        design=d.design.label,
        rounds=d.rounds,
        repeats_needed=d.repeats_needed,
        reason=_masked(d.reason, holdout),
    )


def _masked(reason: str, holdout: frozenset[str]) -> str:
    """The verdict's reason with each holdout task it names written as "a holdout task"."""
    for task in sorted(holdout, key=len, reverse=True):
        reason = re.sub(rf"\btask {re.escape(task)}(?=[\s,;:.)]|$)", "a holdout task", reason)
    return reason


def _task_call(call: decision.TaskDecision | None) -> TaskDecisionSummary | None:
    if call is None:
        return None
    iv = call.interval
    return TaskDecisionSummary(
        kind=call.kind,
        p_regressed=call.p_regressed,
        p_improved=call.p_improved,
        rounds=call.rounds,
        treatment_runs=call.treatment_runs,
        control_runs=call.control_runs,
        ci_low=None if iv is None else iv.low,
        ci_high=None if iv is None else iv.high,
    )


def _usage(graded: Sequence[RunResult], treatment: str, control: str) -> list[ShiftSummary]:
    """Tokens and cost of all graded runs, treatment vs control, by rank (a runaway run is one rank)."""
    out = []
    for metric in ("tokens", "cost_usd"):
        t, c = (
            _present(_USAGE[metric](r) for r in graded if r.cell.condition == x) for x in (treatment, control)
        )
        test = stats.rank_shift(t, c)
        if test is not None:
            out.append(ShiftSummary(metric=metric, treatment=treatment, control=control, **asdict(test)))
    return out


def _order(conditions: Iterable[str]) -> list[str]:
    names = set(conditions)
    known = [c for c in _CANONICAL_ORDER if c in names]
    return known + sorted(names - set(known))


def _shown(runs: Sequence[RunResult], holdout: set[str]) -> list[RunResult]:
    return [r for r in runs if r.cell.task not in holdout]


def _missed(by_condition: Mapping[str, Sequence[RunResult]]) -> dict[str, list[MissedItem]]:
    out: dict[str, list[MissedItem]] = {}
    for condition, runs in by_condition.items():
        graded = [r for r in runs if _graded(r)]
        counts: Counter[tuple[str, str, str]] = Counter()
        notes: dict[tuple[str, str, str], str] = {}
        runs_per_task = Counter(r.cell.task for r in graded)
        for r in graded:
            for item in r.score.missed if r.score else ():
                key = (r.cell.task, item.kind, item.expected)
                counts[key] += 1
                notes.setdefault(key, item.note)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_MISSED]
        out[condition] = [
            MissedItem(task=t, kind=k, expected=e, count=n, runs=runs_per_task[t], note=notes[(t, k, e)])
            for (t, k, e), n in top
        ]
    return out


def _confounds(
    manifest: Manifest, detection: Detection, results: Sequence[RunResult], conditions: Sequence[str]
) -> Confounds:
    # every completed run, measured or not: a run of unjudged key points still ran somewhere
    graded = [r for r in results if r.status is not RunStatus.infra_error and r.score is not None]
    isolation = Counter(r.isolation for r in graded)
    with_runs = {r.cell.condition for r in graded}
    done = {r.cell.key for r in results}
    unscored = {(r.cell.task, i.expected) for r in graded if r.score for i in r.score.items if i.hit is None}
    expected = set(conditions) if manifest.arms else {BASE, HEAD, NONE, *conditions}
    return Confounds(
        isolation=dict(sorted(isolation.items())),
        weak_isolation=sorted(set(isolation) - FULL_ISOLATION),
        near_misses=list(detection.near_misses),
        unscored_points=len(unscored),
        # A plan of arms compares its own columns; it never asked for base, head and none.
        missing_conditions=[c for c in _order(expected) if c not in with_runs],
        missing_runs=sum(1 for cell in _planned(manifest, results) if cell.key not in done),
        instruction_flags=instruction_usage.audit_flags(graded),
        unread_changes=unread_by(manifest.agent.name, detection),
        code_changes=len(detection.other_changed),
        source=_source_side(manifest),
        task_sources=dict(manifest.task_sources),
        unguarded=sorted({r.cell.task for r in graded if _unguarded_pass(r)} - set(manifest.holdout)),
        skipped=dict(manifest.skipped),
    )


def _unguarded_pass(run: RunResult) -> bool:
    """A hidden-test pass that only the runner's own report vouches for (no pytest guard)."""
    hidden = run.hidden_tests
    return hidden is not None and hidden.status == "pass" and not hidden.guarded


def _source_side(manifest: Manifest) -> Literal["base", "head", "other"]:
    if manifest.source_sha == manifest.head_sha:
        return "head"
    return "base" if manifest.source_sha == manifest.base_sha else "other"


def _planned(manifest: Manifest, results: Sequence[RunResult]) -> list[Cell]:
    """The cells that should have results: the whole plan, or (adaptive repeats, where the
    round loop stops decided tasks) each task's rounds up to the last one it ran."""
    if not manifest.adaptive:
        return list(manifest.order)
    last: dict[str, int] = {}
    for r in results:
        last[r.cell.task] = max(last.get(r.cell.task, 0), r.cell.repeat)
    return [c for c in manifest.order if c.repeat <= last.get(c.task, 0)]


SELFTEST = "selftest: "
"""Prefixes a `GradingFailure.where` that is a selftest leg (else it is a run, `base r1`)."""


AGENT_FAULTS = (RunStatus.agent_error, RunStatus.timeout)
"""Faults docdelta sees in the agent itself (it exited with an error, crashed or hung), as
opposed to `infra_error` (sandbox, gateway, grader) and hidden tests that never ran: the
condition's instruction files reach the agent, so a PR can cause these in one arm only."""


def arm_failures(results: Sequence[RunResult], alpha: float) -> tuple[str, float] | None:
    """The regression shown by failures alone: the agent failed (AGENT_FAULTS) in more of
    head's runs than of base's, with a two-sided Fisher exact p below `alpha`. Such runs
    are evidence about head's docs, not harness noise, so they give a verdict where a broken
    evaluation would give none (and a `neutral` check, which a required check lets pass)."""

    def tally(condition: str) -> tuple[int, int]:
        runs = [r for r in results if r.cell.condition == condition and r.status is not RunStatus.infra_error]
        return sum(r.status in AGENT_FAULTS for r in runs), len(runs)

    (fh, nh), (fb, nb) = tally(HEAD), tally(BASE)
    if not nh or not nb or fh / nh <= fb / nb:
        return None
    p = stats.fisher_two_sided(fh, nh - fh, fb, nb - fb)
    if p >= alpha:
        return None
    why = (
        f"the agent failed (agent_error or timeout) in {fh} of {nh} head runs against {fb} of {nb} "
        f"base runs (Fisher exact p = {p:.2g} < {alpha:g}): head's instruction files make the agent fail"
    )
    return why, p


FAILURES = "agent failures"
"""`VerdictSummary.decided_by` of a regression that `arm_failures` decided."""


def _crashed_in_head(
    broken: str | None, results: Sequence[RunResult], failures: Sequence[GradingFailure], alpha: float
) -> tuple[str, float] | None:
    """`arm_failures` for an evaluation broken by its faults (not by a failed selftest, after
    which no run is trusted); None otherwise."""
    if broken is None or _failed_selftests(failures):
        return None
    return arm_failures(results, alpha)


NO_TEST_RAN = "no_test_ran"
"""The fault of a graded run whose hidden tests never ran (`HiddenTestResult.no_test_ran`)."""


def _no_test_ran(run: RunResult) -> bool:
    return run.status not in FAULTS and run.hidden_tests is not None and run.hidden_tests.no_test_ran


def _faults(results: Sequence[RunResult]) -> dict[str, int]:
    """Runs per FAULTS status, and runs whose hidden tests never ran (NO_TEST_RAN: they
    score 0, yet say the environment failed, not the agent), zero counts left out."""
    counts = Counter(r.status for r in results if r.status in FAULTS)
    faults = {str(status): counts[status] for status in FAULTS if counts[status]}
    if ungraded := sum(_no_test_ran(r) for r in results):
        faults[NO_TEST_RAN] = ungraded
    return faults


def _failed_selftests(failures: Sequence[GradingFailure]) -> list[str]:
    return sorted({f.task for f in failures if any(w.startswith(SELFTEST) for w in f.where)})


def _broken(
    results: Sequence[RunResult], faults: Mapping[str, int], failures: Sequence[GradingFailure]
) -> str | None:
    """The scorecard's lead when more than MAX_FAULT_RATE of the runs are faults, or when a
    change task's selftest found that its hidden tests cannot run (then no run is trusted).
    It quotes the failed runs' most common error, so the cause (`can't open file`) is on the
    scorecard and not only in some result.json."""
    total = len(results)
    if selftests := _failed_selftests(failures):
        return (
            f"the hidden tests of {', '.join(selftests)} could not be graded: the selftest ran no test "
            "(see *Grading failures* for the command's last lines). Fix the environment "
            "(`.docdelta.yml` `sandbox`) or the task's command, check it with `docdelta selftest`, "
            "and rerun"
        )
    failed = sum(faults.values())
    if not total or failed / total <= MAX_FAULT_RATE:
        return None
    kinds = ", ".join(f"{n} {status}" for status, n in faults.items())
    errors = Counter(r.outcome.error for r in results if r.status in FAULTS and r.outcome.error)
    said = ""
    if errors:
        error, n = errors.most_common(1)[0]
        said = f" The most common error ({n} of {failed} failed runs): {quoted(error)}."
    return (
        f"{failed} of {total} runs ({failed / total:.0%}) failed for reasons of the harness or the agent "
        f"command ({kinds}), over the {MAX_FAULT_RATE:.0%} a verdict allows: the scores measure the "
        f"failure, not the docs.{said} Read a failed run's `outcome.error` (or `hidden_tests.notes`) in "
        "its result.json, fix the cause and rerun"
    )


def _saturated(
    grid: Mapping[str, Mapping[str, Sequence[RunResult]]], conditions: Sequence[str]
) -> str | None:
    """The scorecard's lead when every task with graded runs sat at one extreme in every run of
    every condition (`stats.saturation`): no score could move, so equivalence on identical arms
    would be a confident "no change" about nothing. A task at 0 can show no drop, the direction
    a gate is for; one at 1 can, unless it passed without instruction files too (NONE ran and
    scored 1): then the score never depended on them. Said in the words of its likely causes:
    at 0 an agent that cannot answer, or files that say nowhere what the tasks ask; at 1 tasks
    that need no instruction file. Below
    `decision.MIN_ARM_RUNS` runs in an arm no test runs anyway, and the decision's own "too
    few runs" (rerun with more repeats) is the better advice."""
    scores = [{c: _scores(by_condition.get(c, [])) for c in conditions} for by_condition in grid.values()]
    levels = [stats.saturation(arms) for arms in scores]
    few = any(0 < len(runs) < decision.MIN_ARM_RUNS for arms in scores for runs in arms.values())
    blind = [
        level == 0.0 or (level is not None and bool(arms.get(NONE)))
        for level, arms in zip(levels, scores, strict=True)
    ]
    if not levels or not all(blind) or few:
        return None
    runs = sum(len(_scores(rs)) for by_condition in grid.values() for rs in by_condition.values())
    named = ", ".join(conditions)
    if set(levels) == {0.0}:
        what = (
            f"no run in any condition ({named}) passed any task: all {runs} runs scored 0, so no score "
            "could move. Either the agent cannot answer these tasks (check one with `docdelta "
            "agent-check --tasks DIR`, which shows what it was given and what it said) or no version "
            "of the instruction files says what they ask (`docdelta suggest --workdir WORKDIR` "
            "proposes lines that do)"
        )
    elif set(levels) == {stats.PASS_SCORE}:
        what = (
            f"every run in every condition ({named}) passed every task: all {runs} runs scored 1, even "
            "without instruction files, so these tasks cannot show what the files change. Write tasks "
            "that need what the files say"
        )
    else:
        low = levels.count(0.0)
        what = (
            f"every task scored the same in every run of every condition ({named}): {low} at 0, "
            f"{len(levels) - low} at 1 even without instruction files, so no score could move. Check "
            "that the agent answers the tasks at 0 (`docdelta agent-check --tasks DIR`) and replace "
            "the tasks at 1"
        )
    return f"{what}; `docdelta tasks audit --tasks DIR --results WORKDIR` lists the saturated tasks"


def grading_failures(
    results: Sequence[RunResult], selftests: Sequence[SelftestReport]
) -> list[GradingFailure]:
    """Every grading in which no test ran, from failed selftest legs and from runs, grouped
    by task, reason and output so a matrix failing alike shows its cause once."""
    found: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for report in selftests:
        for leg in report.legs:
            if not leg.passed and leg.result is not None and leg.result.no_test_ran:
                found[(report.task, *leg.result.reason_and_output())].append(SELFTEST + leg.name)
    for run in results:
        if _no_test_ran(run):
            assert run.hidden_tests is not None
            where = f"{run.cell.condition} r{run.cell.repeat}"
            found[(run.cell.task, *run.hidden_tests.reason_and_output())].append(where)
    return [
        GradingFailure(task=task, where=where, reason=reason, output=output)
        for (task, reason, output), where in found.items()
    ]


def summarize(
    manifest: Manifest,
    detection: Detection,
    results: Sequence[RunResult],
    *,
    noise: float | None = None,
    alpha: float = stats.DEFAULT_ALPHA,
    docs: Sequence[InstructionRef] = (),
    power: PowerSummary | None = None,
    pooled: PooledControl | None = None,
    selftests: Sequence[SelftestReport] = (),
) -> Summary:
    """The scorecard's numbers for one experiment. Missing arms give None deltas, never a crash.

    `power`: what the design can see, as the run cached it (`scorecard` reads it); passed in
    so that rendering a report never simulates. `pooled`: earlier base runs (`cache.pool`),
    part of the head-vs-base decision's control.

    `docs`: the commands and paths of the docs diff (`instruction_usage.read_docs`);
    their use is tallied per arm over the graded runs. `selftests`: the change tasks' failed
    selftests the run recorded (`ResultStore.failed_selftests`): their tests could not run."""
    noise = manifest.band if noise is None else noise
    conditions = _order([c.name for c in manifest.conditions] + [r.cell.condition for r in results])
    grid: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        grid[r.cell.task][r.cell.condition].append(r)
    task_ids = sorted(set(manifest.tasks) | set(grid))
    holdout = set(manifest.holdout)  # counted in every aggregate, never shown on their own
    design = design_of(manifest)
    decisions = {
        c: decision.decide(
            task_runs(grid, HEAD, c, pooled.results if pooled and c == BASE else ()),
            design,
            alpha=alpha,
            band=noise,
            seed=manifest.seed,
        )
        for c in (BASE, NONE)
    }
    if pooled is not None and BASE in manifest.pooled_only:  # the pool is the base arm shown
        for r in pooled.results:
            grid[r.cell.task][BASE].append(r)
    vs_base = _strata(grid, HEAD, BASE)
    aa = _aa_noise(vs_base, manifest.repeats, manifest.seed)
    calls = {c: {t.task: t for t in d.tasks} if d else {} for c, d in decisions.items()}

    tasks = []
    for t in task_ids:
        by_condition = grid[t]
        task_band = _aa_band(_strata({t: by_condition}, HEAD, BASE), manifest.repeats, manifest.seed)
        tasks.append(
            TaskSummary(
                task=t,
                conditions={c: _condition_stats(c, {t: by_condition.get(c, [])}) for c in conditions},
                head_vs_base=_task_delta(HEAD, BASE, by_condition, noise, task_band, calls[BASE].get(t)),
                head_vs_none=_task_delta(HEAD, NONE, by_condition, noise, call=calls[NONE].get(t)),
                judged=_judged({c: by_condition.get(c, []) for c in conditions}),
                decision=_task_call(calls[BASE].get(t)),
            )
        )
    by_condition_all: dict[str, list[RunResult]] = defaultdict(list)
    for r in results:
        by_condition_all[r.cell.condition].append(r)
    infra_rate = sum(r.status is RunStatus.infra_error for r in results) / len(results) if results else None
    faults = _faults(results)
    failures = grading_failures(results, selftests)
    broken = _broken(results, faults, failures)
    crashed = None if decisions[BASE] is None else _crashed_in_head(broken, results, failures, alpha)
    broken = None if crashed else broken  # failures concentrated in head are the result
    saturated = None if broken or crashed else _saturated(grid, conditions)
    refused = broken or saturated
    if infra_rate is not None and infra_rate > MAX_INFRA_ERROR_RATE:
        refused = (
            f"{infra_rate:.0%} of runs are infra errors (over {MAX_INFRA_ERROR_RATE:.0%}): the graded "
            "runs may not be a fair sample of either arm; rerun to retry them"
        )
    verdicts: list[VerdictSummary | None] = [
        None if refused else _verdict(decisions[c], HEAD, c, frozenset(holdout)) for c in (BASE, NONE)
    ]
    if crashed is not None and verdicts[0] is not None:
        why, p = crashed
        update = {
            "kind": "regressed",
            "reason": why,
            "p_value": p,
            "threshold": alpha,
            "decided_by": [FAILURES],
        }
        verdicts[0] = verdicts[0].model_copy(update=update)
    overall: dict[str, Delta] = {}
    for c in (BASE, NONE):
        value = stats.mean_delta([(t.head_vs_base if c == BASE else t.head_vs_none).value for t in tasks])
        d = _delta(HEAD, c, value, noise, aa.band if aa and c == BASE else None)
        found = decisions[c]
        overall[c] = d.model_copy(
            update={
                "certainty": _overall_certainty(found, value, noise),
                "p_value": None if found is None else found.overall_p,
            }
        )
    if refused:  # no verdict, so no mark may speak for one
        overall = {c: d.model_copy(update={"certainty": None}) for c, d in overall.items()}
        tasks = [_unmarked(t) for t in tasks]
    gated = {t: not refused and t not in holdout for t in task_ids}
    tasks = [_with_threshold(t, manifest, grid[t.task], gate=gated[t.task]) for t in tasks]

    return Summary(
        repo=manifest.repo,
        base_sha=manifest.base_sha,
        head_sha=manifest.head_sha,
        source_sha=manifest.source_sha,
        agent=manifest.agent,
        repeats=manifest.repeats,
        noise_band=noise,
        conditions=conditions,
        changed=list(detection.changed),
        tasks=[t for t in tasks if t.task not in holdout],
        holdout_tasks=len(holdout & set(task_ids)),
        unreviewed=sorted(set(manifest.unreviewed) - holdout),
        unreviewed_holdout=len(set(manifest.unreviewed) & holdout),
        overall={c: _condition_stats(c, {t: grid[t].get(c, []) for t in task_ids}) for c in conditions},
        head_vs_base=overall[BASE],
        head_vs_none=overall[NONE],
        missed=_missed({c: _shown(by_condition_all.get(c, []), holdout) for c in conditions}),
        confounds=_confounds(manifest, detection, results, conditions),
        alpha=alpha,
        verdict=verdicts[0],
        verdict_vs_none=verdicts[1],
        power=power,
        pooled=_pool_summary(pooled, manifest),
        usage=_usage([r for r in results if _graded(r)], HEAD, BASE),
        infra_error_rate=infra_rate,
        unmeasured=[t for t in _unmeasured(results) if t not in holdout],
        verdict_refused=refused,
        faults=faults,
        broken=broken,
        saturated=saturated,
        instruction_usage=instruction_usage.tally(docs, [r for r in results if _graded(r)], conditions),
        grading_failures=failures,
        aa_noise=aa,
        arms=[] if refused else arms.compare(manifest, grid, band=noise),
        threshold_failures=[t.task for t in tasks if t.threshold is not None and t.threshold.blocks],
        triggers=triggers.rates(results, conditions, seed=manifest.seed),
    )


def _with_threshold(
    task: TaskSummary, manifest: Manifest, by_condition: Mapping[str, Sequence[RunResult]], *, gate: bool
) -> TaskSummary:
    """The task with its pass threshold per arm, when the plan gave it one."""
    bar = manifest.thresholds.get(task.task)
    if bar is None:
        return task
    scores = {c: _scores(runs) for c, runs in by_condition.items()}
    return task.model_copy(update={"threshold": thresholds.summarize(bar, scores, gate=gate)})


def pooled_verdict(
    parts: Mapping[str, tuple[Manifest, Sequence[RunResult]]], *, alpha: float, band: float
) -> VerdictSummary | None:
    """Head vs base over several evaluations as one (`docdelta run --repos`): each
    evaluation's task is a stratum of its own (`name/task`), and all of them form one Holm
    family with the pooled overall mean, every task weighing the same (so a repository weighs
    by its number of tasks). `decision.decide` takes it under the evaluations' design, exactly
    as it would take one evaluation of all those tasks: the union bound over the looks holds
    for each task's own rounds, whichever evaluation ran them. The evaluations share their
    design (one `--repeats` for every repository) and the seed is the first's. Holdout tasks
    count and are never named. None without a task that has both arms."""
    if not parts:
        return None
    manifests = [m for m, _ in parts.values()]
    grid: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    holdout: set[str] = set()
    for name, (manifest, results) in parts.items():
        for r in results:
            grid[f"{name}/{r.cell.task}"][r.cell.condition].append(r)
        holdout |= {f"{name}/{t}" for t in manifest.holdout}
    found = decision.decide(
        task_runs(grid, HEAD, BASE), design_of(manifests[0]), alpha=alpha, band=band, seed=manifests[0].seed
    )
    return _verdict(found, HEAD, BASE, frozenset(holdout))
