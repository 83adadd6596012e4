"""Splitting an instruction file into units, and the factorial design's properties."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import hadamard

from docdelta.errors import ConfigError
from docdelta.improve.ablation import Design, Unit, _negative, make_plan, single_runs, split, without
from docdelta.vocabulary import HEAD

TEXT = """\
# Notes

Read this first.

## Checks

- Run `make check`.
- Not `setup.py`.

```sh
# not a heading: inside a fence
make check
```

## Git

- Never force-push.
  Use a revert instead.
"""


def test_headings_split_at_the_repeated_level_with_the_title_as_preamble() -> None:
    sections = split(TEXT, Unit.heading)
    assert [(s.name, s.start, s.end) for s in sections] == [
        ("(preamble) Notes", 1, 4),
        ("Checks", 5, 14),
        ("Git", 15, 18),
    ]
    kept = without(TEXT, sections[1:2])
    assert kept == "# Notes\n\nRead this first.\n\n## Git\n\n- Never force-push.\n  Use a revert instead.\n"


def test_bullets_are_top_level_items_with_their_continuation_lines() -> None:
    sections = split(TEXT, Unit.bullets)
    assert [(s.name, s.start, s.end) for s in sections] == [
        ("Checks • Run `make check`.", 7, 7),
        ("Checks • Not `setup.py`.", 8, 8),
        ("Git • Never force-push. Use a revert instead.", 17, 18),
    ]
    assert "revert" not in without(TEXT, sections[2:])


@pytest.mark.parametrize("units", range(1, 12))
def test_the_factorial_is_balanced_orthogonal_and_resolution_iv(units: int) -> None:
    plan = make_plan(units, repeats=4, tasks=1, design=Design.factorial)
    size = len(plan.rows)
    assert plan.rows[0].condition == HEAD and plan.rows[0].removed == []
    x = np.array([[-1 if k in row.removed else 1 for k in range(units)] for row in plan.rows])
    assert (x.sum(axis=0) == 0).all()  # each unit removed in exactly half the conditions
    assert (x.T @ x == size * np.eye(units)).all()  # main effects orthogonal
    two_way = [x[:, a] * x[:, b] for a in range(units) for b in range(a + 1, units)]
    assert all((x.T @ col == 0).all() for col in two_way)  # no main effect aliased with a pair
    # The same precision as one at a time: N * repeats / 2 runs per side >= 4.
    assert size * plan.repeats // 2 >= 4
    assert plan.runs <= single_runs(units, 4, 1)
    assert size == len(hadamard(size))


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 32, 64])
def test_the_sign_rule_is_scipys_hadamard_matrix(size: int) -> None:
    """The factorial's -1 entries are computed (popcount of row & column), not read from
    scipy.linalg.hadamard, an import the ablation planner no longer pays: same matrix."""
    matrix = hadamard(size)
    assert [[_negative(r, c) for c in range(size)] for r in range(size)] == (matrix < 0).tolist()


def test_one_at_a_time_removes_one_unit_per_condition_and_no_units_is_an_error() -> None:
    plan = make_plan(3, repeats=2, tasks=5, design=Design.single)
    assert [r.removed for r in plan.rows] == [[], [0], [1], [2]]
    assert plan.runs == single_runs(3, 2, 5) == 40
    with pytest.raises(ConfigError, match="no section"):
        make_plan(0, repeats=2, tasks=1, design=Design.factorial)
