"""A/A calibration: with identical docs in both arms, the gate must not cry regression.

1,000 simulated PRs (3 tasks x 5 repeats, a random difficulty per task) go through the
same `verdict` and `gate` the report and the check use. Identical arms must be called
`regressed` in at most alpha of them; a true +0.3 effect must be found far more often
than alpha, or the gate would be safe only because it never says anything.
"""

from __future__ import annotations

import pytest

from docdelta.scorecard import stats

ALPHA = stats.DEFAULT_ALPHA
PRS = 1000


@pytest.mark.parametrize("model", ["bernoulli", "beta"])
def test_false_regression_rate_of_a_a_prs_is_at_most_alpha(model: stats.ScoreModel) -> None:
    sim = stats.simulate_gate(3, 5, 0.0, prs=PRS, model=model, alpha=ALPHA, policy="regression", seed=11)
    assert sim.prs == PRS and sum(sim.verdicts.values()) == PRS
    assert sim.false_regression_rate <= ALPHA
    assert sim.failures / PRS <= ALPHA  # the check's failures are exactly the false regressions
    assert sim.rate("improved") <= ALPHA  # and noise is not sold as an improvement either


def test_power_for_a_true_effect_of_0_3_is_reported_and_well_above_alpha() -> None:
    sim = stats.simulate_gate(3, 5, 0.3, prs=PRS, alpha=ALPHA, seed=12)
    print(f"power for +0.3 on 3 tasks x 5 repeats: {sim.power:.2f}")
    assert sim.power >= 4 * ALPHA
    assert sim.false_regression_rate <= ALPHA / 10  # a real improvement is never called a regression


def test_simulation_is_seeded() -> None:
    a = stats.simulate_gate(3, 5, 0.0, prs=50, seed=3)
    assert a == stats.simulate_gate(3, 5, 0.0, prs=50, seed=3)
