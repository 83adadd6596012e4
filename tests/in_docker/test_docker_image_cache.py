"""`docker.image_cache` against the real engine: the images a run used (base, environment
image, agent layer, agent image) saved as one tarball, removed from the engine as a fresh
runner has none, and loaded back, so the next job builds and pulls nothing; a tarball cut
short or not a tarball at all is removed with a warning and the images are made again.

Every image here is the test's own (a base FROM the shared one with a label of its own, a
stand-in layer of packages no other test uses), so removing them never touches another
test's images on the shared engine."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from docker_helpers import dockerfile_context, stand_in_layer, stand_in_npm

from docdelta.agents.images import FROM_LAYER_LABEL, NODE_VERSION, agent_image
from docdelta.config import ProjectConfig
from docdelta.git import Repo
from docdelta.sandbox.base import DockerImageConfig
from docdelta.sandbox.image_cache import ImageCache
from docdelta.sandbox.images import BuiltImage, environment_image
from docdelta.wiring import SandboxChoice, build_provider

pytestmark = pytest.mark.docker


class Run:
    """One configuration's images, made the way `wiring` makes them, with a cache."""

    def __init__(self, client: Any, base: str, npm: list[str], directory: Path) -> None:
        self.client, self.base, self.npm, self.directory = client, base, npm, directory
        self.layer = ""
        """The stand-in layer's tag (the fixture's)."""
        self.config = DockerImageConfig(base=base, setup=["echo cached > /etc/docdelta-cache-test"])

    def cache(self) -> ImageCache:
        return ImageCache(self.client, self.directory, {"base": self.base, "npm": self.npm})

    def images(self, cache: ImageCache) -> tuple[BuiltImage, BuiltImage]:
        """The environment image and the agent image, what `cache` kept saved."""
        env = environment_image(self.client, self.config, cache)
        image = agent_image(self.client, base=env.tag, npm=self.npm, cache=cache)
        cache.store()
        return env, image

    def tags(self) -> list[str]:
        """Every tag the run made or used, as the tarball's manifest lists them."""
        cache = self.cache()
        return [] if not cache.path.is_file() else sorted(_held(cache))

    def forget(self, tags: list[str]) -> None:
        """Remove `tags` from the engine, the newest image first (a fresh runner's engine)."""
        by_created = sorted(tags, key=lambda tag: self.client.images.get(tag).attrs["Created"], reverse=True)
        for tag in by_created:
            self.client.images.remove(tag)
        for tag in tags:
            with pytest.raises(docker.errors.ImageNotFound):
                self.client.images.get(tag)


def _held(cache: ImageCache) -> list[str]:
    """The tags in the tarball, read as `docker load` reads them (its manifest.json)."""
    with tarfile.open(cache.path) as archive:
        member = archive.extractfile("manifest.json")
        assert member is not None
        return [tag for entry in json.load(member) for tag in entry.get("RepoTags") or []]


def _layer_digests(cache: ImageCache) -> list[str]:
    """The digest of every layer file the tarball stores (links to one are not copies)."""
    digests = []
    with tarfile.open(cache.path) as archive:
        for member in archive.getmembers():
            if member.isfile() and (member.name.endswith("/layer.tar") or member.name.startswith("blobs/")):
                data = archive.extractfile(member)
                assert data is not None
                digests.append(hashlib.sha256(data.read()).hexdigest())
    return digests


@pytest.fixture
def run(client: Any, base_image: str, tmp_path: Path) -> Iterator[Run]:
    """A base of this test's own (so removing it spares the shared one) and a local stand-in
    layer of packages no other test holds; every tag left at the end is removed."""
    nonce = uuid.uuid4().hex[:12]
    base = f"docdelta-test-cache-base:{nonce}"
    client.images.build(
        fileobj=dockerfile_context(f"FROM {base_image}\nLABEL org.docdelta.test-cache={nonce}\n"),
        custom_context=True,
        tag=base,
    )
    npm = stand_in_npm()
    layer = f"docdelta-agent-layer:test-{nonce}"
    stand_in_layer(client, layer, NODE_VERSION, npm)
    made = Run(client, base, npm, tmp_path / "cache")
    made.layer = layer
    try:
        yield made
    finally:
        left = [t for t in {*made.tags(), base, layer} if _present(client, t)]
        made.forget(left)


