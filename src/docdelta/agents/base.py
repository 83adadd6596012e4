"""The adapter contract every agent implements (fake, command, openai, claude_code, codex, ...).

An adapter only knows how to *invoke* its agent and how to *parse* what it printed;
running it inside a sandbox, enforcing the timeout and classifying kills is shared
(`Agent.run`), so every agent is measured the same way.
"""

from __future__ import annotations

import json
import posixpath
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from pydantic import ValidationError

from docdelta.agents.models import AgentAnswer, AgentOutcome, RunStatus
from docdelta.errors import AgentError
from docdelta.instructions.loading import RULES
from docdelta.instructions.models import LoadMode
from docdelta.sandbox.base import ExecResult, NetworkMode, Sandbox

_DECODER = json.JSONDecoder()
_SCAN_LIMIT = 1024 * 1024
"""Only the tail of a transcript is scanned: the answer is asked for at the end."""


def extract_last_json(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object in `text`, or None.

    Agents wrap their answer in prose and ```json fences; scanning forward and
    skipping over each object that decodes means a nested object is never mistaken
    for the answer, and whatever surrounds the objects is ignored.
    """
    text = text[-_SCAN_LIMIT:]
    found: dict[str, Any] | None = None
    pos = text.find("{")
    while pos != -1:
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            found = value
        pos = text.find("{", end)
    return found


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL stream (stream-json, `--json`), skipping any other line:
    CLIs interleave warnings and progress with their events."""
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.lstrip().startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                events.append(value)
    return events


def parse_answer(text: str) -> tuple[AgentAnswer | None, str | None]:
    """The agent's answer from its final text, or None and why not."""
    data = extract_last_json(text)
    if data is None:
        return None, "no JSON object in the agent's output"
    if not data.keys() & AgentAnswer.model_fields.keys():
        # e.g. a reply that only echoed the prompt's citation example {"path", "lines"}
        fields = ", ".join(AgentAnswer.model_fields)
        return None, f"the final JSON object has none of the answer's fields ({fields})"
    try:
        return AgentAnswer.model_validate(data), None
    except ValidationError as exc:
        return None, f"the final JSON object does not have the answer shape: {exc.errors()[0]['msg']}"


def classify(result: ExecResult, answer: AgentAnswer | None) -> RunStatus:
    """How a run ended, the same way for every agent."""
    if result.timed_out:
        return RunStatus.timeout
    if result.oom:
        return RunStatus.oom
    if result.disk_full:
        return RunStatus.disk_full
    if result.pids_limit:
        return RunStatus.pids_limit
    if answer is None:
        return RunStatus.no_answer if result.exit_code == 0 else RunStatus.agent_error
    return RunStatus.ok


def status_for_api_error(status_code: Any) -> RunStatus:
    """How a run that ended on a model-API error ended, by the HTTP status the CLI reports.

    429 is a rate limit and 402 the gateway's budget refusal; a request the agent made
    too big or malformed (400, 413, 422) is the agent's failure; anything else (5xx,
    auth, routing, or no status: the connection failed) is our machinery's or the
    provider's fault, never the agent's, so it is `infra_error` and retried.
    """
    if status_code == 429:
        return RunStatus.rate_limited
    if status_code == 402:
        return RunStatus.budget
    if status_code in (400, 413, 422):
        return RunStatus.agent_error
    return RunStatus.infra_error


def stdout_events(result: ExecResult) -> list[dict[str, Any]]:
    """The JSON events a CLI printed on stdout (see `json_lines`)."""
    return json_lines(result.stdout.decode("utf-8", errors="replace"))


def failed_stderr(result: ExecResult) -> str | None:
    """The tail of stderr when the CLI exited non-zero: what went wrong when its own output
    says nothing."""
    if result.exit_code not in (0, None) and result.stderr:
        return result.stderr.decode("utf-8", errors="replace")[-2000:]
    return None


def fresh_home(home: str) -> dict[str, str]:
    """HOME and every XDG directory under `home`, a directory of this run only: no user-level
    config, instructions or cache of the CLI exists there to be loaded."""
    return {
        "HOME": home,
        "XDG_CONFIG_HOME": f"{home}/.config",
        "XDG_DATA_HOME": f"{home}/.local/share",
        "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_STATE_HOME": f"{home}/.local/state",
    }


def workspace_relative(path: str, workspace: str) -> str:
    """A path an agent's tool named, relative to the checkout when it lies inside it."""
    relative = posixpath.relpath(path, workspace) if path.startswith("/") else path
    return path if relative.startswith("..") else relative


@dataclass(frozen=True)
class AgentContext:
    """Per-run knobs, identical across conditions except for the seed's repeat part."""

    seed: int
    timeout_s: float = 600.0
    max_turns: int | None = None
    api_retries: int | None = None
    """Cap on the agent's OWN retries of failed model calls (its back-off on 429/5xx); None
    keeps its default. `--rate-limit stop` sets 0 so a rate limit ends the run at once and
    stops the matrix. Honoured by Claude Code and Codex; OpenCode and Gemini CLI have no
    such switch (their back-off runs, and a run that still fails stops the matrix)."""


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    """Files to write (in-sandbox path -> bytes) before the agent starts, e.g. config."""


class Agent(ABC):
    name: ClassVar[str]
    server_identity: Mapping[str, str] = MappingProxyType({})
    """The model server's identity where the agent knows it (llama-server's `/props`), unless
    the wiring learned it from the sandbox (`wiring.BuiltSandbox.server`); recorded in the
    manifest beside the model name, which a local server lets its operator give any weights."""
    npm: ClassVar[tuple[str, ...]] = ()
    """Pinned npm packages (`name@X.Y.Z`) the agent's image needs; the Docker sandbox
    builds an image with Node.js and exactly these (agents/images.py). Empty for agents
    that are Python scripts (fake, openai) or bring their own executable (command)."""
    upstream: ClassVar[str | None] = None
    """The gateway upstream (model API) this agent speaks to, e.g. `anthropic`: where the
    Action's `api-key` goes when no `provider` input names another. None: no model API."""
    reads_from_tool_stream: ClassVar[bool] = False
    """`metrics.files_read` comes from the agent's own tool calls (parsed from its event stream,
    or the loop or fake docdelta ships), so a file missing from it was not read. False for a
    user's command, whose metrics file is its own claim: trigger grading then needs the gateway."""

    @property
    @abstractmethod
    def version(self) -> str:
        """Pinned version string, recorded in the manifest and every result."""

    @property
    def model(self) -> str | None:
        return None

    @property
    def recorded_settings(self) -> dict[str, int | str]:
        """Knobs that change what the agent does (recorded in the manifest, so results made
        with another value are never mixed in); {} for agents without any."""
        return {}

    @property
    def user_executable(self) -> str | None:
        """The program the user named for this agent (checked before the matrix by
        `agents.command.preflight`); None when the adapter ships its own."""
        return None

    @property
    def command_line(self) -> str | None:
        """The command the user gave this agent, as given (recorded in the manifest so a refused
        resume can name it); None for adapters that ship their own program."""
        return None

    @property
    def user_scripts(self) -> list[str]:
        """The script files the user's command names (`python3 agent.py`), checked to exist by
        `agents.command.preflight`; none for adapters that ship their own program."""
        return []

    def show_user_files(self, hidden: Mapping[str, Path], visible: Sequence[Path] = ()) -> list[Path]:
        """Host files the user's command names that the sandbox must show read-only (none
        for adapters that ship their own program); see `CommandAgent.show_user_files`."""
        return []

    @property
    def network(self) -> NetworkMode:
        """What the agent needs to reach: "none" for self-contained agents (fake, command),
        "gateway" for agents that call a model API (only ever through the gateway)."""
        return "none"

    @property
    def instruction_files(self) -> list[str]:
        """Globs of the instruction files this agent loads into every run natively (the
        instruction graph's always-loaded rules; imports and on-demand files come on top)."""
        return sorted(
            {r.glob.lstrip("/") for r in RULES if self.name in r.families and r.mode is LoadMode.always}
        )

    def turn_cap(self, requested: int | None) -> int | None:
        """The turn cap a run really gets when `requested` (`--max-turns`) is asked for:
        part of the experiment's identity. None: this agent has no turn cap."""
        return None

    def make_outcome(self, status: RunStatus, *, model: str | None = None, **fields: Any) -> AgentOutcome:
        """An outcome stamped with this agent's identity (name, pinned version, model);
        `model` overrides when the run reports the model it really used."""
        return AgentOutcome(
            agent=self.name, agent_version=self.version, model=model or self.model, status=status, **fields
        )

    @abstractmethod
    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        """Build the command line, environment and files for one run."""

    @abstractmethod
    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        """Turn what the agent printed (and any metrics file) into a normalized outcome.

        Adapters set `status` with `classify` (or a sharper status they can see, such
        as `max_turns`); `run` still overrides it when the sandbox killed the agent.
        """

    def run(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        """Invoke, wait, classify (timeout / oom / no_answer) and parse."""
        return self.execute(prompt, sandbox, ctx)[0]

    def execute(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> tuple[AgentOutcome, ExecResult]:
        """`run`, also handing back what the agent printed (the runner keeps it as the
        run's transcript).

        Sandbox failures propagate (SandboxError / InfraError): they are our
        machinery's fault and the runner records them as `infra_error`, not as the
        agent's.
        """
        inv = self.invocation(prompt, sandbox, ctx)
        for path, data in inv.files.items():
            sandbox.write_file(path, data)
        result = sandbox.exec(inv.argv, stdin=inv.stdin, env=inv.env, timeout=ctx.timeout_s)
        outcome = self.parse(result, sandbox, ctx)
        update: dict[str, Any] = {}
        if result.timed_out or result.oom or result.disk_full or result.pids_limit:
            update["status"] = classify(result, outcome.answer)
        if not outcome.metrics.duration_s:
            update["metrics"] = outcome.metrics.model_copy(update={"duration_s": result.duration_s})
        return (outcome.model_copy(update=update) if update else outcome), result


DEFAULT_MAX_TURNS = 50


class GatewayAgent(Agent):
    """An agent that calls a model API — only ever through the sandbox's gateway — and is
    pinned to one version, recorded in every result. Subclasses set `pinned` and may set
    `default_model`; the CLI adapters (claude_code, codex, opencode, gemini) are these."""

    pinned: ClassVar[str]
    default_model: ClassVar[str | None] = None

    def __init__(self, model: str | None = None, max_turns: int = DEFAULT_MAX_TURNS) -> None:
        self._model = model or self.default_model
        self.max_turns = max_turns

    @property
    def version(self) -> str:
        return self.pinned

    @property
    def model(self) -> str | None:
        return self._model

    @property
    def network(self) -> NetworkMode:
        return "gateway"

    def turns(self, requested: int | None) -> int:
        """The turn limit passed to the CLI: `--max-turns`, else this adapter's default."""
        return requested or self.max_turns

    def turn_cap(self, requested: int | None) -> int | None:
        return self.turns(requested)

    @property
    def required_model(self) -> str:
        """The model, for agents that cannot run without naming one."""
        if not self._model:
            raise AgentError(f"the {self.name} agent needs a model", hint="pass --model")
        return self._model
