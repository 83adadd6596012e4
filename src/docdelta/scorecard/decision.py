"""The gate's decision: per task and overall, fixed or sequential, with its error budget.

Pure numbers in, a `Decision` out; the summary, the check, the round loop
(`docdelta.scorecard.sequential`) and the power simulation (`docdelta.scorecard.power`) all
call `decide`, so the rule the bench measures is the rule the CLI and the Action apply.

The procedure, and why this one:

* **Hypotheses.** One per task and one overall (the stratified mean of per-task deltas),
  each tested in both directions. A task that breaks is found on its own instead of
  drowning in the mean; the overall test still catches a small change spread over tasks.
* **Per-look test.** The stratified permutation test of the mean-score delta, one-sided, as
  a mid-p value (`stats.directional_test`; for one pass/fail task it is the mid-p Fisher
  test). It holds for pass/fail and partial scores alike and assumes nothing but
  exchangeable runs within a task.
* **Looks and optional stopping.** A design has a schedule of looks: one for a fixed
  `--repeats N`; for `--repeats auto` four, at AUTO_LOOK_SHARES of `--max-repeats`, spending
  AUTO_SPENT of alpha by each (w_k is that look's increment); a hypothesis's sequential
  p-value is min_k p_k / w_k over the looks with w_k > 0. By the union bound P(min_k p_k /
  w_k <= u) <= sum_k u w_k <= u (the weights sum to at most 1) whatever rule stops the
  experiment or picks the task that runs next (`docdelta.scorecard.sequential`), as long as
  look k sees a task's first n_k rounds: its error rate holds under optional stopping and
  adaptive allocation. Binding futility (`Design.futility`, on for auto) closes a direction
  once a look that spent alpha, before the cap, gives it a one-sided p above FUTILITY_P: it
  only removes rejections, so the bound
  still holds and the real size falls. Group-sequential z
  boundaries would spend less, but they rest on a normal approximation that 3-24 pass/fail
  runs per arm do not support and on equal information per look, which stopping tasks one
  by one breaks; always-valid e-values (betting
  martingales on paired head - base differences) hold without any of that, but for a
  0.8 -> 0.3 drop even the best bet known in advance grows by 0.23 nats per pair, so
  crossing 1 / (alpha / 4) = 80 takes 19 pairs or more, a learned bet many more: the
  cost users balk at. The union bound over the looks costs less (bench/bench_gate.py), and
  its exact size is property-tested (tests/unit/test_gate_properties.py).
* **Multiplicity.** Holm's step-down procedure at alpha over all hypotheses of one
  direction (tasks + overall), on their sequential p-values: the family-wise rate of a
  false regression (and, separately, of a false improvement) stays <= alpha under any
  dependence between tasks. A rejection also needs the delta outside the noise band.
* **No change.** Two one-sided tests (TOST) against the configured band, once, at the
  design's final look, with all of alpha, as an intersection-union test: no_change only when
  the (1 - 2 alpha) interval of EVERY hypothesis lies inside its margin (the overall mean's
  inside +-band, each task's inside +-TASK_BAND_FACTOR x band) and no hypothesis changed, so
  a task that dropped on its own cannot hide in the overall mean. Requiring all of them keeps
  the error rate of each at alpha without any adjustment.
* **One statistic per line.** Every hypothesis is shown as its raw delta, one (1 - 2 alpha)
  interval and its own p (`line_interval`): the interval is the test's own where the test
  rejects (the test-based interval of the printed p, Altman & Bland 2011, so p <= alpha
  exactly when the interval excludes 0 on the side of the estimate) and, where it does not,
  the hull of a Wald interval and 0. The Wald interval is centred on the raw delta
  (never on shrunk means: the printed estimate always lies inside its interval) with an
  Agresti-Caffo spread (a 0 and a 1 pseudo-run added to each arm for the variance only,
  divided by the real run count), so identical runs never give a zero-width interval; an arm
  of fewer than MIN_ARM_RUNS runs gives none at all, and then no p is printed either:
  1 task x 1 repeat is inconclusive, never "no change".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from statistics import NormalDist

from docdelta.scorecard import stats
from docdelta.scorecard.models import VerdictKind
from docdelta.validate import DEFAULT_MAX_REPEATS
from docdelta.vocabulary import DEFAULT_NOISE_BAND

OVERALL = "overall"
"""The name of the overall hypothesis, beside the task ids."""
MAX_EXACT_SUPPORT = 5_000
"""Above this many possible deltas a look samples its permutations (seeded) instead of
enumerating them: partial scores make every split distinct, and a look must stay cheap
because the round loop and the power simulation take thousands of them."""
MIN_ARM_RUNS = 2
"""Fewest runs per arm from which a task's spread (and so an interval) can be estimated."""
AUTO_LOOK_SHARES = (1 / 8, 5 / 12, 2 / 3, 1.0)
"""`--repeats auto` looks after these shares of the cap (3, 10, 16, 24 at the default)."""
AUTO_SPENT = (0.0, 0.2, 0.5, 0.8)
"""The share of alpha spent by each of those looks (cumulative). The first look spends none:
at 3 runs per arm no pass/fail outcome reaches alpha / 4 (the smallest one-sided mid-p is
0.025), so it only tells the round loop which task to run next (`docdelta.scorecard.sequential`). A fifth
of alpha at the second look, where a real drop shows first, and the rest over the cap, so a
drop missed early still has most of it left: since no change needs each task's interval
inside the task margin (TASK_BAND_FACTOR), A/A PRs run every task to the cap and the late
looks are taken anyway. The looks spend 4/5 of alpha, not all of it: the product's target
for a false regression on an A/A PR is 2%, below the 5% the bound allows, and spending all
of alpha (0, .25, .6, 1) measured 2.4% [1.8, 3.1] on 2,000 simulated PRs (seed 5151, band
0.2, cap 24, FUTILITY_P 0.35, tasks 0.3 / 0.5 / 0.8) at 86.1% power on the drop; at 1,000
PRs of the same seed (0, .25, .6, .8) measured 1.4% and 83.6% power, (0, .2, .5, .85) 1.3%
and 84.5%. Spending less than alpha keeps the union bound (the sum of the weights stays at
most 1). Earlier, chosen on
bench/bench_gate.py's simulation (one of three tasks 0.8 -> 0.3, 300 PRs each, focus one round
at a time, one seed): (3, 10, 16, 24) spending (0, .5, .8, 1) 83% power at 65 runs;
(3, 12, 24) (0, .7, 1) 84% at 66; (3, 12, 24) (0, .6, 1) 81% at 71; the previous (4, 12, 24)
spending (1/6, 1/2, 1) with every task running to each look 87% at 78. A/A false regression
2-3% in all of them. With FUTILITY_P and the round loop's early stop, this design measured
81.4% [78.9, 83.7] power at 56.3 runs per PR and an A/A false regression of 1.9% [1.2, 2.9]
(1,000 PRs each, `bench/bench_gate.py --seed 5150`, before "no change" needed every task inside the band;
docs/scorecard.md has the figures at the shipped defaults)."""
FUTILITY_P = 0.35
"""Binding futility (`Design.futility`): after a look that spent alpha, before the cap, a
direction whose one-sided mid-p (unweighted) is above this is closed for good. Chosen on
bench/bench_gate.py's drop with the round loop's early stop, 1,000 PRs per figure: at seed
2027, 0.15 -> 80.4% power at 56.4 runs per PR, 0.25 -> 81.1% at 58.3, 0.35 -> 82.4% at 61.0,
0.5 (about "the delta does not point its way", the previous rule) 82.8% at 63.1; at seed
20268201, 0.2 -> 81.2% at 56.7, 0.25 -> 80.6% at 60.9 (spending 0/.6/.85/1 instead: 74.8% at
62.4). Raised to 0.35 with the task margin: at 0.2, 8.5% of drop PRs lost the
dropped task to futility at round 10 (51 of 600 at seed 24002), and A/A PRs now run to the
cap for no change whatever futility closes, so a later close costs few runs; at seed 24001,
1,000 PRs, 0.2 -> 80.4% power at 54.7 runs, 0.35 -> 83.2% at 57.3 (spending 0/.5/.8/1).
Closing only removes rejections, so any value keeps the error bound."""
TASK_BAND_FACTOR = 2.0
"""No change needs each task's own (1 - 2 alpha) interval inside +-TASK_BAND_FACTOR x band (the
overall mean's stays inside +-band). With the band itself per task (factor 1) no change is out
of reach for a mid-rate task at any sane cap: at 24 runs per arm a 0.5 task's 90% Wald
half-width is 1.645 sqrt(0.5 / 24) = 0.237 > 0.2 even when both arms agree exactly, and a
0.3 / 0.5 / 0.8 suite needs about 100 runs per arm and task before most A/A PRs make it. At
twice the band a one-task drop the size of the issue's (0.8 -> 0.3) cannot end as no change
unless its own interval excludes its true delta (bench/bench_gate.py measures the rate), and a
task that moved by more than the band still shows in its own row."""
POOLED = 0
"""The repeat number pooled control runs (earlier batches of the base arm) carry: before round 1."""


