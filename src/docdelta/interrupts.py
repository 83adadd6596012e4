"""Steps that Ctrl-C or SIGTERM must not cut in half.

Python raises KeyboardInterrupt (and our `Terminated`) in the main thread between any two
bytecodes. Cut there, creating a temporary root and stamping it with its owner, starting a
worker thread and recording it, or removing a tree leaves something no later step knows to
clean up: an unstamped root no sweep may touch, a worker the thread pool never joins, a
half-removed tree. Inside `deferred_signals` a signal is only noted; it is delivered, to
the handler that was in place, as soon as the step is done. Worker threads never receive
signals in Python, so there the steps run as they are.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

DEFERRED = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for the duration of the block, then deliver them in order.
    Nested blocks hand their signals to the outer one, so the outermost delivers them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        pending.append(signum)

    # Only signals that would raise in Python are held: one left to the default action (a
    # second SIGTERM, see cli.py) still ends the process at once, as the user asked.
    previous = {s: signal.signal(s, hold) for s in DEFERRED if callable(signal.getsignal(s))}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for held in pending:
            signal.raise_signal(held)
