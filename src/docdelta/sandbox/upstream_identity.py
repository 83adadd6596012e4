"""What a self-hosted model server behind the gateway serves, for the manifest.

A model alias is whatever the operator typed, so two runs against "the same model" are
comparable only if the server says what it loaded: llama-server answers `GET /props` with
the weights file, its quantisation, the chat template, the build and the context size.
Production code: `wiring.build_provider` asks every non-hosted upstream on the gateway's
egress network (`gateway.egress_network` in `.docdelta.yml`) before a run, and the answers
become part of the experiment's identity. Upstreams that do not answer add nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from docker import DockerClient
from docker.errors import DockerException

from docdelta.errors import InfraError
from docdelta.sandbox.dockerapi import LABEL


def server_identity(props: Mapping[str, Any]) -> dict[str, str]:
    """What llama-server's `GET /props` says it serves, as recorded beside the model name in
    the manifest: a model alias is whatever the operator typed, so the weights file, the
    chat template (hashed: it decides what the model sees, tools included), the build and
    the context size are what make two runs comparable. Fields the server leaves out are
    left out."""
    settings = props.get("default_generation_settings")
    caps = props.get("chat_template_caps")
    found: dict[str, Any] = {
        "model_alias": props.get("model_alias"),
        "model_file": Path(str(props["model_path"])).name if props.get("model_path") else None,
        "model_ftype": props.get("model_ftype"),
        "chat_template_sha256": _sha256(props.get("chat_template")),
        "chat_template_tool_use_sha256": _sha256(props.get("chat_template_tool_use")),
        "supports_tools": caps.get("supports_tools") if isinstance(caps, Mapping) else None,
        "build_info": props.get("build_info"),
        "n_ctx": settings.get("n_ctx") if isinstance(settings, Mapping) else None,
        "total_slots": props.get("total_slots"),
    }
    return {key: _text(value) for key, value in found.items() if value is not None}


def _sha256(text: object) -> str | None:
    return hashlib.sha256(text.encode()).hexdigest() if isinstance(text, str) and text else None


def _text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


_PROPS_PROBE = """
import json, sys, urllib.request
found = {}
for name, url in json.loads(sys.argv[1]).items():
    try:
        found[name] = json.loads(urllib.request.urlopen(url, timeout=5).read())
    except (OSError, ValueError):
        pass
print(json.dumps(found))
"""
"""Run in a throwaway container on the egress network: the host may not reach it."""


def model_servers(
    client: DockerClient, image: str, network: str, base_urls: Mapping[str, str]
) -> dict[str, str]:
    """The identity of each llama-server among `base_urls` (upstream name -> API base URL)
    on the Docker `network`, keyed `<upstream>.<field>`; upstreams that do not answer
    `/props` (another kind of server, or down) add nothing."""
    urls = {name: _server_root(url) + "/props" for name, url in base_urls.items()}
    try:
        printed = client.containers.run(
            image,
            ["python3", "-c", _PROPS_PROBE, json.dumps(urls)],
            network=network,
            labels={LABEL: "1"},
            remove=True,
        )
        answers = json.loads(printed)
    except (DockerException, ValueError) as exc:
        raise InfraError(f"could not ask the model servers on {network} who they are: {exc}") from exc
    return {
        f"{name}.{key}": value
        for name, props in sorted(answers.items())
        if isinstance(props, dict)
        for key, value in server_identity(props).items()
    }


def _server_root(base_url: str) -> str:
    """llama-server answers `/props` at its root, beside the `/v1` API."""
    return base_url.rstrip("/").removesuffix("/v1")