# ------------------------------------------------------------------ design
@dataclass(frozen=True)
class Design:
    """When decisions may be taken (`looks`, in rounds = repeats per arm) and the share of
    alpha each look spends (`weights`, summing to at most 1)."""

    looks: tuple[int, ...]
    weights: tuple[float, ...]
    adaptive: bool
    futility: bool = False
    """Binding futility: after a look before the cap, a direction whose one-sided p is above
    FUTILITY_P (the delta does not point clearly its way) is closed for good."""

    @classmethod
    def fixed(cls, repeats: int) -> Design:
        return cls((repeats,), (1.0,), adaptive=False)

    @classmethod
    def auto(cls, max_repeats: int = DEFAULT_MAX_REPEATS) -> Design:
        """Looks at the AUTO_LOOK_SHARES of the cap (at least MIN_ARM_RUNS runs, distinct),
        spending AUTO_SPENT of alpha by each; looks that round to one keep the larger share."""
        spent: dict[int, float] = {}
        for share, by in zip(AUTO_LOOK_SHARES, AUTO_SPENT, strict=True):
            n = min(max_repeats, max(MIN_ARM_RUNS, round(share * max_repeats)))
            spent[n] = max(spent.get(n, 0.0), by)
        looks = tuple(sorted(spent))
        cumulative = [spent[n] for n in looks]
        weights = tuple(b - a for a, b in zip([0.0, *cumulative], cumulative, strict=False))
        return cls(looks, weights, adaptive=True, futility=True)

    @property
    def cap(self) -> int:
        return self.looks[-1]

    def taken(self, rounds: int) -> list[tuple[int, float]]:
        """(look, weight) of the looks reached after `rounds` rounds. A fixed design always
        takes its one look on whatever runs exist (a partly failed matrix still decides)."""
        if not self.adaptive:
            return [(rounds, 1.0)]
        return [(n, w) for n, w in zip(self.looks, self.weights, strict=True) if n <= rounds]

    @property
    def label(self) -> str:
        if not self.adaptive:
            return f"fixed {self.cap} repeats"
        shown = [
            f"{n} (allocation only)" if w == 0 else str(n)
            for n, w in zip(self.looks, self.weights, strict=True)
        ]
        return f"auto, looks after rounds {', '.join(shown)}"


