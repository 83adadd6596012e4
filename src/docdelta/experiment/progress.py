"""Progress of a matrix, as the runner reports it cell by cell.

A `Progress` is injected into `docdelta.experiment.runner.Runner`, so the cell loop does not know
where its progress goes: plain lines for CI logs (`LineProgress`), a bar redrawn in place
for terminals (`BarProgress`); `progress_for` picks one for a stream.
"""

from __future__ import annotations

import sys
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from docdelta.results.models import Cell


class Progress(Protocol):
    def start(self, total: int) -> None:
        """`total` more cells are about to run (once per round with `--repeats auto`)."""

    def advance(self, cell: Cell, status: str) -> None: ...
    def finish(self) -> None: ...


@dataclass
class LineProgress:
    """Plain lines, for CI logs."""

    out: TextIO = field(default_factory=lambda: sys.stderr)
    total: int = 0
    done: int = 0

    def start(self, total: int) -> None:
        self.total += total  # rounds add up: the count never passes the total it is shown over

    def advance(self, cell: Cell, status: str) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {cell.key}: {status}", file=self.out, flush=True)

    def finish(self) -> None:
        return None


@dataclass
class BarProgress(LineProgress):
    """A one-line progress bar redrawn in place, for terminals."""

    width: int = 30

    def advance(self, cell: Cell, status: str) -> None:
        self.done += 1
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        self.out.write(f"\r[{bar}] {self.done}/{self.total} {cell.key[:40]:<40} {status:<10}")
        self.out.flush()

    def finish(self) -> None:
        self.out.write("\n")
        self.out.flush()


@dataclass
class Preceded:
    """`progress` whose first output is preceded by the line `first` comes to (None: no
    line), waited for only then: a line worked out while the first cells run (the power
    line's simulation) still reaches the stream before any progress, and holds no cell back."""

    progress: Progress
    first: Future[str | None]
    out: TextIO
    pending: bool = True

    def start(self, total: int) -> None:
        self.progress.start(total)

    def advance(self, cell: Cell, status: str) -> None:
        self._first()
        self.progress.advance(cell, status)

    def finish(self) -> None:
        self._first()
        self.progress.finish()

    def _first(self) -> None:
        if self.pending:
            self.pending = False
            line = self.first.result()
            if line is not None:
                print(line, file=self.out, flush=True)


def progress_for(stream: TextIO, ci: bool) -> Progress:
    return BarProgress(out=stream) if stream.isatty() and not ci else LineProgress(out=stream)
