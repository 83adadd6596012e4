"""A container registry on 127.0.0.1 for the tests: the CNCF distribution registry
(Debian's `docker-registry`, `scripts/provision-docker.sh` installs it), storing in a
temporary directory, without authentication. The Docker engine pushes to and pulls from a
registry on a loopback address over plain HTTP without being configured to (127.0.0.0/8 is
an insecure registry by default), so `docker push 127.0.0.1:<port>/owner/name:tag` works
as a push to ghcr.io does on a runner.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import urllib.request
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


class Registry:
    def __init__(self, host: str) -> None:
        self.host = host
        """`127.0.0.1:<port>`, the registry part of an image reference."""

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
    listening, log = threading.Event(), []

    def read() -> None:  # the whole log, so the registry never blocks on a full pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if "listening on" in line:
                listening.set()
        listening.set()  # it exited: stop waiting

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        listening.wait(timeout=60)
        assert proc.poll() is None and any("listening on" in line for line in log), "".join(log)[-3000:]
        yield Registry(f"127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=30)
