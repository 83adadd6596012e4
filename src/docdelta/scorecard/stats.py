"""Pure statistics over per-run values: no I/O, no models, only numbers in and numbers out.

The report never computes a number itself; it asks this module, so the same
definition of "mean", "pass" and "noise" serves the markdown, the JSON, the badge
and the check gate. Per-task figures take an arm's scores; the overall tests take
`Stratum`s (one task's two arms), because tasks differ far more in difficulty than
arms do, so labels are only ever exchanged within a task. Empty input gives `None`,
never a made-up 0. Randomness (Monte Carlo permutations, bootstrap, simulation) is
always seeded: the same results give the same report.

The verdict is built so that noise is called noise: a change is `improved` or
`regressed` only when significant and outside the noise band, and `simulate_gate`
proves on simulated A/A experiments that the gate then fails at most alpha of PRs.
"""

from __future__ import annotations

import functools
import importlib
import math
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from docdelta.scorecard.models import GatePolicy, VerdictKind
from docdelta.vocabulary import DEFAULT_NOISE_BAND


class _Deferred:
    """A module imported on its first use. numpy takes a third of a second to import, and
    a run computes no statistic before its first cell: its start-up should not pay for it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        module = sys.modules.get(self._name) or importlib.import_module(self._name)
        return getattr(module, attr)


if TYPE_CHECKING:
    import numpy as np
else:
    np = _Deferred("numpy")

PASS_SCORE = 1.0
_EPS = 1e-9
"""Tolerance for float rounding: 0.55 - 0.50 is 0.05000000000000004, still inside a 0.05 band."""


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, kept inside [min, max] even when float rounding would step out."""
    if not values:
        return None
    return min(max(math.fsum(values) / len(values), min(values)), max(values))


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class Spread:
    """Min, quartiles and max: enough to tell 0.5 from "half 0, half 1"."""

    low: float
    q1: float
    q3: float
    high: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    if len(values) == 1:
        (v,) = values
        return Spread(v, v, v, v)
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return Spread(min(values), q1, q3, max(values))


def passes(scores: Sequence[float], threshold: float = PASS_SCORE) -> int:
    """Runs that scored at least `threshold` (by default a perfect 1.0)."""
    return sum(1 for s in scores if s >= threshold - _EPS)


def pass_rate(scores: Sequence[float], threshold: float = PASS_SCORE) -> float | None:
    return passes(scores, threshold) / len(scores) if scores else None


SATURATION_LEVELS = (PASS_SCORE, 0.0)
"""The extremes a task can be stuck at: every run passed, or every run scored nothing."""


def saturation(arms: Mapping[str, Sequence[float]]) -> float | None:
    """The extreme (SATURATION_LEVELS) every score of two or more arms sits at, else None.

    Such a task cannot move in at least one direction whatever the instruction files say (a
    score of 0 cannot drop, one of 1 cannot rise), and no arm differs from another, so it
    measures nothing: the task audit names it as a candidate to drop, and a suite made only
    of such tasks gets no verdict (an equivalence test on identical arms would call it a
    confident "no change")."""
    ran = [scores for scores in arms.values() if scores]
    if len(ran) < 2:
        return None
    for level in SATURATION_LEVELS:
        if all(abs(s - level) < _EPS for scores in ran for s in scores):
            return level
    return None


def is_noise(delta: float, band: float = DEFAULT_NOISE_BAND) -> bool:
    """A delta whose magnitude is within the band (inclusive) is noise, not an effect."""
    return abs(delta) <= band + _EPS


@dataclass(frozen=True)
class ArmSample:
    """The graded per-run scores of one arm (one condition) of one task."""

    condition: str
    scores: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float | None:
        return mean(self.scores)

    @property
    def passes(self) -> int:
        return passes(self.scores)


@dataclass(frozen=True)
class Comparison:
    """treatment vs control of one task. `delta` is None when either arm is empty."""

    treatment: str
    control: str
    delta: float | None
    band: float

    @property
    def noise(self) -> bool | None:
        return None if self.delta is None else is_noise(self.delta, self.band)


