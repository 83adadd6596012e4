"""docdelta calls the Docker SDK through its public surface only: the client's private
request helpers (`_get`, `_url`, ...) change without notice between SDK releases, so a
call to one is an upgrade that breaks the Action at run time, not at install."""

from __future__ import annotations

import ast
from pathlib import Path

import docker

SRC = Path(__file__).resolve().parents[2] / "src"
PRIVATE = {
    name
    for cls in (docker.APIClient, docker.DockerClient)
    for name in dir(cls)
    if name.startswith("_") and not name.startswith("__")
}


def test_no_module_uses_a_private_member_of_the_docker_client() -> None:
    assert {"_get", "_url"} <= PRIVATE  # the check sees what it is meant to
    used = [
        f"{path.relative_to(SRC)}:{node.lineno} .{node.attr}"
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr in PRIVATE
        and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
    ]
    assert used == []
