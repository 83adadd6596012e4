"""`--env-file`: keys for a run from a dotenv file, so they stay out of shell history.

Parsed by python-dotenv; a line it cannot read, or a name that is no environment variable
name, is refused with its line number (never its value: the file holds secrets). A
variable already set in the environment wins over the file, as python-dotenv does by
default: a key exported for one command overrides the file kept for every day.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from io import StringIO
from pathlib import Path

from dotenv import dotenv_values
from dotenv.parser import parse_stream

from docdelta.errors import ConfigError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HINT = "write one KEY=value per line (# starts a comment), e.g. ANTHROPIC_API_KEY=sk-..."


def read_env_file(path: Path) -> dict[str, str]:
    """The file's variables; a ConfigError naming `--env-file` and the line for anything else."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "cannot be read"
        raise ConfigError(f"--env-file {path} {reason}", hint=_HINT) from None
    for binding in parse_stream(StringIO(text)):
        line = binding.original.line
        if binding.error:
            raise ConfigError(f"--env-file {path}: line {line} is not KEY=value", hint=_HINT)
        if binding.key is None:  # a comment or blank line
            continue
        if not _NAME.fullmatch(binding.key):
            raise ConfigError(
                f"--env-file {path}: line {line} names {binding.key[:40]!r}, not a variable name",
                hint="names are letters, digits and _, not starting with a digit",
            )
        if binding.value is None:
            raise ConfigError(f"--env-file {path}: line {line}: {binding.key} has no value", hint=_HINT)
    values = dotenv_values(stream=StringIO(text), interpolate=False)
    return {k: v for k, v in values.items() if v is not None}


def load_env_file(path: Path, environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set the file's variables that `environ` (default: the process's) does not already
    hold; returns the names set, for a log line that shows names only."""
    environ = os.environ if environ is None else environ
    added = {k: v for k, v in read_env_file(path).items() if k not in environ}
    environ.update(added)
    return sorted(added)
