"""`openai`: the built-in agent, a Chat Completions tool-calling loop with one shell tool.

It is the agent for local and self-hosted OpenAI-compatible servers (llama.cpp, vLLM,
ollama) and for any hosted model behind the gateway. The loop itself is a stdlib-only
script (openai_agent.py) copied into the sandbox, so it runs in any image with python3;
this adapter is the `command` agent around it, plus the endings only the loop can see:
its turn cap (`max_turns`) and a 429 from the model API (`rate_limited`). Like Codex, it
puts the root AGENTS.md in its system prompt (and reads no other instruction file).

Tokens and cost are what the gateway logged when there is one (the runner replaces the
agent's own counts with them); the loop's own counts, read from the API's usage blocks,
are what is left without a gateway.
"""

from __future__ import annotations

from importlib.resources import files
from typing import ClassVar

from docdelta.agents import openai_agent as loop
from docdelta.agents.base import AgentContext
from docdelta.agents.command import CommandAgent
from docdelta.errors import AgentError
from docdelta.models import AgentOutcome, RunStatus, sha256_hex
from docdelta.sandbox.base import ExecResult, NetworkMode, Sandbox

SCRIPT = files("docdelta.agents").joinpath("openai_agent.py").read_bytes()
DEFAULT_MAX_TURNS = 20
_STATUS = {loop.EXIT_MAX_TURNS: RunStatus.max_turns, loop.EXIT_RATE_LIMITED: RunStatus.rate_limited}
"""Loop endings sharper than `classify` can tell; any other failure is an `agent_error`."""


class OpenAIAgent(CommandAgent):
    name: ClassVar[str] = "openai"
    upstream: ClassVar[str | None] = "openai"

    def __init__(
        self,
        model: str = "",
        base_url: str | None = None,
        max_tokens: int = 4096,
        max_tool_output: int = 16000,
    ) -> None:
        if not model:
            raise AgentError(
                "the openai agent needs a model name",
                hint="pass --model with the id the server knows (e.g. gpt-4o-mini, or the llama.cpp alias)",
            )
        super().__init__("python3 openai_agent.py")
        self._model = model
        self.base_url = base_url
        """None: the sandbox's OPENAI_BASE_URL (the gateway sets it)."""
        self.max_tokens = max_tokens
        self.max_tool_output = max_tool_output
        # The loop's hash is the version: a changed loop makes old results incomparable.
        self._version = f"openai-{sha256_hex(SCRIPT)[:12]}"

    @property
    def model(self) -> str:
        return self._model

    @property
    def network(self) -> NetworkMode:
        return "gateway"

    def turn_cap(self, requested: int | None) -> int | None:
        return requested or DEFAULT_MAX_TURNS

    @property
    def instruction_files(self) -> list[str]:
        """The loop loads the root AGENTS.md into its system prompt; nothing else."""
        return [f"/{loop.INSTRUCTIONS}"]

    def command(self, sandbox: Sandbox, ctx: AgentContext) -> list[str]:
        argv = [
            "python3",
            f"{sandbox.tools_dir}/openai_agent.py",
            "--model",
            self._model,
            "--seed",
            str(ctx.seed),
            "--max-turns",
            str(self.turn_cap(ctx.max_turns)),
            "--max-tokens",
            str(self.max_tokens),
            "--max-tool-output",
            str(self.max_tool_output),
        ]
        return argv + (["--base-url", self.base_url] if self.base_url else [])

    def files(self, sandbox: Sandbox) -> dict[str, bytes]:
        return {f"{sandbox.tools_dir}/openai_agent.py": SCRIPT}

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        outcome = super().parse(result, sandbox, ctx)
        status = _STATUS.get(result.exit_code) if result.exit_code is not None else None
        if status is None:
            return outcome
        why = result.stderr.decode("utf-8", errors="replace")[-2000:].strip()
        return outcome.model_copy(update={"status": status, "error": why or None})
