"""The environment image: built once per content hash, rebuilt when its inputs change,
and the extra CA bundle makes HTTPS to a package registry work behind TLS interception."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from docdelta.errors import SandboxError
from docdelta.sandbox.base import DockerImageConfig
from docdelta.sandbox.images import EXTRA_CA_PATH, environment_image

pytestmark = pytest.mark.docker

SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# A setup step that needs the network and a trusted TLS chain to a package registry:
# pip (from Debian) downloads a package from its default index over HTTPS.
FETCH_FROM_REGISTRY = (
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip >/dev/null"
    " && python3 -m pip download -q --no-deps -d /tmp/dl six"
    " && echo fetched > /etc/docdelta-setup-ran"
)


def test_built_once_with_the_ca_and_rebuilt_only_when_inputs_change(client: Any, base_image: str) -> None:
    config = DockerImageConfig(base=base_image, setup=[FETCH_FROM_REGISTRY], extra_ca=SYSTEM_BUNDLE)
    first = environment_image(client, config)
    assert first.tag.startswith("docdelta-env:") and first.digest.startswith("sha256:")
    out = client.containers.run(
        first.tag,
        ["sh", "-c", f"cat /etc/docdelta-setup-ran; cmp -s {EXTRA_CA_PATH} /dev/null || echo ca"],
        network_mode="none",
        remove=True,
    )
    assert out == b"fetched\nca\n"

    started = time.monotonic()
    assert environment_image(client, config) == first
    assert time.monotonic() - started < 2, "the second call reuses the image"

    changed = environment_image(client, config.model_copy(update={"setup": ["true"], "extra_ca": None}))
    assert changed.tag != first.tag


def test_a_failing_setup_command_names_itself(client: Any, base_image: str) -> None:
    config = DockerImageConfig(base=base_image, setup=["echo broken-step-output; exit 7"])
    with pytest.raises(SandboxError, match="broken-step-output"):
        environment_image(client, config)


def test_a_missing_base_image_is_a_clear_error(client: Any) -> None:
    with pytest.raises(SandboxError, match="no-such-docdelta-image:1"):
        environment_image(client, DockerImageConfig(base="no-such-docdelta-image:1"))
