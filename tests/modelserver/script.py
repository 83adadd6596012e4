"""The script format, host side: pydantic models that document and validate a script
before it is handed to the (stdlib-only) server, and the files that put the server in
a container image.

A script is API-agnostic: the same turns drive Claude Code over the Anthropic API, Codex
over Responses and the built-in agent over Chat Completions. Usage given per turn is
Anthropic-style: `input_tokens` excludes `cache_read_tokens` and `cache_write_tokens`
(the OpenAI APIs report their sum as input, with the cache reads as cached tokens).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from docdelta.errors import ConfigError


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TurnUsage(_Model):
    """Tokens to report for a turn; a count left out is estimated from text length."""

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cache_read_tokens: int | None = Field(default=None, ge=0)
    cache_write_tokens: int | None = Field(default=None, ge=0)


_TRUNCATED = Field(
    default=False,
    description="cut off at the output cap: finish reason `length` / `max_tokens` / `MAX_TOKENS`, "
    "response status `incomplete`",
)


class TextTurn(_Model):
    """Answer with this text; the agent's turn ends (`end_turn` / `stop`)."""

    text: str
    if_seen: dict[str, str] = Field(
        default={},
        description="needle -> text: answer with the text of the first needle found anywhere in the "
        "request instead (e.g. in a tool result), so what the agent read decides the answer",
    )
    truncated: bool = _TRUNCATED
    usage: TurnUsage | None = None


class ToolTurn(_Model):
    """Call a tool. `tool` is generic (`shell`, `read`, `write`, `edit`) or an exact name;
    `args` use generic names (`command`, `path`) that are mapped onto the declared tool's
    parameters per request."""

    tool: str = Field(min_length=1)
    args: dict[str, Any] = {}
    text: str | None = Field(default=None, description="said before the call")
    aliases: list[str] = Field(default=[], description="more tool names this step may resolve to")
    raw_arguments: str | None = Field(
        default=None,
        description="send exactly this as the call's arguments instead of `args`, e.g. the "
        'truncated `"{"` of a call cut off at the output cap (only for the APIs whose arguments '
        "are JSON text: Chat Completions and Responses)",
    )
    truncated: bool = _TRUNCATED
    usage: TurnUsage | None = None

    @classmethod
    def shell(cls, command: str, **fields: Any) -> ToolTurn:
        return cls(tool="shell", args={"command": command}, **fields)


class ErrorTurn(_Model):
    """Fail this request: 429 (with `retry_after` seconds), 500, 529 overloaded, ..."""

    error: int = Field(ge=400, le=599)
    message: str | None = None
    retry_after: float | None = Field(default=None, ge=0)


class Script(_Model):
    name: str = Field(min_length=1, description="named in every error the server answers")
    model: str | None = Field(default=None, description="model id to report; default: the request's")
    stream_interval_s: float = Field(
        default=0,
        ge=0,
        le=60,
        description="seconds between the SSE events of a streamed answer, as a model paces its "
        "tokens (0: every event at once); only timing changes, never the bytes",
    )
    per_conversation: bool = Field(
        default=False,
        description="answer each request with the turn at the index of the model turns already in "
        "its conversation, not with a shared cursor: runs at once each replay the script from its "
        "start, however their requests interleave, and the script never runs out",
    )
    turns: list[ToolTurn | ErrorTurn | TextTurn]

    @classmethod
    def load(cls, path: Path) -> Script:
        try:
            return cls.model_validate_json(path.read_bytes())
        except (OSError, ValidationError) as exc:
            raise ConfigError(
                f"{path}: not a valid model-server script: {exc}",
                hint="a script is {'name': ..., 'turns': [{'text': ...} | {'tool': ..., 'args': {...}} | "
                "{'error': 429}]}; see modelserver.script",
            ) from exc


def site_files() -> dict[str, bytes]:
    """The files (relative to a PYTHONPATH entry) that `python3 -m modelserver` needs in a
    container: this package minus its pydantic side."""
    package = Path(__file__).parent
    return {
        f"modelserver/{source.name}": source.read_bytes()
        for source in sorted(package.glob("*.py"))
        if source.name != "script.py"
    }
