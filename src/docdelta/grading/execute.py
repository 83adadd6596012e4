"""Run the commands an answer proposes, so a command that does not exist in the project is a miss.

An answer task's gold says `make test`; an agent that read a stale AGENTS.md answers
`make test-unit` or `pytest tests/test_gone.py`. Matching words cannot tell a real target from
a stale one, running it can: with `gold.execute` on, every proposal (`proposed_commands`, at
most `gold.execute.max_commands`) runs as `sh -c COMMAND` in the project's own environment,
and its exit code, first error line and seconds are kept in the run's result
(`RunResult.executed`), where scoring (docdelta.grading.answer) and the report read them; a
rerun reuses the saved result, so nothing runs twice.

Why each command gets a fresh sandbox of the sealed checkout, never the agent's: the agent's
sandbox holds whatever it left there, and one proposal's side effects must not make the next
one pass or fail. The sandbox is the run's own provider (bubblewrap or Docker) with network
"none" (no gateway, no bridge) and its usual guarantees: nothing outside the checkout's
copy is writable, and nothing a command starts outlives its exec. Output is capped,
truncated and redacted of every secret docdelta holds before anything is stored. The
`none` provider isolates nothing, so there commands are never run (`refused`) and matching
alone decides.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from docdelta.agents.models import AgentAnswer
from docdelta.errors import DocdeltaError, InfraError
from docdelta.grading.answer import proposed_commands
from docdelta.redaction import redact
from docdelta.results.grades import CommandsExecuted, ExecutedCommand
from docdelta.sandbox.base import ExecResult, Sandbox, SandboxProvider, SandboxSpec
from docdelta.tasks.models import CommandExecution, Task

OUTPUT_CAP = 64 * 1024
"""Bytes of stdout and of stderr kept from one command: enough for any error message."""
TAIL_CHARS = 2000
FIRST_ERROR_CHARS = 300
UNISOLATED = "none"
REFUSED = "the none sandbox isolates nothing, so proposed commands run only under local or docker"
_SPECIFIC = re.compile(
    r"no rule to make target|unrecognized (?:option|arguments?)|unknown (?:option|command|flag)"
    r"|no such file|not found|\b\w+(?:Error|Exception):|: error:",
    re.IGNORECASE,
)
"""Lines that name the cause ("No rule to make target 'x'", "ModuleNotFoundError: ...")."""
_GENERAL = re.compile(r"error|invalid|cannot|can't|usage:|denied|failed|fatal", re.IGNORECASE)


def first_error(result: ExecResult) -> str | None:
    """The line that says what went wrong: the first of stderr, then stdout, that names a cause,
    else the first that reads like an error, else the last thing it printed (stderr first).
    None for a command that exited 0."""
    if result.exit_code == 0:
        return None
    streams = [result.stderr.decode(errors="replace"), result.stdout.decode(errors="replace")]
    per_stream = [[line.strip() for line in text.splitlines() if line.strip()] for text in streams]
    lines = [line for stream in per_stream for line in stream]
    last = next((stream[-1] for stream in per_stream if stream), None)
    found = next((line for pattern in (_SPECIFIC, _GENERAL) for line in lines if pattern.search(line)), last)
    return None if found is None else found[:FIRST_ERROR_CHARS]


def _record(command: str, result: ExecResult, timeout_s: float, secrets: Sequence[str]) -> ExecutedCommand:
    output = (result.stdout + b"\n" + result.stderr).decode(errors="replace").strip()
    cut = " [output cap reached]" if result.truncated else ""
    if result.timed_out:
        error: str | None = f"killed at the {timeout_s:g}s limit (gold.execute.timeout_s)"
    elif result.oom:
        error = "killed: out of memory"
    else:
        error = first_error(result)
    return ExecutedCommand(
        command=redact(command, secrets),
        exit_code=result.exit_code,
        seconds=round(result.duration_s, 3),
        timed_out=result.timed_out,
        first_error=None if error is None else redact(error, secrets),
        output_tail=redact(output, secrets)[-TAIL_CHARS:] + cut,
    )


def execute_proposals(
    task: Task,
    checkout: Path,
    answer: AgentAnswer,
    provider: SandboxProvider,
    *,
    spec: SandboxSpec,
    secrets: Sequence[str] = (),
    track: Callable[[Sandbox], AbstractContextManager[None]] = lambda _sandbox: contextlib.nullcontext(),
) -> CommandsExecuted:
    """Run `answer`'s proposed commands for `task` (which has gold.execute), each in a new
    offline sandbox of the sealed `checkout` made by `provider` (which must be free to create one).
    `spec` supplies the environment and limits; its network is forced to "none"; `track`
    holds each sandbox while it lives (the runner's, so Ctrl-C closes it under its command).
    A sandbox that fails is our fault, not the agent's: InfraError, so the run is retried."""
    policy = task.gold.execute or CommandExecution()
    proposals = proposed_commands(task, answer)
    todo, skipped = proposals[: policy.max_commands], proposals[policy.max_commands :]
    offline = dataclasses.replace(
        spec, network="none", max_output_bytes=OUTPUT_CAP, max_cost_usd=None, fingerprints={}
    )
    isolation = ""
    ran: list[ExecutedCommand] = []
    try:
        for command in todo:
            with provider.create(checkout, offline) as sandbox, track(sandbox):
                isolation = sandbox.isolation
                if isolation == UNISOLATED:
                    return CommandsExecuted(isolation=isolation, refused=REFUSED, skipped=proposals)
                result = sandbox.exec(["sh", "-c", command], timeout=policy.timeout_s)
            ran.append(_record(command, result, policy.timeout_s, secrets))
    except (DocdeltaError, OSError) as exc:
        raise InfraError(f"the sandbox for proposed commands failed: {exc}") from exc
    return CommandsExecuted(
        isolation=isolation or "not needed: no proposals",
        commands=ran,
        skipped=[redact(c, secrets) for c in skipped],
    )
