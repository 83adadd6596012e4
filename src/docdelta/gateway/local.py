"""The gateway as a process on the host's loopback, for docdelta's own model calls.

`docdelta suggest` asks a model for a draft outside any sandbox, yet the rule stays the one
the agents live under: the request code path holds a per-call run token, never the key.
The same gateway program the runs use (`python -m docdelta.gateway.server`) is started as
a child process; the keys reach it once over its stdin, exactly as in its container, and
it pins the model, checks the request against its allowlist, enforces a budget and logs
the call's usage. Closing its stdin stops it; its stdout is the call log.

Both of its output pipes are drained by threads from the start, so a chatty gateway can
never block on a full pipe, and the host waits for its ready line on an event, not a sleep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from contextlib import suppress
from types import TracebackType
from typing import IO

from docdelta.errors import InfraError
from docdelta.gateway.config import GatewayConfig, ModelCall, new_run_token
from docdelta.gateway.server import READY, setup_message
from docdelta.keys import Keys

LOOPBACK = "127.0.0.1"
_READY_TIMEOUT_S = 30.0
_EXIT_TIMEOUT_S = 45.0
_PASSED_ENV = frozenset({"PATH", "PYTHONPATH", "SSL_CERT_FILE", "SSL_CERT_DIR"})
"""All the gateway process inherits: where Python and the CA roots are, never a key variable."""


class LocalGateway:
    """`with LocalGateway(config, keys) as gw:` then call `gw.url/<upstream>/...` with
    `gw.token` as the key; `gw.calls()` after the block is the gateway's call log."""

    def __init__(self, config: GatewayConfig, keys: Keys) -> None:
        self._config = config.model_copy(update={"port": 0})
        self._keys = keys
        self.token = new_run_token()
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: list[str] = []
        self._stdout: list[str] = []
        self._ready = threading.Event()
        self._calls: list[ModelCall] = []
        self._readers: list[threading.Thread] = []

    def __enter__(self) -> LocalGateway:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "docdelta.gateway.server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if k in _PASSED_ENV},  # no key in its env
        )
        assert self._proc.stdin and self._proc.stdout and self._proc.stderr
        self._readers = [
            threading.Thread(target=self._drain, args=(self._proc.stderr, self._stderr, True), daemon=True),
            threading.Thread(target=self._drain, args=(self._proc.stdout, self._stdout, False), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        setup = setup_message(
            self._config.model_dump(mode="json"), self._keys.reveal(), self.token, None, LOOPBACK
        )
        self._keys = Keys()  # held no longer than it takes to hand them over
        try:
            self._proc.stdin.write(json.dumps(setup).encode() + b"\n")
            self._proc.stdin.flush()
        except OSError:  # it died at once: the ready wait below reports its stderr
            self._proc.stdin.close()
        del setup
        if not self._ready.wait(_READY_TIMEOUT_S) or not self.url:
            self._stop()
            tail = "".join(self._stderr)[-2000:]
            raise InfraError(f"the model gateway did not start on {LOOPBACK}:\n{tail}")
        return self

    def _drain(self, pipe: IO[bytes], into: list[str], watch_ready: bool) -> None:
        for raw in pipe:
            line = raw.decode(errors="replace")
            into.append(line)
            if watch_ready and line.startswith(READY):
                self.url = "http://" + line.strip().rpartition(" on ")[2]
                self._ready.set()
        self._ready.set()  # it exited: whoever waits stops waiting

    def _stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        if proc.stdin:
            with suppress(OSError):
                proc.stdin.close()  # the watchdog: it drains, logs the rest and exits
        try:
            proc.wait(_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for reader in self._readers:
            reader.join()
        self._calls = [ModelCall.model_validate_json(line) for line in self._stdout if line.strip()]

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    def calls(self) -> list[ModelCall]:
        """Every call it took, once it has stopped (after the `with` block)."""
        return list(self._calls)

    def log(self) -> str:
        """All it printed, stderr (ready line, errors) then stdout (the call log)."""
        return "".join([*self._stderr, *self._stdout])
