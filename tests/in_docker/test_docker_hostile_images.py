"""A pull request's own image on a shared engine never becomes a later job's agent image.

On a self-hosted runner every job talks to one Docker engine, and a repository's CI builds
the pull request's Dockerfile (`docker build -t app:pr-7 .`). Labels are data a Dockerfile
sets, so such an image can carry exactly the labels `agents.images` looks for: the agent
layer's (`org.docdelta.agent-node`, `org.docdelta.agent-npm`) or a ready agent image's
(`org.docdelta.agent-made-for`). If a label were enough, docdelta's next evaluation would run
the pull request's "agent" (which can pass head and fail base at will) and the gate would be
the pull request's to set. The engine is real; the registry is Debian's docker-registry.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from docker_helpers import dockerfile_context, stand_in_layer, stand_in_npm
from registry import local_registry

from docdelta.agents.claude_code import VERSION, ClaudeCodeAgent
from docdelta.agents.images import FROM_LAYER_LABEL, MADE_FOR_LABEL, NODE_VERSION, agent_image, published_ref

pytestmark = pytest.mark.docker


@pytest.fixture
def pr_tag(client: Any) -> Iterator[str]:
    """The tag a repository's CI gives the pull request's image; removed at the end."""
    tag = f"app:pr-{uuid.uuid4().hex[:12]}"
    yield tag
    _remove(client, tag)


def _remove(client: Any, *tags: str) -> None:
    """Remove the images tagged `tags` that exist (a planted one may have been all there was)."""
    for tag in tags:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag, force=True)


def _build(client: Any, dockerfile: str, tag: str) -> str:
    """`docker build -t tag` of `dockerfile` (as the PR's CI would), leaving no container; its ID."""
    context = dockerfile_context(dockerfile)
    image, _ = client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True)
    return str(image.id)


def _published(client: Any, registry: Any, npm: list[str]) -> tuple[str, str]:
    """The released layer of `npm`, pushed to `registry` and not on the engine: (ref, ID)."""
    ref = published_ref(f"{registry.host}/owner", ClaudeCodeAgent.name, VERSION)
    assert ref is not None
    pushed = stand_in_layer(client, ref, NODE_VERSION, npm)
    name, _, tag = ref.rpartition(":")
    for event in client.images.push(name, tag=tag, stream=True, decode=True):
        assert "error" not in event, event
    client.images.remove(ref)
    return ref, pushed


def test_a_prs_image_with_the_layer_labels_is_not_used_as_the_agent_layer(
    client: Any, base_image: str, tmp_path: Path, pr_tag: str
) -> None:
    npm = stand_in_npm()
    # The PR's Dockerfile: the released layer's labels on files of its own (here: one more label).
    stand_in_layer(client, pr_tag, NODE_VERSION, npm)
    dockerfile = f"FROM {pr_tag}\nLABEL org.example.pr=7\n"
    planted = _build(client, dockerfile, pr_tag)
    with local_registry(tmp_path / "registry") as registry:
        ref, pushed = _published(client, registry, npm)
        image = None
        try:
            image = agent_image(client, base=base_image, npm=npm, published=ref)
            layer = client.images.get(image.tag).labels[FROM_LAYER_LABEL]
            assert layer != planted
            assert layer == pushed  # the release's layer, pulled
        finally:
            _remove(client, ref, *([image.tag] if image else []))


def test_a_prs_image_with_the_agent_images_label_is_not_used_as_the_agent_image(
    client: Any, base_image: str, tmp_path: Path, pr_tag: str
) -> None:
    npm = stand_in_npm()
    with local_registry(tmp_path / "registry") as registry:
        ref, pushed = _published(client, registry, npm)
        image = None
        try:
            genuine = agent_image(client, base=base_image, npm=npm, published=ref)
            made_for = client.images.get(genuine.tag).labels[MADE_FOR_LABEL]
            client.images.remove(genuine.tag, force=True)
            # The PR's Dockerfile: the label of an agent image made for these very packages.
            dockerfile = f"FROM {base_image}\nLABEL {MADE_FOR_LABEL}={made_for}\n"
            planted = _build(client, dockerfile, pr_tag)

            image = agent_image(client, base=base_image, npm=npm)  # a later job, no registry
            assert image.tag != pr_tag and image.digest != planted
            assert image.tag.startswith("docdelta-agent:")
            assert client.images.get(image.tag).labels[FROM_LAYER_LABEL] == pushed
        finally:
            _remove(client, ref, *([image.tag] if image else []))
