"""scripts/agent_layers.py (the release workflow's image builder) refuses bad arguments with
exit 2 and a message naming the flag, before it touches Docker."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from docdelta import __version__

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "agent_layers.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_layers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--agents", "claude_code,fake"], "--agents: fake has no published layer; choose from claude_code,"),
        (["--tag", "v0.0.0-nope"], f"--tag: v0.0.0-nope does not name docdelta {__version__}"),
        (["--extra-ca", "/nonexistent/ca.pem"], "--extra-ca: /nonexistent/ca.pem is not a file"),
    ],
)
def test_bad_arguments_exit_2_naming_the_flag(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _script().main(["--prefix", "ghcr.io/o", "--action", "docdelta-release:1", *flags])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