# ------------------------------------------------------------------- input
Runs = Sequence[tuple[int, float]]
"""(repeat, score) of one arm's graded runs; pooled earlier control runs carry repeat POOLED."""


@dataclass(frozen=True)
class TaskRuns:
    treatment: Runs
    control: Runs

    def upto(self, rounds: int) -> stats.Stratum:
        return (
            [s for r, s in self.treatment if r <= rounds],
            [s for r, s in self.control if r <= rounds],
        )

    @property
    def rounds(self) -> int:
        return max((r for r, _ in (*self.treatment, *self.control)), default=0)


# ------------------------------------------------------------------ output
@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    confidence: float

    def inside(self, band: float) -> bool:
        return -band < self.low and self.high < band


@dataclass(frozen=True)
class TaskDecision:
    task: str
    kind: VerdictKind
    delta: float
    treatment_runs: int
    control_runs: int
    rounds: int
    p_regressed: float
    """Holm-adjusted sequential p of "treatment is worse": the p the regression call used."""
    p_improved: float
    interval: Interval | None
    """This task's (1 - 2 alpha) interval (`line_interval`), agreeing with its p in the
    direction of its delta; None when an arm is too small."""
    can_regress: bool = True
    """A later look could still call it regressed: its regression direction is not closed by
    futility and it is below the cap (the round loop spends rounds only on such tasks first)."""


