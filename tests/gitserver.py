"""A git remote that containers on the host network can fetch from and push to.

Real git serves it: each accepted connection on 127.0.0.1 is handed to `git daemon
--inetd` (fetch and push, `git://`), so the socket is listening, and the remote usable,
as soon as the object exists; no port to poll. Repositories live under `root` and are
addressed by their path below it, e.g. `git://127.0.0.1:PORT/Codertocat/Hello-World.git`.
"""

from __future__ import annotations

import socketserver
import subprocess
import threading
from pathlib import Path
from types import TracebackType


class GitServer:
    """`with GitServer(root) as server:` serves every bare repository under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        daemon = [
            "git", "daemon", "--inetd", "--export-all", "--enable=receive-pack",
            f"--base-path={root}", str(root),
        ]  # fmt: skip

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                fd = self.request.fileno()
                subprocess.run(daemon, stdin=fd, stdout=fd, stderr=subprocess.DEVNULL, check=False)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        host, port = self._server.server_address[:2]
        return f"git://{host!s}:{port}/{path}"

    def __enter__(self) -> GitServer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
