"""Property tests of the gate's statistics beyond one fixed design: the size of a
task's regression call with unequal and pooled arms (exact), the equivalence call's floor on
runs, monotone p-values, and the round loop's focus on a suspect task."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from docdelta.results.models import Cell
from docdelta.scorecard import decision
from docdelta.scorecard.decision import POOLED, Design, TaskRuns, decide, from_strata
from docdelta.scorecard.sequential import RoundsOutcome, run_rounds

EXACT = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _binary(passes: int, n: int) -> list[float]:
    return [1.0] * passes + [0.0] * (n - passes)


def _pooled(head: list[float], base: list[float]) -> dict[str, TaskRuns]:
    """Head runs 1..n; the control is earlier pooled runs only (the head-only design)."""
    return {"a": TaskRuns(tuple(enumerate(head, 1)), tuple((POOLED, s) for s in base))}


@EXACT
@given(
    head=st.integers(2, 8),
    base=st.integers(2, 30),
    p=st.floats(0.02, 0.98),
    alpha=st.sampled_from([0.05, 0.1]),
)
def test_a_regression_call_with_pooled_control_has_size_at_most_alpha_exactly(
    head: int, base: int, p: float, alpha: float
) -> None:
    """Every outcome of one pass/fail task, `head` runs against `base` pooled control runs,
    weighed by its probability when both arms share the rate p: the chance of "regressed" is
    the test's real size, and it must not exceed alpha (mid-p is not exact by construction;
    this checks it where docdelta uses it, including the lopsided pooled arms)."""
    rate = 0.0
    for xh in range(head + 1):
        for xb in range(base + 1):
            d = decide(_pooled(_binary(xh, head), _binary(xb, base)), Design.fixed(head), alpha=alpha)
            assert d is not None
            if d.kind == "regressed":
                rate += float(binom.pmf(xh, head, p) * binom.pmf(xb, base, p))
    assert rate <= alpha


scores = st.lists(st.floats(0, 1), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(
    short=st.floats(0, 1),
    other=scores,
    more=st.dictionaries(st.sampled_from(["b", "c"]), st.tuples(scores, scores), max_size=2),
    band=st.floats(0.05, 1.0),
    short_head=st.booleans(),
)
def test_no_change_is_never_declared_when_an_arm_has_one_run(
    short: float,
    other: list[float],
    more: dict[str, tuple[list[float], list[float]]],
    band: float,
    short_head: bool,
) -> None:
    """One run in an arm has no spread: whatever the scores and however wide the band, the
    equivalence call (task or overall) must not be made."""
    a = ([short], other) if short_head else (other, [short])
    d = decide(from_strata({"a": a, **more}), Design.fixed(6), band=band)
    assert d is not None and d.kind != "no_change"
    assert all(t.kind != "no_change" for t in d.tasks if t.task == "a")


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 10), m=st.integers(2, 10), data=st.data())
def test_the_regression_p_never_falls_when_head_passes_more_or_base_passes_less(
    n: int, m: int, data: st.DataObject
) -> None:
    xh = data.draw(st.integers(0, n - 1))
    xb = data.draw(st.integers(1, m))

    def p(head: int, base: int) -> float:
        d = decide(from_strata({"a": (_binary(head, n), _binary(base, m))}), Design.fixed(max(n, m)))
        assert d is not None
        return d.tasks[0].p_regressed

    assert p(xh + 1, xb) >= p(xh, xb) - 1e-12
    assert p(xh, xb - 1) >= p(xh, xb) - 1e-12


def _loop(score: Callable[[Cell], float]) -> tuple[RoundsOutcome, list[set[str]]]:
    """Tasks a and b, head vs base, through the auto design of cap 12 (looks 2 for allocation
    only, 5, 8, 12) with scores `score(cell)`: the outcome and each round's tasks."""
    runs: dict[tuple[str, str], list[tuple[int, float]]] = {}
    batches: list[set[str]] = []

    def execute(cells: list[Cell]) -> str | None:
        batches.append({c.task for c in cells})
        for c in cells:
            runs.setdefault((c.task, c.condition), []).append((c.repeat, score(c)))
        return None

    def observe() -> dict[str, decision.TaskRuns]:
        return {
            t: decision.TaskRuns(tuple(runs.get((t, "head"), ())), tuple(runs.get((t, "base"), ())))
            for t in ("a", "b")
        }

    design = Design.auto(12)
    assert design.looks == (2, 5, 8, 12) and design.weights[0] == 0
    return run_rounds(["a", "b"], ["head", "base"], design, execute, observe), batches


