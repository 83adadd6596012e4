"""The action image, built from the Dockerfile as a runner builds it (tests of the image).

On the local base image (no registry needed), trusting this machine's extra CAs so a
TLS-intercepting proxy does not break pip inside the build."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE_IMAGE = os.environ.get("DOCDELTA_BASE_IMAGE", "docdelta-base:latest")
IMAGE = f"docdelta-action:test-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]}"
"""One tag per checkout: two checkouts testing on one engine never run each other's image."""
CA_DIR = Path("/usr/local/share/ca-certificates")
SOCKET = "/var/run/docker.sock"


def build_action_image() -> str:
    """`docker build` of the repository's Dockerfile; returns the tag."""
    extra = "".join(p.read_text() for p in sorted(CA_DIR.glob("*.crt"))) if CA_DIR.is_dir() else ""
    proc = subprocess.run(
        ["docker", "build", "-q", "-t", IMAGE, "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
         "--build-arg", f"EXTRA_CA_CERT={extra}", str(ROOT)],
        capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return IMAGE
