"""`fake`: the deterministic agent behind `docdelta demo` and the tests.

It is the `command` agent running a bundled script (fake_agent.py) with
`python3`, so it exercises exactly the path a real command agent takes: files
written into the sandbox, prompt on stdin, answer on stdout, metrics file.
"""

from __future__ import annotations

from importlib.resources import files
from typing import ClassVar

from docdelta.agents.base import AgentContext
from docdelta.agents.command import CommandAgent
from docdelta.sandbox.base import Sandbox
from docdelta.vocabulary import sha256_hex

SCRIPT = files("docdelta.agents").joinpath("fake_agent.py").read_bytes()


class FakeAgent(CommandAgent):
    name: ClassVar[str] = "fake"
    reads_from_tool_stream: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__("python3 fake_agent.py")
        # The script's hash is the version: editing the fake makes old results incomparable.
        self._version = f"fake-{sha256_hex(SCRIPT)[:12]}"

    def command(self, sandbox: Sandbox, ctx: AgentContext) -> list[str]:
        return ["python3", f"{sandbox.tools_dir}/fake_agent.py", "--seed", str(ctx.seed)]

    def files(self, sandbox: Sandbox) -> dict[str, bytes]:
        return {f"{sandbox.tools_dir}/fake_agent.py": SCRIPT}