def _present(client: Any, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def test_the_images_come_back_from_the_cache_on_an_empty_engine(client: Any, run: Run) -> None:
    first = run.cache()
    assert first.restore() is False  # nothing cached yet
    env, image = run.images(first)
    tags = run.tags()
    layer = client.images.get(image.tag).labels[FROM_LAYER_LABEL]
    assert {run.base, env.tag, image.tag} <= set(tags)
    assert layer not in {str(client.images.get(tag).id) for tag in tags}  # copied in: not needed
    layers = _layer_digests(first)
    assert len(layers) == len(set(layers))  # the chain's shared layers are stored once ...
    with tarfile.open(first.path) as archive:
        member = archive.extractfile("manifest.json")
        assert member is not None
        listed = sum(len(entry["Layers"]) for entry in json.load(member))
    assert len(layers) < listed  # ... though each image lists them
    saved = first.path.stat()

    run.forget([*tags, run.layer])  # the next job's fresh runner: not even the layer
    second = run.cache()
    assert second.restore() is True
    assert second.restore() is False  # all here now: not loaded twice
    again_env, again = run.images(second)
    # Found, not built: a build would make new image IDs.
    assert (again_env, again) == (env, image)
    assert client.images.get(again.tag).labels[FROM_LAYER_LABEL] == layer
    out = client.containers.run(again.tag, ["claude", "--version"], network_mode="none", remove=True)
    assert out.decode().strip() == "published layer: claude --version"
    now = first.path.stat()
    assert (now.st_ino, now.st_mtime_ns) == (saved.st_ino, saved.st_mtime_ns)  # held them all: not rewritten


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "cut short": lambda data: data[: len(data) // 2],
    "not a tarball": lambda data: b"not a tarball\n" * 100,
    "a tarball of something else": lambda data: dockerfile_context("FROM scratch\n").getvalue(),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_tarball_is_removed_with_a_warning_and_the_images_made_again(
    client: Any, run: Run, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = run.cache()
    env, image = run.images(cache)
    tags = run.tags()
    data = cache.path.read_bytes()
    cache.path.write_bytes(DAMAGE[damage](data))

    run.forget([tag for tag in tags if tag != run.base])
    damaged = run.cache()
    with caplog.at_level(logging.WARNING, logger="docdelta.sandbox.image_cache"):
        assert damaged.restore() is False
    assert not damaged.path.exists()
    assert str(damaged.path) in caplog.text
    assert "removed it, the images are pulled or built instead" in caplog.text

    rebuilt_env, rebuilt = run.images(damaged)  # made again, and saved again
    assert rebuilt_env.tag == env.tag and rebuilt_env.digest != env.digest
    assert rebuilt.tag != image.tag  # on the rebuilt environment image
    assert set(run.tags()) >= {run.base, rebuilt_env.tag, rebuilt.tag}


def test_the_config_field_keeps_the_images_under_the_repository(run: Run, tmp_path: Path) -> None:
    """The field as a run reads it: relative to the repository root, the tarball written while
    the sandbox is made (the environment image and its base, no agent here)."""
    root = tmp_path / "repository"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    config = ProjectConfig(docker=DockerImageConfig(base=run.base, image_cache=Path(".docdelta-images")))
    built = build_provider(SandboxChoice("docker"), repo=Repo(root), private={}, config=config, agent=None)
    try:
        (tarball,) = (root / ".docdelta-images").glob("images-*.tar")
        run.directory = tarball.parent  # so the fixture removes what it holds
        with tarfile.open(tarball) as archive:
            member = archive.extractfile("manifest.json")
            assert member is not None
            tags = {tag for entry in json.load(member) for tag in entry["RepoTags"]}
        assert run.base in tags
        assert any(tag.startswith("docdelta-env:") for tag in tags), tags
    finally:
        built.provider.close()
