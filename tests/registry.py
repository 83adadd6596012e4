"""A container registry on 127.0.0.1 for the tests: the CNCF distribution registry
(Debian's `docker-registry`, `scripts/provision-docker.sh` installs it), storing in a
temporary directory, without authentication. The Docker engine pushes to and pulls from a
registry on a loopback address over plain HTTP without being configured to (127.0.0.0/8 is
an insecure registry by default), so `docker push 127.0.0.1:<port>/owner/name:tag` works
as a push to ghcr.io does on a runner.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

BINARY = "docker-registry"
CONFIG = """\
version: 0.1
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: {addr}
"""


_MARKER = "docdelta-marker-"
_ANSWERED = re.compile(r'msg="response completed.*?http\.request\.method=(\S+).*?http\.request\.uri=(\S+)')


class Registry:
    def __init__(self, host: str, log: list[str], logged: threading.Condition) -> None:
        self.host = host
        """`127.0.0.1:<port>`, the registry part of an image reference."""
        self._log, self._logged = log, logged

    def requests(self) -> list[str]:
        """`METHOD /uri` of every request the registry answered so far, from its log. A marker
        request is sent first and its log line waited for, so a request answered before this
        call is not missed because its line was still on the way."""
        marker = f"/v2/{_MARKER}{uuid.uuid4().hex}/tags/list"  # no such repository: a 404
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://{self.host}{marker}", timeout=30).close()
        with self._logged:
            assert self._logged.wait_for(lambda: any(marker in line for line in self._log), timeout=60), (
                marker
            )
            answered = [" ".join(m.groups()) for line in self._log if (m := _ANSWERED.search(line))]
        return [request.replace('"', "") for request in answered if _MARKER not in request]

    def get(self, path: str) -> dict[str, object]:
        """A JSON answer of the registry's HTTP API (`/v2/_catalog`, `/v2/<name>/tags/list`)."""
        with urllib.request.urlopen(f"http://{self.host}{path}", timeout=30) as answer:
            result: dict[str, object] = json.load(answer)
        return result

    def catalog(self) -> list[str]:
        return sorted(str(name) for name in self.get("/v2/_catalog")["repositories"])  # type: ignore[attr-defined]

    def tags(self, name: str) -> list[str]:
        return sorted(str(tag) for tag in self.get(f"/v2/{name}/tags/list")["tags"])  # type: ignore[attr-defined]


@contextmanager
def local_registry(root: Path) -> Iterator[Registry]:
    """A registry storing under `root`, listening on a free loopback port until the block ends."""
    if shutil.which(BINARY) is None:
        pytest.skip(f"{BINARY} is not installed (apt-get install docker-registry)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    config.write_text(CONFIG.format(root=root / "storage", addr=f"127.0.0.1:{port}"))
    proc = subprocess.Popen(
        [BINARY, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    listening, log, logged = threading.Event(), [], threading.Condition()

    def read() -> None:  # the whole log, so the registry never blocks on a full pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            with logged:
                log.append(line)
                logged.notify_all()
            if "listening on" in line:
                listening.set()
        listening.set()  # it exited: stop waiting

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        listening.wait(timeout=60)
        assert proc.poll() is None and any("listening on" in line for line in log), "".join(log)[-3000:]
        yield Registry(f"127.0.0.1:{port}", log, logged)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=30)