def compare(treatment: ArmSample, control: ArmSample, *, band: float = DEFAULT_NOISE_BAND) -> Comparison:
    """Difference of mean scores, treatment minus control (e.g. head - base)."""
    t, c = treatment.mean, control.mean
    delta = None if t is None or c is None else t - c
    return Comparison(treatment.condition, control.condition, delta, band)


def mean_delta(deltas: Sequence[float | None]) -> float | None:
    """Overall effect as the mean of per-task deltas, over tasks where both arms ran.

    Averaging within tasks first (rather than pooling runs) keeps a task with more
    repeats from dominating and is the same stratification a permutation test uses.
    """
    return mean([d for d in deltas if d is not None])


# ------------------------------------------------------------ per-arm figures
def pass_k(scores: Sequence[float], k: int | None = None, threshold: float = PASS_SCORE) -> float | None:
    """pass^k: the chance that k runs drawn without replacement from these all pass.

    C(passes, k) / C(n, k), the unbiased estimator; with k = n (the default) it is
    1.0 when every repeat passed and 0.0 otherwise — "reliably passes", which a
    pass rate of 0.8 does not say.
    """
    n = len(scores)
    k = n if k is None else k
    if not scores or not 1 <= k <= n:
        return None
    return math.comb(passes(scores, threshold), k) / math.comb(n, k)


def majority_passes(scores: Sequence[float], threshold: float = PASS_SCORE) -> bool | None:
    """More than half the runs passed; a tie is not a majority. None for an empty arm."""
    return 2 * passes(scores, threshold) > len(scores) if scores else None


def fisher_passes(
    treatment: Sequence[float], control: Sequence[float], threshold: float = PASS_SCORE
) -> float | None:
    """Two-sided Fisher exact p-value of pass counts, treatment vs control (one task)."""
    if not treatment or not control:
        return None
    pt, pc = passes(treatment, threshold), passes(control, threshold)
    return fisher_two_sided(pt, len(treatment) - pt, pc, len(control) - pc)


