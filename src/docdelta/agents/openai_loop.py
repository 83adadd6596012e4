"""`openai`: the built-in agent, a Chat Completions tool-calling loop with one shell tool.

It is the agent for local and self-hosted OpenAI-compatible servers (llama.cpp, vLLM,
ollama) and for any hosted model behind the gateway. The loop itself is a stdlib-only
script (openai_agent.py) copied into the sandbox, so it runs in any image with python3;
this adapter is the `command` agent around it, plus the endings only the loop can see:
its turn cap (`max_turns`), a reply cut off at the output cap (`no_answer`: a truncated
reply is never taken as final), and a failed model call, classified by its HTTP status
with `status_for_api_error` like every other adapter's (an unreachable or 5xx server is
an `infra_error`: retried, never scored). Like Codex, it puts the root AGENTS.md in its
system prompt (and reads no other instruction file).

Tokens and cost are what the gateway logged when there is one (the runner replaces the
agent's own counts with them); the loop's own counts, read from the API's usage blocks,
are what is left without a gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.resources import files
from typing import ClassVar

from docdelta.agents import openai_agent as loop
from docdelta.agents.base import AgentContext, status_for_api_error
from docdelta.agents.command import CommandAgent, metrics_data
from docdelta.agents.models import AgentOutcome, RunStatus
from docdelta.errors import AgentError
from docdelta.sandbox.base import ExecResult, NetworkMode, Sandbox
from docdelta.validate import DEFAULT_MAX_OUTPUT_TOKENS
from docdelta.vocabulary import sha256_hex

SCRIPT = files("docdelta.agents").joinpath("openai_agent.py").read_bytes()
DEFAULT_MAX_TURNS = 20
_ENDING_PREFIX = "openai agent: "


class OpenAIAgent(CommandAgent):
    name: ClassVar[str] = "openai"
    upstream: ClassVar[str | None] = "openai"
    reads_from_tool_stream: ClassVar[bool] = True

    def __init__(
        self,
        model: str = "",
        base_url: str | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
        max_tool_output: int = 16000,
        server: Mapping[str, str] | None = None,
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
        self.max_output_tokens = max_output_tokens
        self.max_tool_output = max_tool_output
        if server:
            self.server_identity = dict(server)
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
            str(self.max_output_tokens),
            "--max-tool-output",
            str(self.max_tool_output),
        ]
        return argv + (["--base-url", self.base_url] if self.base_url else [])

    def files(self, sandbox: Sandbox) -> dict[str, bytes]:
        return {f"{sandbox.tools_dir}/openai_agent.py": SCRIPT}

    @property
    def recorded_settings(self) -> dict[str, int | str]:
        return {"max_output_tokens": self.max_output_tokens, "max_tool_output": self.max_tool_output}

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        outcome = super().parse(result, sandbox, ctx)
        try:
            extra = metrics_data(sandbox)
        except ValueError:
            extra = {}
        served = extra.get("served_by")
        if isinstance(served, dict):
            update: dict[str, object] = {"served_by": {k: str(v) for k, v in served.items()}}
            outcome = outcome.model_copy(update=update)
        if result.exit_code == loop.EXIT_MAX_TURNS:
            status = RunStatus.max_turns
        elif result.exit_code == loop.EXIT_MAX_TOKENS:
            status = RunStatus.no_answer
        elif result.exit_code == loop.EXIT_API_ERROR:
            api_status = extra.get("api_status")
            status = status_for_api_error(api_status if isinstance(api_status, int) else None)
        else:
            return outcome
        return outcome.model_copy(update={"status": status, "answer": None, "error": _ending(result)})


def _ending(result: ExecResult) -> str | None:
    """The loop's own account of how it ended: the last `openai agent: ...` line on stderr
    (the lines before it are the conversation)."""
    lines = result.stderr.decode("utf-8", errors="replace").splitlines()
    ending = next((line for line in reversed(lines) if line.startswith(_ENDING_PREFIX)), None)
    return ending.removeprefix(_ENDING_PREFIX)[:2000] if ending else None
