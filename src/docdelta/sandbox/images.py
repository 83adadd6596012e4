"""Images built once and reused: the per-repository environment image and any image
derived from a base plus a few files (the gateway's).

An image is tagged by a content hash of everything that goes into it (the base image's
ID, the Dockerfile steps, the bytes of every file copied in), so a second run finds it
and builds nothing, and a changed setup command or CA bundle yields a new tag. The tag
and the image ID are what the runner records in manifest.json.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Mapping, Sequence

import docker.errors
from docker import DockerClient
from pydantic import BaseModel, ConfigDict, Field

from docdelta.errors import ConfigError, SandboxError
from docdelta.sandbox.base import DockerImageConfig
from docdelta.sandbox.image_cache import ImageCache
from docdelta.vocabulary import sha256_hex

EXTRA_CA_PATH = "/usr/local/share/docdelta/extra-ca.pem"
_LABEL = "org.docdelta.image"
_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


class BuiltImage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tag: str
    digest: str = Field(description="the image ID (sha256:...), recorded as manifest.image_digest")


def ensure_image(
    client: DockerClient,
    *,
    name: str,
    base: str,
    steps: Sequence[str],
    files: Mapping[str, bytes] | None = None,
    network: str = "none",
) -> BuiltImage:
    """The image `FROM base` + `steps` with `files` in the build context, built only if no
    image with the same content hash exists. `network` is the build's network mode."""
    files = dict(files or {})
    tag = _content_tag(name, _base_id(client, base), steps, files)
    try:
        return BuiltImage(tag=tag, digest=client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        pass
    dockerfile = "\n".join([f"FROM {base}", *steps, f"LABEL {_LABEL}={name}"]) + "\n"
    context = _context_tar({**files, "Dockerfile": dockerfile.encode()})
    try:
        image, _logs = client.images.build(
            fileobj=io.BytesIO(context), custom_context=True, tag=tag, forcerm=True, network_mode=network
        )
    except docker.errors.BuildError as exc:
        tail = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)[-2000:]
        raise SandboxError(
            f"building image {tag} failed: {exc.msg}\n{tail}",
            hint="fix the failing docker.setup command in the project config (the build log is above)",
        ) from exc
    return BuiltImage(tag=tag, digest=str(image.id))


def find_image(
    client: DockerClient,
    *,
    name: str,
    base: str,
    steps: Sequence[str],
    files: Mapping[str, bytes] | None = None,
) -> BuiltImage | None:
    """The image `ensure_image` would return, when the engine has both it and `base`; None
    otherwise. Nothing is pulled or built: a caller with another way to get the image (a
    registry, a cache) asks this first."""
    try:
        base_id = str(client.images.get(base).id)
        tag = _content_tag(name, base_id, steps, dict(files or {}))
        return BuiltImage(tag=tag, digest=client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return None


def _content_tag(name: str, base_id: str, steps: Sequence[str], files: Mapping[str, bytes]) -> str:
    identity = json.dumps(
        {"base": base_id, "steps": list(steps), "files": {k: sha256_hex(v) for k, v in files.items()}},
        sort_keys=True,
    )
    return f"{name}:{sha256_hex(identity.encode())[:16]}"


def _base_id(client: DockerClient, base: str) -> str:
    """The base image's ID, pulled first when the engine lacks it (a runner pulls
    `python:3.11-slim`; where no registry answers, the error says what to do)."""
    try:
        return str(client.images.get(base).id)
    except docker.errors.ImageNotFound:
        pass
    try:
        return str(client.images.pull(base).id)
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"base image {base!r} is not present on the Docker engine and could not be pulled: {exc}",
            hint="set docker.base in .docdelta.yml to an image you can pull, or build one locally "
            "(scripts/provision-docker.sh builds docdelta-base:latest)",
        ) from exc


def environment_image(
    client: DockerClient, config: DockerImageConfig, cache: ImageCache | None = None
) -> BuiltImage:
    """The per-repository image: base + extra CA bundle + setup commands (with network).
    `cache` keeps it and its base for the next job (`image_cache`)."""
    files: dict[str, bytes] = {}
    steps = ["USER root"]
    if config.extra_ca is not None:
        try:
            files["extra-ca.pem"] = config.extra_ca.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"docker.extra_ca: cannot read {config.extra_ca}: {exc.strerror}",
                hint="point docker.extra_ca at a PEM bundle, e.g. /etc/ssl/certs/ca-certificates.crt",
            ) from exc
        steps += [
            f"COPY extra-ca.pem {EXTRA_CA_PATH}",
            # Appended to the system bundle, so tools that use it need no extra setting.
            f"RUN mkdir -p /etc/ssl/certs && cat {EXTRA_CA_PATH} >> {_BUNDLE}",
            f"ENV NODE_EXTRA_CA_CERTS={EXTRA_CA_PATH} PIP_CERT={_BUNDLE} REQUESTS_CA_BUNDLE={_BUNDLE} "
            f"SSL_CERT_FILE={_BUNDLE}",
        ]
    steps += [f"RUN {json.dumps(['/bin/sh', '-c', command])}" for command in config.setup]
    built = ensure_image(
        client, name="docdelta-env", base=config.base, steps=steps, files=files, network="bridge"
    )
    if cache is not None:
        cache.keep(config.base, built.tag)
    return built


def _context_tar(files: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as archive:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()
