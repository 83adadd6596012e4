"""The model server's identity as recorded in the manifest, from llama-server's `GET /props`
(the field names of its `get_res_props`): what makes two runs against "the same alias"
comparable is the weights file, its quantisation, the chat template and the build."""

from __future__ import annotations

import hashlib
from typing import Any

from llamacpp import TOOLS_TEMPLATE

from docdelta.sandbox.upstream_identity import server_identity

PROPS: dict[str, Any] = {
    "default_generation_settings": {"params": {"temperature": 0.8, "seed": 4294967295}, "n_ctx": 8192},
    "total_slots": 1,
    "model_alias": "smollm2-135m",
    "model_ftype": "Q4_1",
    "model_path": "/opt/models/SmolLM2-135M-Instruct.Q4_1.gguf",
    "modalities": {"vision": False, "video": False, "audio": False},
    "chat_template": TOOLS_TEMPLATE,
    "chat_template_caps": {"supports_tools": True, "supports_tool_calls": True},
    "bos_token": "<|im_start|>",
    "eos_token": "<|im_end|>",
    "build_info": "b1-0123abc",
    "is_sleeping": False,
}


def test_the_identity_names_weights_template_build_and_context() -> None:
    assert server_identity(PROPS) == {
        "model_alias": "smollm2-135m",
        "model_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "model_ftype": "Q4_1",
        "chat_template_sha256": hashlib.sha256(TOOLS_TEMPLATE.encode()).hexdigest(),
        "supports_tools": "true",
        "build_info": "b1-0123abc",
        "n_ctx": "8192",
        "total_slots": "1",
    }


def test_another_template_is_another_identity_and_missing_fields_are_left_out() -> None:
    other = server_identity({**PROPS, "chat_template": "{{ messages }}"})
    assert other["chat_template_sha256"] != server_identity(PROPS)["chat_template_sha256"]
    assert server_identity({"model_alias": "m"}) == {"model_alias": "m"}