def _coin(c: Cell) -> float:
    """The same alternating score in both arms: a task the edit does not touch."""
    return float(c.repeat % 2)


def test_the_round_loop_gives_a_suspect_task_the_rounds_while_the_others_wait() -> None:
    """Task a: head always fails, base always passes; task b: an identical coin. After the
    first look (round 2 of cap 12, allocation only) a is the most suspect and runs alone, one
    round at a time, to its next look, where it regresses: b's runs stop at 2."""
    out, batches = _loop(lambda c: (0.0 if c.condition == "head" else 1.0) if c.task == "a" else _coin(c))
    assert out.decision is not None and out.decision.kind == "regressed"
    assert out.decision.decided_by[0] == "a"
    assert out.rounds == {"a": 5, "b": 2} and out.runs == 2 * (5 + 2)
    assert batches[2:] == [{"a"}] * 3


def test_the_round_loop_stops_once_nothing_can_regress_and_no_change_is_out_of_reach() -> None:
    """Task a: an identical coin; task b: head always passes, base always fails. At round 5
    futility closes a's regression (its p is far above FUTILITY_P) and b improves. Nothing can
    regress any more, and b's +1 keeps the interval at the cap outside the band: the PR ends
    there instead of running a on to the cap for a no change that cannot come."""
    out, _ = _loop(lambda c: (1.0 if c.condition == "head" else 0.0) if c.task == "b" else _coin(c))
    assert out.decision is not None and out.decision.kind == "improved"
    assert out.decision.decided_by == ("b",)
    a = next(t for t in out.decision.tasks if t.task == "a")
    assert not a.can_regress and not out.decision.no_change_reachable
    assert out.rounds == {"a": 5, "b": 5}


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=st.floats(0.05, 0.95), alpha=st.sampled_from([0.05, 0.1]))
def test_the_auto_designs_regression_call_has_size_at_most_alpha_under_any_stopping(
    p: float, alpha: float
) -> None:
    """One pass/fail task, both arms at rate p, the auto design of cap 8 (looks 2 for allocation
    only, 3, 5, 8; binding futility): every path of pass counts at the looks, weighed by its
    probability. A path counts as a false regression if `decide` calls "regressed" at ANY of its
    looks, so the sum bounds the size under every stopping and allocation rule the round loop
    could use (each stops a path at some look, or earlier): it must not exceed alpha."""
    design = Design.auto(8)
    assert design.looks == (2, 3, 5, 8) and design.weights[0] == 0
    steps = [b - a for a, b in zip((0, *design.looks), design.looks, strict=False)]

    def runs(counts: tuple[int, ...]) -> tuple[tuple[int, float], ...]:
        out: list[float] = []
        for passes, m in zip(counts, steps, strict=False):
            out += [1.0] * passes + [0.0] * (m - passes)
        return tuple(enumerate(out, 1))

    def regressed(head: tuple[int, ...], base: tuple[int, ...]) -> bool:
        d = decide({"a": TaskRuns(runs(head), runs(base))}, design, alpha=alpha)
        return d is not None and d.kind == "regressed"

    def walk(k: int, head: tuple[int, ...], base: tuple[int, ...], weight: float) -> float:
        if k and regressed(head, base):
            return weight  # rejected at look k: whatever follows, this path is a false alarm
        if k == len(steps):
            return 0.0
        m = steps[k]
        return sum(
            walk(k + 1, (*head, x), (*base, y), weight * float(binom.pmf(x, m, p) * binom.pmf(y, m, p)))
            for x in range(m + 1)
            for y in range(m + 1)
        )

    assert walk(0, (), (), 1.0) <= alpha
