"""The progress lines a CI log shows: with `--repeats auto` the runner starts round after
round on one progress, and the count must never pass the total it is shown over."""

from __future__ import annotations

import io

from docdelta.experiment.progress import LineProgress
from docdelta.results.models import Cell


def test_rounds_add_to_the_total_so_the_count_never_passes_it() -> None:
    out = io.StringIO()
    progress = LineProgress(out=out)
    for repeats in ((1, 2, 3), (4, 5)):  # two rounds of one task's base arm
        progress.start(len(repeats))
        for repeat in repeats:
            progress.advance(Cell(task="t", condition="base", repeat=repeat), "ok")
    assert out.getvalue().splitlines() == [f"[{n}/{3 if n <= 3 else 5}] t/base/r{n}: ok" for n in range(1, 6)]