def fisher_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher exact p of the table [[a, b], [c, d]], as scipy.stats.fisher_exact
    gives it: the hypergeometric probability, given the margins, of every table no more
    likely than the observed one. In integers, so a tie with the observed table is exact
    (scipy needs a relative tolerance), and a scorecard need not import scipy for it."""
    row, col, total = a + b, a + c, a + b + c + d

    def weight(x: int) -> int:  # tables with top-left x, times C(total, col)
        return math.comb(row, x) * math.comb(total - row, col - x)

    observed = weight(a)
    tables = range(max(0, col - (total - row)), min(row, col) + 1)
    return sum(w for w in map(weight, tables) if w <= observed) / math.comb(total, col)


@dataclass(frozen=True)
class ShiftTest:
    """A usage metric (tokens, cost) compared by ranks: robust to one runaway run."""

    shift: float
    """Hodges-Lehmann estimate: the median of all treatment - control differences."""
    p_value: float
    """Two-sided Mann-Whitney U."""
    n_treatment: int
    n_control: int


def rank_shift(treatment: Sequence[float], control: Sequence[float]) -> ShiftTest | None:
    if not treatment or not control:
        return None
    t, c = np.asarray(treatment, dtype=float), np.asarray(control, dtype=float)
    p = mann_whitney_two_sided(treatment, control)
    return ShiftTest(float(np.median(np.subtract.outer(t, c))), p, len(t), len(c))


MWU_EXACT_MAX = 8
"""scipy's `method='auto'` takes the exact null distribution of U when either sample has at
most this many values and no value is tied, the normal approximation otherwise."""


def mann_whitney_two_sided(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value, as `scipy.stats.mannwhitneyu(x, y)` gives it
    (alternative='two-sided', method='auto', continuity correction), both samples non-empty.

    Hand-written because importing scipy.stats costs about 1.4 s of CPU, and every scorecard
    with usage figures (every `run`, a fully reused rerun included, and every `report`) would
    pay it for this one test; the test itself is a few lines. tests/unit/test_stats.py proves
    it equal to scipy's on random samples with and without ties, exact and approximate.
    """
    n1, n2 = len(x), len(y)
    pooled = Counter([*x, *y])
    # U1 doubled, so that a tied pair's half stays an integer.
    u1_twice = sum(2 * (a > b) + (a == b) for a in x for b in y)
    u_twice = max(u1_twice, 2 * n1 * n2 - u1_twice)  # the larger U: its upper tail, doubled
    if min(n1, n2) <= MWU_EXACT_MAX and len(pooled) == n1 + n2:
        counts = _u_null_counts(n1, n2)
        at_most = sum(counts[: n1 * n2 - u_twice // 2 + 1])  # P(U <= n1 n2 - u) = P(U >= u)
        return min(1.0, 2 * at_most / math.comb(n1 + n2, n1))
    n = n1 + n2
    ties = sum(k**3 - k for k in pooled.values())
    sd = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sd == 0:  # every value tied: U sits at its mean
        return 1.0
    return min(1.0, 2 * normal_upper_tail((u_twice / 2 - n1 * n2 / 2 - 0.5) / sd))


def _u_null_counts(n1: int, n2: int) -> list[int]:
    """How many of the C(n1 + n2, n1) equally likely rank orders give U = 0, 1, ..., n1 n2:
    the coefficients of the Gaussian binomial prod_{i <= m} (1 - q^(n + i)) / (1 - q^i),
    m = min(n1, n2), n = max(n1, n2), multiplied and divided out one factor at a time."""
    m, n = min(n1, n2), max(n1, n2)
    poly = [1] + [0] * (m * n + m)
    for i in range(1, m + 1):
        for k in range(len(poly) - 1, n + i - 1, -1):  # times (1 - q^(n + i))
            poly[k] -= poly[k - n - i]
        for k in range(i, len(poly)):  # divided by (1 - q^i)
            poly[k] += poly[k - i]
    return poly[: m * n + 1]


def normal_upper_tail(z: float) -> float:
    """P(Z > z) for a standard normal Z (scipy's `norm.sf`), from erfc as scipy computes it:
    `NormalDist().cdf(-z)` goes through 1 + erf and rounds a far tail to 0. Here, without
    scipy.stats.norm, whose import cost every scorecard seconds."""
    return 0.5 * math.erfc(z / math.sqrt(2))


# ---------------------------------------------------------------- significance
Stratum = tuple[Sequence[float], Sequence[float]]
"""One task's (treatment scores, control scores). Tasks are the strata: labels are
shuffled and runs resampled only within a task, never across tasks."""

DEFAULT_ALPHA = 0.05
DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
MAX_EXACT_SUPPORT = 200_000
"""Largest bound on the number of distinct stratified deltas for which the permutation
test enumerates every arrangement; above it, it samples `resamples` seeded shuffles."""
_DIGITS = 9
_TIE = 1e-7
"""Arrangements whose delta is this close to the observed one count as ties: the exact
enumeration rounds its sums, and distinct deltas of scores in [0, 1] over arms of at
most a few hundred runs lie much further apart than this."""
"""Sums are merged after rounding to this many decimals, so 0.1 + 0.2 and 0.3 are one value."""


def _usable(strata: Sequence[Stratum]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.asarray(t, dtype=float), np.asarray(c, dtype=float)) for t, c in strata if len(t) and len(c)]


def stratified_delta(strata: Sequence[Stratum]) -> float | None:
    """Mean over tasks of (treatment mean - control mean): the same figure as `mean_delta`."""
    return mean_delta([compare(ArmSample("t", tuple(t)), ArmSample("c", tuple(c))).delta for t, c in strata])


def _subset_sums(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact distribution of the sum of a uniformly random k-subset of `values`.

    Counts arrangements per distinct value (so 40 binary scores cost 2 steps, not
    C(40, 20) subsets). Callers bound the support first (`_support_bound`).
    """
    distinct, counts = np.unique(np.round(values, _DIGITS), return_counts=True)
    states: dict[tuple[int, float], int] = {(0, 0.0): 1}
    left = len(values)  # values not yet placed; a state that cannot reach k is dropped
    for v, c in zip(distinct.tolist(), counts.tolist(), strict=True):
        left -= c
        nxt: dict[tuple[int, float], int] = defaultdict(int)
        for (j, s), w in states.items():
            for i in range(max(0, k - j - left), min(c, k - j) + 1):
                nxt[(j + i, round(s + i * v, _DIGITS))] += w * math.comb(c, i)
        states = nxt
    total = math.comb(len(values), k)
    sums = [(s, w) for (j, s), w in states.items() if j == k]
    return np.array([s for s, _ in sums]), np.array([w / total for _, w in sums])


def _convolve(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    values = np.round(np.add.outer(a[0], b[0]).ravel(), _DIGITS)
    probs = np.multiply.outer(a[1], b[1]).ravel()
    support, inverse = np.unique(values, return_inverse=True)
    return support, np.bincount(inverse, weights=probs)


def _support_bound(values: np.ndarray, k: int) -> int:
    """At most this many distinct k-subset sums: subsets, or multisets of distinct values."""
    distinct = len(np.unique(np.round(values, _DIGITS)))
    return min(math.comb(len(values), k), math.comb(distinct + k - 1, k))


def _exact_null(
    arms: list[tuple[np.ndarray, np.ndarray]], bound: int = MAX_EXACT_SUPPORT
) -> tuple[np.ndarray, np.ndarray] | None:
    """Exact permutation distribution of the stratified delta, or None when its support may
    exceed `bound`."""
    pooled = [np.concatenate([t, c]) for t, c in arms]
    if math.prod(_support_bound(v, len(t)) for v, (t, _) in zip(pooled, arms, strict=True)) > bound:
        return None
    m = len(arms)
    dist = (np.zeros(1), np.ones(1))
    for values, (t, c) in zip(pooled, arms, strict=True):
        nt, nc = len(t), len(c)
        sums = _subset_sums(values, nt)
        # delta = S/nt - (total - S)/nc, divided by m so the strata average.
        deltas = (sums[0] * (1 / nt + 1 / nc) - values.sum() / nc) / m
        dist = _convolve(dist, (deltas, sums[1]))
    return dist


def _sampled_null(arms: list[tuple[np.ndarray, np.ndarray]], resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(resamples)
    for t, c in arms:
        pooled = np.concatenate([t, c])
        shuffled = rng.permuted(np.broadcast_to(pooled, (resamples, len(pooled))), axis=1)
        out += shuffled[:, : len(t)].mean(axis=1) - shuffled[:, len(t) :].mean(axis=1)
    return out / len(arms)


@dataclass(frozen=True)
class PermutationTest:
    statistic: float
    p_value: float
    exact: bool


def permutation_test(
    strata: Sequence[Stratum], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> PermutationTest | None:
    """Two-sided stratified permutation test of the stratified mean-score delta.

    Under "the docs make no difference" every split of a task's runs into the two
    arms (keeping the arm sizes) is equally likely; the p-value is the share of
    splits whose delta is at least as far from 0 as the observed one. Exact (every
    arrangement, by convolving per-task distributions) when the support is small;
    otherwise `resamples` seeded shuffles, counted with the +1 that keeps p > 0.
    Tasks missing an arm are left out; None when no task has both.
    """
    arms = _usable(strata)
    observed = stratified_delta(strata)
    if not arms or observed is None:
        return None
    extreme = abs(observed) - _TIE
    exact = _exact_null(arms)
    if exact is not None:
        support, probs = exact
        p = float(probs[np.abs(support) >= extreme].sum())
    else:
        null = _sampled_null(arms, resamples, seed)
        p = (1 + int(np.count_nonzero(np.abs(null) >= extreme))) / (resamples + 1)
    return PermutationTest(observed, min(max(p, 0.0), 1.0), exact is not None)


DIRECTIONAL_CACHE = 4096
"""Directional tests kept by `directional_test`'s memo: a simulated PR takes a few hundred."""


@dataclass(frozen=True)
class DirectionalTest:
    """One-sided mid-p values of the stratified delta: `lower` tests "treatment is worse"
    (a regression), `higher` tests "treatment is better"."""

    statistic: float
    lower: float
    higher: float
    exact: bool


def directional_test(
    strata: Sequence[Stratum],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    max_exact: int = MAX_EXACT_SUPPORT,
) -> DirectionalTest | None:
    """Both one-sided stratified permutation tests, as mid-p values, from one null distribution.

    mid-p = P(null delta beyond the observed) + half P(null delta ties it). Pass/fail scores
    make the null lumpy (for one task it is Fisher's hypergeometric law), and the plain
    exact p counts the whole observed atom, which is why its real size sits far below
    alpha (1.8% at 0.05 in the A/A calibration). Half the atom centres the p-value on the
    randomized exact test; its size is within a few tenths of a percent of alpha at the
    sizes docdelta runs (property-tested), and the decision rule's union bounds over looks
    and tasks (`docdelta.scorecard.decision`) sit on top of it. Same strata rules as `permutation_test`.

    Memoised on the scores as given (`_directional`): the round loop re-ranks every task each
    round and `decide` re-takes every earlier look, mostly on runs already tested.
    """
    key = tuple((tuple(map(float, t)), tuple(map(float, c))) for t, c in strata)
    return _directional(key, resamples, seed, max_exact)


@functools.lru_cache(maxsize=DIRECTIONAL_CACHE)
def _directional(
    strata: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...], resamples: int, seed: int, max_exact: int
) -> DirectionalTest | None:
    arms = _usable(strata)
    observed = stratified_delta(strata)
    if not arms or observed is None:
        return None
    exact = _exact_null(arms, max_exact)
    if exact is not None:
        support, probs = exact
        below = float(probs[support < observed - _TIE].sum())
        above = float(probs[support > observed + _TIE].sum())
        tie = max(0.0, 1.0 - below - above)
    else:
        null = _sampled_null(arms, resamples, seed)
        n = resamples + 1  # the observed arrangement is one of the arrangements
        below = int(np.count_nonzero(null < observed - _TIE)) / n
        above = int(np.count_nonzero(null > observed + _TIE)) / n
        tie = 1.0 - below - above
    lower, higher = below + tie / 2, above + tie / 2
    return DirectionalTest(observed, min(lower, 1.0), min(higher, 1.0), exact is not None)


def bootstrap_interval(
    strata: Sequence[Stratum],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Stratified percentile bootstrap interval of the stratified delta (seeded).

    Each arm of each task is resampled with replacement on its own. Hand-rolled
    because scipy.stats.bootstrap refuses a one-run arm, which a partly failed
    matrix does produce.
    """
    arms = _usable(strata)
    if not arms:
        return None
    rng = np.random.default_rng(seed)
    deltas = _resampled_deltas(rng, [(t, len(t), c, len(c)) for t, c in arms], resamples)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(deltas, [tail, 100 - tail])
    return float(low), float(high)


ResampledStratum = tuple["np.ndarray", int, "np.ndarray", int]
"""(treatment pool, treatment runs, control pool, control runs) of one task."""


def _resampled_deltas(
    rng: np.random.Generator, strata: Sequence[ResampledStratum], resamples: int
) -> np.ndarray:
    """Stratified deltas of `resamples` experiments whose arms are drawn with replacement.

    The one resampling engine behind the bootstrap (each arm drawn from its own runs)
    and the A/A band (both arms drawn from the task's pooled runs): one vectorized
    draw per arm, so thousands of simulated experiments cost milliseconds.
    """
    total = np.zeros(resamples)
    for t, nt, c, nc in strata:
        for pool, size, sign in ((t, nt, 1.0), (c, nc, -1.0)):
            total += sign * pool[rng.integers(0, len(pool), size=(resamples, size))].mean(axis=1)
    return total / len(strata)


AA_QUANTILE = 0.95
AA_SIMULATIONS = 2000


def aa_noise_band(
    pools: Sequence[Sequence[float]],
    repeats: int,
    *,
    quantile: float = AA_QUANTILE,
    simulations: int = AA_SIMULATIONS,
    seed: int = 0,
) -> float | None:
    """The |stratified delta| that identical docs stay within in `quantile` of A/A experiments.

    `pools` holds each task's observed scores, pooled over the two arms (under "the
    docs make no difference" they are one sample). Every simulated A/A experiment
    draws both arms of every task, `repeats` runs each, with replacement from that
    pool: a pass/fail task is then Bernoulli at its observed pass rate, a task with
    partial scores keeps its real spread, and a task whose runs all scored alike adds
    no noise at all. The band shrinks as repeats or tasks grow, which is the point: it
    says how large a difference this experiment's size can produce by chance alone.
    Informative only; the verdict keeps its own rule. None without a non-empty pool.
    """
    usable = [np.asarray(p, dtype=float) for p in pools if len(p)]
    if not usable or repeats < 1:
        return None
    rng = np.random.default_rng(seed)
    deltas = _resampled_deltas(rng, [(p, repeats, p, repeats) for p in usable], simulations)
    # "higher": the band is a delta an A/A experiment can produce; rounded like the exact
    # test's sums, so a 0.4 band is 0.4 and not 0.3999999999999999.
    return round(float(np.quantile(np.abs(deltas), quantile, method="higher")), _DIGITS)


# --------------------------------------------------------------------- verdict
@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    exact: bool
    alpha: float
    band: float
    tasks: int
    reason: str


def classify(
    estimate: float, p_value: float, ci: tuple[float, float], *, alpha: float, band: float
) -> tuple[VerdictKind, str]:
    """The verdict rule, apart from the numbers' computation so it can be tested on its own."""
    low, high = ci
    if p_value <= alpha + _EPS and not is_noise(estimate, band):
        kind: VerdictKind = "improved" if estimate > 0 else "regressed"
        return kind, f"p = {p_value:.3g} <= alpha {alpha:g} and {estimate:+.2f} is outside ±{band:.2f}"
    if is_noise(low, band) and is_noise(high, band):
        return (
            "no_change",
            f"the whole interval [{low:+.2f}, {high:+.2f}] lies inside the noise band ±{band:.2f}",
        )
    if p_value <= alpha + _EPS:
        return (
            "inconclusive",
            f"significant (p = {p_value:.3g}) but {estimate:+.2f} is within noise ±{band:.2f}",
        )
    return (
        "inconclusive",
        f"p = {p_value:.3g} > alpha {alpha:g}: the interval [{low:+.2f}, {high:+.2f}] spans "
        f"both noise (±{band:.2f}) and a real effect",
    )


def verdict(
    strata: Sequence[Stratum],
    *,
    alpha: float = DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Verdict | None:
    """Permutation p-value, bootstrap interval and the verdict they imply; None without data."""
    test = permutation_test(strata, resamples=resamples, seed=seed)
    ci = bootstrap_interval(strata, confidence=confidence, resamples=resamples, seed=seed)
    if test is None or ci is None:
        return None
    kind, reason = classify(test.statistic, test.p_value, ci, alpha=alpha, band=band)
    tasks = len(_usable(strata))
    return Verdict(
        kind, test.statistic, *ci, confidence, test.p_value, test.exact, alpha, band, tasks, reason
    )


class _HasVerdict(Protocol):
    @property
    def kind(self) -> VerdictKind: ...
    @property
    def reason(self) -> str: ...


@dataclass(frozen=True)
class GateDecision:
    conclusion: Literal["success", "failure", "neutral"]
    reason: str


def gate(result: _HasVerdict | None, policy: GatePolicy, *, refused: str | None = None) -> GateDecision:
    """What a required check concludes. It fails only on a confident result the policy
    rejects: `regression` fails a significant regression, `no-improvement` also fails a
    confident no-change; `never` fails nothing. An inconclusive (or missing, or `refused`)
    verdict is `neutral`, because noise must not fail a PR."""
    if refused is not None:
        return GateDecision("neutral", f"verdict refused: {refused}")
    if result is None:
        return GateDecision("neutral", "no verdict: head and base share no task with graded runs")
    rejected = {"regression": {"regressed"}, "no-improvement": {"regressed", "no_change"}, "never": set()}
    why = f"{result.kind.replace('_', ' ')}: {result.reason}"
    if result.kind == "inconclusive":
        return GateDecision("neutral", why)
    if result.kind in rejected[policy]:
        return GateDecision("failure", f"{why} (fail-on: {policy})")
    if result.kind == "improved" or policy != "never":
        return GateDecision("success", why)
    return GateDecision("neutral", f"{why} (fail-on: never)")


# ------------------------------------------------------------------ simulation
ScoreModel = Literal["bernoulli", "beta"]
_BETA_CONCENTRATION = 4.0
"""a + b of the beta score model: wide per-run spread, as a partially right answer has."""


@dataclass(frozen=True)
class GateSimulation:
    """How the verdict and gate behave on simulated PRs with a known true effect."""

    prs: int
    verdicts: dict[VerdictKind, int]
    failures: int
    """PRs whose gate conclusion was `failure` under the simulated policy."""

    def rate(self, kind: VerdictKind) -> float:
        return self.verdicts.get(kind, 0) / self.prs

    @property
    def false_regression_rate(self) -> float:
        """Meaningful when the true effect is 0 (an A/A experiment)."""
        return self.rate("regressed")

    @property
    def power(self) -> float:
        """Share of PRs called `improved`: meaningful when the true effect is positive."""
        return self.rate("improved")


def _simulated_scores(
    rng: np.random.Generator, *, prs: int, tasks: int, repeats: int, effect: float, model: ScoreModel
) -> np.ndarray:
    """Scores shaped (prs, tasks, arm, repeats); arm 0 is treatment (control mean + effect).

    Each task of each PR draws its own control mean, as real tasks differ in difficulty.
    """
    control = rng.uniform(0.2, 0.8, size=(prs, tasks))
    means = np.stack([np.clip(control + effect, 0.0, 1.0), control], axis=2)[..., None]
    means = np.broadcast_to(means, (prs, tasks, 2, repeats))
    if model == "bernoulli":
        return (rng.random(means.shape) < means).astype(float)
    mu = np.clip(means, 0.01, 0.99)
    return rng.beta(mu * _BETA_CONCENTRATION, (1 - mu) * _BETA_CONCENTRATION)


def simulate_gate(
    tasks: int = 3,
    repeats: int = 5,
    effect: float = 0.0,
    *,
    prs: int = 1000,
    model: ScoreModel = "bernoulli",
    alpha: float = DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
    policy: GatePolicy = "regression",
    resamples: int = 500,
    seed: int = 0,
) -> GateSimulation:
    """Run `verdict` and `gate` on `prs` simulated PRs (scores drawn in one vectorized batch).

    effect = 0 is the A/A calibration: the false-regression rate must stay <= alpha.
    A positive effect measures power with the very machinery the report uses.
    """
    data = _simulated_scores(
        np.random.default_rng(seed), prs=prs, tasks=tasks, repeats=repeats, effect=effect, model=model
    ).tolist()
    counts: Counter[VerdictKind] = Counter()
    failures = 0
    for i, pr in enumerate(data):
        v = verdict([(t, c) for t, c in pr], alpha=alpha, band=band, resamples=resamples, seed=seed + i)
        assert v is not None  # every simulated task has both arms
        counts[v.kind] += 1
        failures += gate(v, policy).conclusion == "failure"
    return GateSimulation(prs, dict(counts), failures)
