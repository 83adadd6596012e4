"""The images a run needs, kept as one `docker save` tarball in a directory between CI jobs
(`docker.image_cache`).

Why: the Action runs in a container on a fresh runner, whose Docker engine starts empty
every job, so the environment image (its base pulled, its setup run) and the agent layer
(pulled, or built with npm) would be made again each time. A workflow persists a directory
with `actions/cache`; docdelta `docker load`s the tarball before it looks anywhere else
and, when what it used differs from what the tarball holds, `docker save`s it again.

- **One tarball per configuration, every image in it.** The images are a chain (the base,
  the environment image on it, the agent image on that): merged into one tarball, each layer is
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

import hashlib
import io
import json
import logging
import os
import posixpath
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

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
            with partial.open("wb") as out:
                merged = _Merged(out, self.path.parent)
                for tag in self._kept:
                    merged.add(self.client.api.get_image(tag, chunk_size=_CHUNK))
                merged.finish()
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


class _Merged:
    """Images saved one by one (`add`) into one `docker save` tarball (`finish`), each layer once.

    Why image by image: the SDK's public surface saves one image per call
    (`APIClient.get_image`); the Engine's save of several is reachable only through the
    client's private request helpers. Saved apart, a chain's shared layers come once per
    image, and in the legacy layout under a different directory each (a layer's directory is
    named after the image it tops): each is kept once, by the digest of its tar (what
    `docker load` checks against the image's diff IDs), and the later images' manifest
    entries point at that copy. The listing files (`_LISTINGS`) are merged, not copied.
    """

    def __init__(self, out: IO[bytes], spool: Path) -> None:
        self.archive = tarfile.open(fileobj=out, mode="w")  # noqa: SIM115 - closed by `finish`
        self.spool = spool
        self.entries: list[dict[str, Any]] = []
        self.repositories: dict[str, dict[str, str]] = {}
        self.index: dict[str, Any] = {}
        self.layout: bytes | None = None
        self.written: set[str] = set()
        self.by_digest: dict[str, str] = {}
        self.moved: dict[str, str] = {}
        """Member name -> the name holding its content (a duplicate layer, or the Engine's link)."""

    def add(self, chunks: Iterator[bytes]) -> None:
        with tarfile.open(fileobj=_Stream(chunks), mode="r|") as image:
            for member in image:
                name = posixpath.normpath(member.name)
                if member.issym() or member.islnk():  # the Engine's own single copy of a layer
                    start = posixpath.dirname(name) if member.issym() else ""
                    self.moved[name] = posixpath.normpath(posixpath.join(start, member.linkname))
                elif name in _LISTINGS:
                    source = image.extractfile(member)
                    if source is not None:
                        self._listing(name, source.read())
                elif name not in self.written:  # a name already here is the same content
                    self._copy(image, member, name)

    def finish(self) -> None:
        for entry in self.entries:
            entry["Layers"] = [self._resolve(layer) for layer in entry.get("Layers") or []]
        listings: dict[str, bytes] = {"manifest.json": json.dumps(self.entries).encode()}
        if self.repositories:
            listings["repositories"] = json.dumps(self.repositories).encode()
        if self.index:
            listings["index.json"] = json.dumps(self.index).encode()
        if self.layout is not None:
            listings["oci-layout"] = self.layout
        for name, data in listings.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            self.archive.addfile(info, io.BytesIO(data))
        self.archive.close()

    def _copy(self, image: tarfile.TarFile, member: tarfile.TarInfo, name: str) -> None:
        source = image.extractfile(member)
        if source is None:  # a directory
            self.archive.addfile(member)
            self.written.add(name)
            return
        with tempfile.TemporaryFile(dir=self.spool) as spool:
            digest = hashlib.sha256()
            while chunk := source.read(_CHUNK):
                digest.update(chunk)
                spool.write(chunk)
            key = digest.hexdigest()
            if name.endswith("/layer.tar") and key in self.by_digest:
                self.moved[name] = self.by_digest[key]
                return
            self.by_digest.setdefault(key, name)
            spool.seek(0)
            self.archive.addfile(member, spool)
            self.written.add(name)

    def _listing(self, name: str, data: bytes) -> None:
        if name == "manifest.json":
            self.entries += json.loads(data)
        elif name == "repositories":
            for repository, tags in json.loads(data).items():
                self.repositories.setdefault(repository, {}).update(tags)
        elif name == "index.json":
            read = json.loads(data)
            manifests = [*self.index.get("manifests", []), *read.get("manifests", [])]
            self.index = read | self.index | {"manifests": manifests}
        else:
            self.layout = data

    def _resolve(self, name: str) -> str:
        seen = {name}
        while name in self.moved:
            name = self.moved[name]
            if name in seen:
                raise ValueError(f"the saved image links {name} to itself")
            seen.add(name)
        return name


_LISTINGS = frozenset({"manifest.json", "repositories", "index.json", "oci-layout"})
"""The files of a `docker save` tarball that list its images."""


class _Stream(io.RawIOBase):
    """The chunks of a streamed `docker save` as the file `tarfile` reads in stream mode."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.left = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.left:
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.left = memoryview(chunk)
        size = min(len(buffer), len(self.left))
        buffer[:size] = self.left[:size]
        self.left = self.left[size:]  # a view: no copy of the rest
        return size
