"""One exception hierarchy for the whole project.

Every error a user can cause carries a message that names the file, field or ref
at fault and a hint that says what to do; the CLI prints both and never a traceback.
`InfraError` marks failures of our own machinery (Docker, the gateway, the grader),
which are never graded as agent failures.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Every exit status docdelta (CLI and Action) returns: the one table."""

    OK = 0
    INCOMPLETE = 1
    """The matrix stopped before it was complete (spend cap, rate limit); rerun to resume."""
    BAD_INPUT = 2
    """Bad input (arguments, config, task files, Action inputs) or a failed selftest/calibration."""
    INFRA = 3
    """Our own machinery failed (Docker, the gateway, the grader), or so many runs failed for
    the harness's or the agent command's reasons that there is no verdict."""
    GITHUB = 4
    """A GitHub API call failed in a way the bot cannot recover from."""
    NO_RECEIPT = 5
    """`docdelta receipt`: the instruction file has no passing evaluation of its exact content."""
    INTERRUPTED = 130
    """Ctrl-C / SIGINT (128 + 2, the shell's convention); finished results are kept."""
    TERMINATED = 143
    """SIGTERM (128 + 15): handled like Ctrl-C, finished results are kept."""


class Terminated(BaseException):
    """Raised in the main thread when docdelta receives SIGTERM, so every `finally`
    (temp files, sandboxes, locks) runs as it does for Ctrl-C."""


class DocdeltaError(Exception):
    """Base class; `hint` tells the user what to do next."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class ConfigError(DocdeltaError):
    """Bad project config, settings, CLI arguments or repository/ref input."""


class TaskError(DocdeltaError):
    """A task file is malformed, unreviewed, or its gold citations do not hold."""


class SelftestFailed(TaskError):
    """A change task's selftest failed in a run: no agent ran, and the workdir keeps the
    failed report, so the scorecard can show why (`ResultStore.failed_selftests`)."""


class SandboxError(DocdeltaError):
    """A sandbox could not be created or refused to run (e.g. isolation unavailable)."""


class AgentError(DocdeltaError):
    """An agent adapter is misconfigured (unknown agent, missing command, ...)."""


class DraftRefused(DocdeltaError):
    """A model-written patch failed validation (docdelta.improve.suggest_model): none of it is kept."""


class InfraError(DocdeltaError):
    """Our own machinery failed; the affected run is `infra_error`, never a fail."""

    exit_code = ExitCode.INFRA


class GitHubError(DocdeltaError):
    """A GitHub API call failed in a way the bot cannot recover from."""

    exit_code = ExitCode.GITHUB
