"""The progress lines a CI log shows: with `--repeats auto` the runner starts round after
round on one progress, and the count must never pass the total it is shown over."""

from __future__ import annotations

import io
from concurrent.futures import Future

from docdelta.experiment.progress import LineProgress, Preceded
from docdelta.results.models import Cell


def test_rounds_add_to_the_total_so_the_count_never_passes_it() -> None:
    out = io.StringIO()
    progress = LineProgress(out=out)
    for repeats in ((1, 2, 3), (4, 5)):  # two rounds of one task's base arm
        progress.start(len(repeats))
        for repeat in repeats:
            progress.advance(Cell(task="t", condition="base", repeat=repeat), "ok")
    assert out.getvalue().splitlines() == [f"[{n}/{3 if n <= 3 else 5}] t/base/r{n}: ok" for n in range(1, 6)]


def test_a_line_worked_out_beside_the_cells_comes_before_the_first_progress_line_once() -> None:
    out = io.StringIO()
    line: Future[str | None] = Future()
    progress = Preceded(LineProgress(out=out), line, out)
    progress.start(2)
    assert out.getvalue() == ""  # nothing waits for the line before a cell has ended
    line.set_result("docdelta: power: 1 task, fixed 2 repeats")
    for repeat in (1, 2):
        progress.advance(Cell(task="t", condition="head", repeat=repeat), "ok")
    progress.finish()
    assert out.getvalue().splitlines() == [
        "docdelta: power: 1 task, fixed 2 repeats",
        "[1/2] t/head/r1: ok",
        "[2/2] t/head/r2: ok",
    ]


def test_a_run_without_cells_still_prints_the_line_and_none_prints_nothing() -> None:
    for text, expected in (("docdelta: power: 1 task", ["docdelta: power: 1 task"]), (None, [])):
        out = io.StringIO()
        line: Future[str | None] = Future()
        line.set_result(text)
        progress = Preceded(LineProgress(out=out), line, out)
        progress.start(0)
        progress.finish()
        assert out.getvalue().splitlines() == expected