@dataclass(frozen=True)
class Decision:
    kind: VerdictKind
    decided_by: tuple[str, ...]
    """The hypotheses that decided (task ids and/or OVERALL); empty when inconclusive."""
    p_value: float | None
    """The p of `subject`, the hypothesis whose numbers the headline shows: its Holm-adjusted
    sequential p (a change, or inconclusive: the overall mean's, in the direction of its
    estimate), its TOST p (no change); None where no test can reject (an arm too small)."""
    threshold: float
    estimate: float
    """The raw delta of `subject`."""
    interval: Interval | None
    """The (1 - 2 alpha) interval of `subject` (`line_interval`): it contains `estimate` and
    agrees with `p_value`."""
    alpha: float
    band: float
    exact: bool
    design: Design
    rounds: int
    tasks: tuple[TaskDecision, ...]
    reason: str
    repeats_needed: int | None = None
    """Inconclusive: repeats per arm at which this spread would show no change if the true delta is 0."""
    stop: dict[str, bool] = field(default_factory=dict)
    """Per task: True when it is decided and needs no more rounds (the round loop reads it)."""
    no_change_reachable: bool = True
    """Whether running every task to the cap could still show no change: False when the
    interval projected to the cap (each task's current delta, its spread shrunk to the cap's
    run count, `_projected_inside`) does not lie inside its margin. Only the round loop reads
    it, to stop early; like any stopping rule it cannot raise an error rate."""
    subject: str = OVERALL
    """The hypothesis the headline's estimate, interval and p belong to: the deciding task
    (the smallest p among those that decided) or OVERALL."""
    overall_p: float | None = None
    """The overall mean's own p in the direction of its estimate (the all-tasks row's), None
    where no test can reject."""

    @property
    def decisive(self) -> bool:
        """Nothing more to learn: a change was found, or no change shown."""
        return self.kind != "inconclusive"


