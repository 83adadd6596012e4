"""One build at a time of an image the tests share, across pytest-xdist workers.

`make test` runs the suite on several worker processes. Each image a test needs is tagged
by a hash of its content and built only when that tag is missing, but two workers that
both find it missing would both build it, each paying minutes of CPU on a 2-core machine.
Holding `build_lock(tag)` around check-and-build makes the second worker wait for the
first (a kernel lock: it blocks until released, no polling) and then find the image built.
"""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCKS = Path(tempfile.gettempdir()) / "docdelta-test-builds"


@contextmanager
def build_lock(key: str) -> Iterator[None]:
    """Exclusive across processes on this machine for `key` (an image tag or name)."""
    LOCKS.mkdir(exist_ok=True)
    path = LOCKS / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
