"""The Docker provider's environment (part of a saved selftest's key) names the image by its
id: a tag moved to another build is another environment, so a selftest that passed in the
old image is not reused in the new one."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from docdelta.sandbox.docker import DockerProvider

pytestmark = pytest.mark.docker


def test_a_tag_moved_to_another_image_is_another_environment(
    client: Any, base_image: str, gateway_image: str
) -> None:
    tag = f"docdelta-test-envkey:{uuid.uuid4().hex[:8]}"
    repository, _, version = tag.partition(":")
    assert client.images.get(base_image).tag(repository, version)
    try:
        provider = DockerProvider(client, tag, ro_paths=["/usr"], env={"PATH": "/usr/bin"})
        before = provider.environment()
        assert provider.environment() == before  # stable while nothing changes
        assert DockerProvider(client, tag, ro_paths=["/usr"], env={}).environment() != before
        assert client.images.get(gateway_image).tag(repository, version)  # the same tag, rebuilt
        assert provider.environment() != before
    finally:
        client.images.remove(tag)  # only the tag this test made; the images stay
    assert provider.environment() not in (before, "")  # gone: still a key, `create` names the image
