"""The images a run needs, kept as one `docker save` tarball in a directory between CI jobs
(`docker.image_cache`).

Why: the Action runs in a container on a fresh runner, whose Docker engine starts empty
every job, so the environment image (its base pulled, its setup run) and the agent layer
(pulled, or built with npm) would be made again each time. A workflow persists a directory
with `actions/cache`; docdelta `docker load`s the tarball before it looks anywhere else
and, when what it used differs from what the tarball holds, `docker save`s it again.

- **One tarball per configuration, every image in it.** The images are a chain (the base,
  the environment image on it, the agent image on that): saved together, each layer is
  stored once; saved apart, the base's gigabyte would be in each. The agent layer is not
  in it: copied into the agent image, it would be stored twice, and the agent image is
  found again without it (`agents.images.MADE_FOR_LABEL`).
  The file is named by a hash of what chooses the images (base, setup, CA bundle, agent),
  so agents or configurations that share one directory do not overwrite each other.
- **Self-correcting, not versioned.** The tarball's own manifest says which tags (and image
  IDs) it holds. A load is skipped when the engine has them all already; a save is skipped
  when the tarball holds exactly the images used. A tarball of an older recipe is loaded,
  not used (the content-hash tags differ), and replaced at the end of the run.
- **Never a reason to fail.** A tarball that cannot be read or loaded (a job cancelled
  during the save, a corrupted cache) is removed with a warning, and the images are pulled
  or built as without a cache. A save is written beside the tarball and renamed over it,
  so a cut-short save leaves the previous tarball (or none), never half of one.
"""

from __future__ import annotations

import json
import logging
import os
import tarfile
from pathlib import Path

import docker.errors
from docker import DockerClient

from docdelta.vocabulary import sha256_hex

log = logging.getLogger("docdelta.sandbox.image_cache")

_CHUNK = 1 << 20
_UNREADABLE = (OSError, tarfile.TarError, EOFError, ValueError, KeyError, TypeError)
"""What reading a tarball's manifest raises when the file is cut short or not a tarball."""


class ImageCache:
    """The tarball for one configuration (`identity`, any JSON value) under `directory`.
    `restore` before the images are looked up, `keep` each image used, `store` after."""

    def __init__(self, client: DockerClient, directory: Path, identity: object) -> None:
        self.client = client
        self.path = directory / f"images-{sha256_hex(json.dumps(identity, sort_keys=True).encode())[:16]}.tar"
        self._kept: dict[str, str] = {}

    def restore(self) -> bool:
        """Load the tarball unless the engine has everything in it already; True when it loaded."""
        if not self.path.is_file():
            return False
        try:
            held = _manifest(self.path)
        except _UNREADABLE as exc:
            return self._drop(f"cannot read it ({exc})")
        if held and all(self._image_id(tag) == image_id for tag, image_id in held.items()):
            return False
        try:
            with self.path.open("rb") as tarball:
                self.client.images.load(tarball)
        except (OSError, docker.errors.DockerException) as exc:
            return self._drop(f"docker load failed ({exc})")
        log.info("image cache: loaded %s", self.path)
        return True

    def keep(self, *refs: str) -> None:
        """Images the run used, to be saved by `store` (by tag, as the engine has them now)."""
        for ref in refs:
            image_id = self._image_id(ref)
            if image_id is not None:
                self._kept[ref] = image_id

    def store(self) -> None:
        """Save the kept images unless the tarball holds exactly them already."""
        if not self._kept:
            return
        try:
            if self.path.is_file() and _manifest(self.path) == self._kept:
                return
        except _UNREADABLE:
            pass  # unreadable: replaced below
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.part")  # one per writer
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # The SDK's `get_image` saves one image; the Engine's save takes several and
            # writes each shared layer once. The API client is a `requests.Session`, so that
            # save is one documented Engine call through its public `get` (an HTTP error is
            # a `requests` error, an OSError).
            api = self.client.api
            response = api.get(
                f"{api.base_url}/v{api.api_version}/images/get",
                params={"names": list(self._kept)},
                stream=True,
            )
            response.raise_for_status()
            with partial.open("wb") as out:
                for chunk in response.iter_content(chunk_size=_CHUNK):
                    out.write(chunk)
            os.replace(partial, self.path)
        except (*_UNREADABLE, docker.errors.DockerException) as exc:
            partial.unlink(missing_ok=True)
            log.warning(
                "image cache: cannot save %s (%s); the next job makes its images again", self.path, exc
            )
            return
        log.info("image cache: saved %s (%s)", self.path, ", ".join(self._kept))

    def _image_id(self, ref: str) -> str | None:
        try:
            return str(self.client.images.get(ref).id)
        except docker.errors.ImageNotFound:
            return None

    def _drop(self, why: str) -> bool:
        log.warning("image cache: %s: %s; removed it, the images are pulled or built instead", self.path, why)
        self.path.unlink(missing_ok=True)
        return False


def _manifest(path: Path) -> dict[str, str]:
    """Tag -> image ID of every image a `docker save` tarball holds (its manifest.json)."""
    with tarfile.open(path) as archive:
        member = archive.extractfile("manifest.json")
        if member is None:
            raise ValueError("manifest.json is not a file")
        entries = json.load(member)
    return {
        str(tag): "sha256:" + Path(str(entry["Config"])).name.removesuffix(".json")
        for entry in entries
        for tag in entry.get("RepoTags") or []
    }
