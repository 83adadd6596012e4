"""The GitHub Actions runtime: step outputs, the job summary, annotations and secret masks.

Everything goes through the files and workflow commands the runner documents, escaped so
that a value (a model's answer, a file path, a multi-line report) can never end the
command early or inject a second one. Outside Actions (no `$GITHUB_OUTPUT` /
`$GITHUB_STEP_SUMMARY`) the file-based calls do nothing, so the CLI can share this code.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

Level = Literal["error", "warning", "notice"]


def escape_data(value: str) -> str:
    """Escape a command's message: `%`, CR and LF (the runner decodes them back)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a command property value: as data, plus `:` and `,` which delimit properties."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


@dataclass(frozen=True)
class ActionsRuntime:
    """Where this step's outputs, summary and workflow commands go."""

    output_path: Path | None = None
    summary_path: Path | None = None
    stream: TextIO = field(default=sys.stdout)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, stream: TextIO | None = None) -> ActionsRuntime:
        """Read `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY` (absent outside Actions)."""
        env = os.environ if env is None else env
        output = env.get("GITHUB_OUTPUT")
        summary = env.get("GITHUB_STEP_SUMMARY")
        return cls(
            output_path=Path(output) if output else None,
            summary_path=Path(summary) if summary else None,
            stream=stream or sys.stdout,
        )

    def set_output(self, name: str, value: str) -> bool:
        """Append `name` to `$GITHUB_OUTPUT` in the heredoc form, safe for any multi-line value.

        Returns False when not running in Actions (nothing written).
        """
        if not name or any(c in name for c in "\r\n=<"):
            raise ValueError(f"output name {name!r} must be non-empty and hold no newline, '=' or '<'")
        if self.output_path is None:
            return False
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        # A random delimiter that the value happens to contain would end the value early.
        if delimiter in value:
            raise ValueError(f"output {name!r} contains its own delimiter")
        with self.output_path.open("a", encoding="utf-8") as out:
            out.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
        return True

    def append_summary(self, markdown: str) -> bool:
        """Append markdown to the job summary; False when not running in Actions."""
        if self.summary_path is None:
            return False
        with self.summary_path.open("a", encoding="utf-8") as out:
            out.write(markdown if markdown.endswith("\n") else markdown + "\n")
        return True

    def annotate(
        self,
        level: Level,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        end_line: int | None = None,
        title: str | None = None,
    ) -> None:
        """Emit `::error file=...,line=...::message` (or warning/notice), escaped."""
        props = {"file": file, "line": line, "endLine": end_line, "title": title}
        rendered = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items() if v is not None)
        self._command(level, rendered, message)

    def mask(self, secret: str) -> None:
        """Ask the runner to redact `secret` from the log; each line separately, as the runner masks lines."""
        for part in secret.splitlines() or [secret]:
            if part.strip():
                self._command("add-mask", "", part)

    def _command(self, name: str, properties: str, message: str) -> None:
        head = f"::{name} {properties}" if properties else f"::{name}"
        self.stream.write(f"{head}::{escape_data(message)}\n")
        self.stream.flush()