# --------------------------------------------------------------- machinery
def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm step-down adjusted p-values: reject those <= alpha, family-wise rate <= alpha."""
    order = sorted(p_values, key=lambda k: p_values[k])
    m, running, out = len(order), 0.0, {}
    for i, key in enumerate(order):
        running = max(running, min(1.0, (m - i) * p_values[key]))
        out[key] = running
    return out


def _adjusted_mean(scores: Sequence[float]) -> tuple[float, float, int]:
    """(raw mean, variance of the mean, n): the spread is Agresti-Caffo's (a 0 and a 1
    pseudo-run added) so that identical runs still have one, divided by the real run count
    so that two runs are not credited with the precision of four."""
    n = len(scores)
    values = [*scores, 0.0, 1.0]
    m = math.fsum(values) / len(values)
    spread = math.fsum((v - m) ** 2 for v in values) / len(values)
    return math.fsum(scores) / n, spread / n, n


def _wald(strata: Sequence[stats.Stratum], level: float) -> tuple[Interval, float, float] | None:
    """(1 - 2 level) Wald interval of the stratified delta, centred on the raw delta, with its
    centre and standard error; None when any arm has fewer than MIN_ARM_RUNS runs (its
    spread cannot be estimated)."""
    if not strata or any(len(t) < MIN_ARM_RUNS or len(c) < MIN_ARM_RUNS for t, c in strata):
        return None
    centre, variance = 0.0, 0.0
    for t, c in strata:
        (mt, vt, _), (mc, vc, _) = _adjusted_mean(t), _adjusted_mean(c)
        centre += mt - mc
        variance += vt + vc
    k = len(strata)
    centre, se = centre / k, math.sqrt(variance) / k
    z = _upper_quantile(level)
    return Interval(centre - z * se, centre + z * se, 1 - 2 * level), centre, se


def line_interval(
    estimate: float, p_lower: float, p_higher: float, wald: Interval | None, alpha: float
) -> Interval | None:
    """The (1 - 2 alpha) interval printed beside `estimate` and its p: it contains the estimate,
    and it excludes 0 below (above) exactly when `p_lower` (`p_higher`) is <= alpha.

    Where the p in the estimate's direction rejects, the test-based interval of that p
    (estimate +- z_alpha |estimate| / z_p, within the -1..1 a delta of scores can take): the
    inversion of the very test that decided.
    Elsewhere the hull of the Wald interval and 0, so a test that cannot reject (closed by
    futility, adjusted upwards by Holm, or simply weak) never sits beside an interval that
    claims a change. None when the test does not reject and there is no Wald interval (an
    arm too small to estimate its spread)."""
    p = p_lower if estimate < 0 else p_higher
    if estimate != 0 and p <= alpha:
        half = 0.0 if p <= 0 else _upper_quantile(alpha) * abs(estimate) / _upper_quantile(p)
        return Interval(max(-1.0, estimate - half), min(1.0, estimate + half), 1 - 2 * alpha)
    if wald is None:
        return None
    return Interval(min(wald.low, 0.0, estimate), max(wald.high, 0.0, estimate), wald.confidence)


def tost_p(estimate: float, interval: Interval, band: float, alpha: float) -> float:
    """The TOST p read off `interval` (its two halves as the two one-sided standard errors), so
    that it is <= alpha exactly when the interval lies inside +-band."""
    z = _upper_quantile(alpha)
    below, above = (estimate - interval.low) / z, (interval.high - estimate) / z
    return max(_tail(band - estimate, above), _tail(estimate + band, below))


def _tail(margin: float, se: float) -> float:
    if se == 0:
        return 0.0 if margin > 0 else 1.0
    return _upper_tail(margin / se)


_upper_tail = stats.normal_upper_tail
"""P(Z > z) for a standard normal Z, without scipy.stats.norm (stats.normal_upper_tail)."""


def _upper_quantile(level: float) -> float:
    """The z with P(Z > z) = `level` (scipy's `norm.ppf(1 - level)`), taken from the lower
    tail so that a tiny level is not first rounded away by 1 - level."""
    return -NormalDist().inv_cdf(level)


@dataclass
class _Seq:
    """Running sequential p's of one hypothesis over the looks taken."""

    lower: float = 1.0
    higher: float = 1.0
    final: bool = False
    """The design's final look was taken on it: only then may it show equivalence."""
    exact: bool = True
    closed_lower: bool = False
    """Binding futility closed the regression direction: later looks cannot lower `lower`."""
    closed_higher: bool = False


def _look(
    seq: _Seq,
    strata: Sequence[stats.Stratum],
    weight: float,
    *,
    final: bool,
    futility: bool,
    seed: int,
) -> None:
    """Fold one look into `seq`. Equivalence is tested once, at the design's final look, with
    all of alpha: stopping early for "no change" would buy little (it needs the most runs).
    With `futility`, a look before the cap whose one-sided p for a direction is above
    FUTILITY_P closes that direction (after this look's own test, which may still reject)."""
    test = stats.directional_test(strata, seed=seed, max_exact=MAX_EXACT_SUPPORT)
    if test is not None:
        if weight > 0 and not seq.closed_lower:
            seq.lower = min(seq.lower, test.lower / weight)
        if weight > 0 and not seq.closed_higher:
            seq.higher = min(seq.higher, test.higher / weight)
        seq.exact = seq.exact and test.exact
        if futility and weight > 0 and not final:
            seq.closed_lower = seq.closed_lower or test.lower > FUTILITY_P
            seq.closed_higher = seq.closed_higher or test.higher > FUTILITY_P
    seq.final = seq.final or final


def _projected_inside(usable: Mapping[str, TaskRuns], cap: int, *, alpha: float, band: float) -> bool:
    """Could the equivalence intervals at the cap lie inside their margins, if the runs still to
    come showed no difference? Each task's delta is diluted by its remaining runs (delta
    times runs now over runs at the cap: optimistic, so an A/A PR whose early runs wobble is
    not given up), each arm keeps its Agresti-Caffo spread with its run count grown to what
    the cap gives it (an arm of pooled runs only does not grow). A task already at the cap
    keeps its delta: one that dropped by 0.5 puts no change out of reach. No change needs
    every task's own interval inside the task margin too (`task_band`), so one task whose
    projected interval is wider than that puts it out of reach. True while an arm
    is too small to say. A guess for the round loop's stopping, never part of a decision."""
    z = _upper_quantile(alpha)
    centre, variance = 0.0, 0.0
    for runs in usable.values():
        t, c = runs.upto(runs.rounds)
        if len(t) < MIN_ARM_RUNS or len(c) < MIN_ARM_RUNS:
            return True
        more = max(0, cap - runs.rounds)
        grows = any(r > POOLED for r, _ in runs.control)
        (mt, vt, nt), (mc, vc, nc) = _adjusted_mean(t), _adjusted_mean(c)
        task_centre = (mt - mc) * nt / (nt + more)
        task_variance = vt * nt / (nt + more) + vc * nc / (nc + (more if grows else 0))
        if abs(task_centre) + z * math.sqrt(task_variance) >= task_band(band):
            return False
        centre += task_centre
        variance += task_variance
    k = len(usable)
    return abs(centre / k) + z * math.sqrt(variance) / k < band


def _needed(centre: float, se: float, n: float, *, alpha: float, band: float) -> int | None:
    """Repeats per arm at which the current spread would put the Wald interval inside the band."""
    margin = band - abs(centre)
    if margin <= 0:
        return None
    z = _upper_quantile(alpha)
    return max(math.ceil(n * (z * se / margin) ** 2), math.ceil(n) + 1)


def _sequential(
    usable: Mapping[str, TaskRuns],
    design: Design,
    looks: Sequence[tuple[int, float]],
    *,
    seed: int,
) -> dict[str, _Seq]:
    """Every hypothesis (each task, OVERALL) folded over the looks taken, on the data each
    look saw (runs of rounds up to it).

    Adaptive designs take a task's look n only once that task has run n rounds, and the
    overall look n once every task has: the round loop lets tasks wait (focus) or stop, and a
    look on fewer runs than its n would be one more chance to reject that the union bound
    over looks does not pay for."""
    seqs = {name: _Seq() for name in [*usable, OVERALL]}
    futility = design.adaptive and design.futility
    for i, (n, weight) in enumerate(looks):
        final = not design.adaptive or n == design.cap
        reached = {t: not design.adaptive or r.rounds >= n for t, r in usable.items()}
        strata = {t: r.upto(n) for t, r in usable.items()}
        look = partial(_look, weight=weight, final=final, futility=futility, seed=seed + i)
        for t, stratum in strata.items():
            if stratum[0] and stratum[1] and reached[t]:
                look(seqs[t], [stratum])
        both = [s for s in strata.values() if s[0] and s[1]]
        if both and all(reached.values()):
            look(seqs[OVERALL], both)
    return seqs


def task_band(band: float) -> float:
    """The margin each task's own interval must lie inside for no change (TASK_BAND_FACTOR)."""
    return TASK_BAND_FACTOR * band


def equivalence_band(hypothesis: str, band: float) -> float:
    """The margin `hypothesis`'s interval must lie inside for no change: the band for the
    overall mean, `task_band` for a task."""
    return band if hypothesis == OVERALL else task_band(band)


# ------------------------------------------------------------------ decide
def _named(k: str) -> str:
    return "the overall mean" if k == OVERALL else f"task {k}"


@dataclass(frozen=True)
class _Lines:
    """Every hypothesis's printed numbers: raw delta, line interval, both adjusted p's, TOST p."""

    deltas: dict[str, float]
    intervals: dict[str, Interval | None]
    lower: dict[str, float]
    higher: dict[str, float]
    tost: dict[str, float]
    """TOST p of the line interval; inf before the final look or without a Wald interval."""

    def p(self, k: str) -> float | None:
        """The p printed beside hypothesis k: its own, in the direction of its estimate; None
        without an interval (no test can reject)."""
        if self.intervals[k] is None:
            return None
        return self.lower[k] if self.deltas[k] < 0 else self.higher[k]

    def line(self, k: str, p: float | None, what: str) -> str:
        """One hypothesis as printed: its estimate, its interval, its own p."""
        iv = self.intervals[k]
        if iv is None or p is None:
            return f"{_named(k)} {self.deltas[k]:+.2f}"
        return (
            f"{_named(k)} {self.deltas[k]:+.2f}, {iv.confidence:.0%} interval "
            f"[{iv.low:+.2f}, {iv.high:+.2f}], {what} = {p:.3g}"
        )


def _lines(
    strata: Mapping[str, Sequence[stats.Stratum]], seqs: Mapping[str, _Seq], *, alpha: float, band: float
) -> _Lines:
    deltas = {k: stats.stratified_delta(v) or 0.0 for k, v in strata.items()}
    lower = holm({k: s.lower for k, s in seqs.items()})
    higher = holm({k: s.higher for k, s in seqs.items()})
    walds = {k: _wald(v, alpha) for k, v in strata.items()}
    intervals = {
        k: line_interval(deltas[k], lower[k], higher[k], None if w is None else w[0], alpha)
        for k, w in walds.items()
    }
    tost = {
        k: tost_p(deltas[k], iv, equivalence_band(k, band), alpha)
        if iv is not None and walds[k] and seqs[k].final
        else math.inf
        for k, iv in intervals.items()
    }
    return _Lines(deltas, intervals, lower, higher, tost)


def _change_reason(lines: _Lines, kind: str, who: Sequence[str], also: Sequence[str], d: _Context) -> str:
    """Why a change was called: the deciding hypothesis's own line, and the others that decided."""
    ps = lines.lower if kind == "regressed" else lines.higher
    subject = who[0]
    others = f"; also {kind}: {', '.join(map(_named, who[1:]))}" if who[1:] else ""
    mixed = f"; also improved: {', '.join(map(_named, also))}" if also else ""
    seq = "sequential " if d.design.adaptive else ""
    looks = len(d.design.looks)
    return (
        f"{kind}: {lines.line(subject, ps[subject], f'Holm-adjusted {seq}p')} <= alpha {d.alpha:g}, "
        f"outside ±{d.band:.2f}{others}{mixed}; identical docs are called {kind} in at most {d.alpha:.0%} "
        f"of PRs by this design ({len(lines.deltas)} hypotheses under Holm, {looks} look{'s' * (looks != 1)})"
    )


@dataclass(frozen=True)
class _Context:
    design: Design
    alpha: float
    band: float


def _inconclusive_reason(lines: _Lines, needed: int | None, d: _Context) -> str:
    """Why neither a change nor no change: the overall mean's own line, and what kept it open."""
    p, iv = lines.p(OVERALL), lines.intervals[OVERALL]
    assert iv is not None
    outside = [k for k, t in lines.tost.items() if k != OVERALL and t > d.alpha]
    if iv.inside(d.band) and outside:
        verb = "has" if len(outside) == 1 else "have"
        task_band = equivalence_band(outside[0], d.band)
        why = f"{', '.join(map(_named, outside))} {verb} an interval not inside ±{task_band:.2f}"
    elif iv.inside(d.band):
        why = f"the design has not reached its final look (round {d.design.cap})"
    elif needed is not None:
        why = (
            f"the interval is not inside ±{d.band:.2f}; about {needed} repeats per arm would show no "
            "change if the true delta is 0"
        )
    else:
        why = f"the interval is not inside ±{d.band:.2f}, and the estimate itself lies outside it"
    signif = (
        f"significant but within ±{d.band:.2f}"
        if p is not None and p <= d.alpha
        else f"not significant at alpha {d.alpha:g}"
    )
    return f"inconclusive: {lines.line(OVERALL, p, 'Holm-adjusted p')}, {signif}; {why}"


def _kind(
    t: str, regressed: Sequence[str], improved: Sequence[str], equivalent: Mapping[str, bool]
) -> VerdictKind:
    if t in regressed:
        return "regressed"
    if t in improved:
        return "improved"
    return "no_change" if equivalent[t] else "inconclusive"


def decide(
    tasks: Mapping[str, TaskRuns],
    design: Design,
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
    seed: int = 0,
) -> Decision | None:
    """The decision on treatment vs control after the rounds run so far; None without a
    task whose two arms both have graded runs."""
    usable = {t: r for t, r in sorted(tasks.items()) if r.treatment and r.control}
    if not usable:
        return None
    rounds = max(r.rounds for r in usable.values())
    looks = design.taken(rounds)
    seqs = _sequential(usable, design, looks, seed=seed)
    full = {t: r.upto(rounds) for t, r in usable.items()}
    lines = _lines(
        {**{t: [s] for t, s in full.items()}, OVERALL: list(full.values())}, seqs, alpha=alpha, band=band
    )
    deltas = lines.deltas

    def called(ps: Mapping[str, float], sign: int) -> list[str]:
        return [
            k
            for k in seqs
            if ps[k] <= alpha + 1e-12 and not stats.is_noise(deltas[k], band) and deltas[k] * sign > 0
        ]

    regressed, improved = called(lines.lower, -1), called(lines.higher, 1)
    equivalent = {k: p <= alpha for k, p in lines.tost.items()}

    task_decisions = tuple(
        TaskDecision(
            t,
            _kind(t, regressed, improved, equivalent),
            deltas[t],
            len(full[t][0]),
            len(full[t][1]),
            runs.rounds,
            lines.lower[t],
            lines.higher[t],
            lines.intervals[t],
            not seqs[t].closed_lower and runs.rounds < design.cap,
        )
        for t, runs in usable.items()
    )

    def make(
        kind: VerdictKind,
        who: Sequence[str],
        p: float | None,
        reason: str,
        stop: dict[str, bool],
        needed: int | None = None,
    ) -> Decision:
        subject = who[0] if who else OVERALL
        return Decision(
            kind=kind,
            decided_by=tuple(who),
            p_value=p,
            threshold=alpha,
            estimate=deltas[subject],
            interval=lines.intervals[subject],
            alpha=alpha,
            band=band,
            exact=all(s.exact for s in seqs.values()),
            design=design,
            rounds=rounds,
            tasks=task_decisions,
            reason=reason,
            repeats_needed=needed,
            stop=stop,
            no_change_reachable=_projected_inside(usable, design.cap, alpha=alpha, band=band),
            subject=subject,
            overall_p=lines.p(OVERALL) if looks else None,
        )

    ctx = _Context(design, alpha, band)
    stop = {d.task: d.kind != "inconclusive" for d in task_decisions}
    if regressed or improved:
        kind: VerdictKind = "regressed" if regressed else "improved"
        ps = lines.lower if regressed else lines.higher
        who = sorted(regressed or improved, key=lambda k: (ps[k], k != OVERALL, k))
        reason = _change_reason(lines, kind, who, improved if regressed else [], ctx)
        return make(kind, who, ps[who[0]], reason, dict.fromkeys(stop, True) if regressed else stop)
    if not looks:
        reason = f"no look yet: the first decision is taken after round {design.looks[0]}"
        return make("inconclusive", (), None, reason, stop)
    if lines.intervals[OVERALL] is None:
        small = min(min(len(t), len(c)) for t, c in full.values())
        reason = (
            f"an arm has {small} graded run{'s' if small != 1 else ''}: at least {MIN_ARM_RUNS} per arm "
            "and task are needed to estimate the spread, so no test can reject and neither a change "
            "nor no change can be shown"
        )
        return make("inconclusive", (), None, reason, stop, MIN_ARM_RUNS)
    if all(equivalent.values()):
        worst = max((k for k in lines.tost if k != OVERALL), key=lambda k: lines.tost[k])
        least = lines.line(worst, lines.tost[worst], "TOST p")
        reason = (
            f"no change: {lines.line(OVERALL, lines.tost[OVERALL], 'TOST p')} <= alpha {alpha:g}, inside "
            f"±{band:.2f}, and every task's own interval lies inside "
            f"±{equivalence_band(worst, band):.2f} (least inside: {least})"
        )
        return make("no_change", (OVERALL,), lines.tost[OVERALL], reason, dict.fromkeys(stop, True))
    per_arm = sum(len(t) + len(c) for t, c in full.values()) / (2 * len(full))
    found = _wald(list(full.values()), alpha)
    needed = None if found is None else _needed(found[1], found[2], per_arm, alpha=alpha, band=band)
    reason = _inconclusive_reason(lines, needed, ctx)
    return make("inconclusive", (), lines.p(OVERALL), reason, stop, needed)


def from_strata(strata: Mapping[str, stats.Stratum]) -> dict[str, TaskRuns]:
    """Scores listed in repeat order (repeat = position + 1): for tests and simulations."""
    return {t: TaskRuns(tuple(enumerate(tr, 1)), tuple(enumerate(cr, 1))) for t, (tr, cr) in strata.items()}
