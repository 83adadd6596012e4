"""`command`: any executable is an agent.

The protocol is the smallest that lets an existing script take part: the prompt
arrives on stdin, the checkout is the working directory, the last JSON object on
stdout is the answer, and telemetry is optional. To report it, write one JSON
object to the path in `$DOCDELTA_METRICS`; the accepted keys are the fields of
`models.AgentMetrics` (tokens_in, tokens_out, cache_read_tokens,
cache_write_tokens, cost_usd, turns, tool_calls, commands [{command, exit_code}],
files_read, duration_s); other keys are ignored, and a missing key means "not
reported", never zero. With `--model` (or an arm's `model`), the model's name is in
`$DOCDELTA_MODEL`: a wrapper script picks its model from it, and the model is recorded in the
manifest and every result like any agent's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError

from docdelta.agents.base import Agent, AgentContext, Invocation, classify, parse_answer
from docdelta.agents.models import AgentMetrics, AgentOutcome, RunStatus
from docdelta.errors import AgentError, SandboxError
from docdelta.sandbox.base import ExecResult, Sandbox
from docdelta.sandbox.local import SYSTEM_DIRS
from docdelta.vocabulary import CONFIG_PATH, sha256_hex

METRICS_ENV = "DOCDELTA_METRICS"
MODEL_ENV = "DOCDELTA_MODEL"
_METRICS_FILE = "metrics.json"


class CommandAgent(Agent):
    """Runs `cmd` (shlex-split) with the prompt on stdin."""

    name: ClassVar[str] = "command"

    def __init__(self, cmd: str = "", model: str | None = None) -> None:
        try:
            argv = shlex.split(cmd)
        except ValueError as exc:
            raise AgentError(
                f"the agent command {cmd!r} cannot be split into arguments: {exc}",
                hint="balance its quotes, e.g. --agent-cmd \"./agent --name 'my agent'\"",
            ) from None
        if not argv:
            raise AgentError(
                "the command agent needs a command to run",
                hint='pass --agent-cmd "path/to/agent --flag"',
            )
        self.argv = argv
        self._cmd = cmd
        self._chosen_model = model
        self._version = f"cmd-{sha256_hex(shlex.join(argv).encode())[:12]}"

    @property
    def version(self) -> str:
        return self._version

    @property
    def model(self) -> str | None:
        return self._chosen_model

    @property
    def user_executable(self) -> str | None:
        """Only the `command` agent runs a program the user named; the adapters built on
        it (fake, openai) ship their own script."""
        return self.argv[0] if self.name == CommandAgent.name else None

    @property
    def command_line(self) -> str | None:
        return self._cmd if self.name == CommandAgent.name else None

    @property
    def user_scripts(self) -> list[str]:
        """The arguments of the user's command that name a script (SCRIPT: `agent.py`,
        `./run.sh`), as the sandbox will be given them; checked by `preflight`."""
        if self.name != CommandAgent.name:
            return []
        return [word for word in self.argv[1:] if SCRIPT.fullmatch(word)]

    def show_user_files(self, hidden: Mapping[str, Path], visible: Sequence[Path] = ()) -> list[Path]:
        """The host files the command names (`python3 ~/agent.py`, `./agent.sh`), to be shown
        read-only at the same absolute path in the sandbox: each file alone, never its folder,
        so nothing else of the host comes with it. A word is a file when it names an existing
        regular file from docdelta's working directory (the program itself only when it is a
        path, else it is looked up on PATH; options never). The command is rewritten to the
        absolute path, since the agent's working directory is the checkout. Left as they are:
        files the sandbox shows anyway (the system directories, `visible`: `sandbox.paths`),
        which a virtualenv's interpreter needs beside it, and files inside the repository,
        which become their path in the checkout (the working directory). A file in another of
        `hidden` (name -> directory: the tasks with their gold, the workdir), or one that
        links there, is refused, as the agent may never see it: also when that directory lies
        inside the repository (`.docdelta/tasks`)."""
        if self.name != CommandAgent.name:
            return []
        shown: list[Path] = []
        for index, word in enumerate(self.argv):
            if word.startswith("-") or (index == 0 and "/" not in word):
                continue
            path = Path(os.path.abspath(Path(word).expanduser()))
            try:
                if not path.is_file():
                    continue
            except (OSError, ValueError):  # no file name: a `-c` program's source, a NUL
                continue
            real = path.resolve()
            inside = {what: d.resolve() for what, d in hidden.items() if real.is_relative_to(d.resolve())}
            private = {what: d for what, d in inside.items() if what != REPOSITORY}
            if REPOSITORY in inside and not private:
                self.argv[index] = real.relative_to(inside[REPOSITORY]).as_posix()
            elif private:
                what, directory = next(iter(private.items()))
                raise AgentError(
                    f"the agent command names {word}, which is in the {what} {directory}: the agent "
                    "may never see it",
                    hint="move the agent's files to a folder outside the repository, the tasks "
                    "directory and the workdir",
                )
            elif any(path.is_relative_to(d) or real.is_relative_to(d) for d in _shown_anyway(visible)):
                self.argv[index] = str(path)
            else:
                self.argv[index] = str(path)
                shown.append(path)
        return shown

    def command(self, sandbox: Sandbox, ctx: AgentContext) -> list[str]:
        """The argv to run; subclasses wrap a fixed program here."""
        return list(self.argv)

    def files(self, sandbox: Sandbox) -> dict[str, bytes]:
        """Files to place in the sandbox before the run."""
        return {}

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        env = {METRICS_ENV: f"{sandbox.tools_dir}/{_METRICS_FILE}"}
        if self.model:
            env[MODEL_ENV] = self.model
        return Invocation(
            argv=self.command(sandbox, ctx),
            env=env,
            stdin=prompt.encode(),
            files=self.files(sandbox),
        )

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        text = result.stdout.decode("utf-8", errors="replace")
        answer, why = parse_answer(text)
        metrics, metrics_error = _read_metrics(sandbox)
        status = classify(result, answer)
        errors = [e for e in (why if answer is None else None, metrics_error) if e]
        if status is RunStatus.agent_error and result.stderr:
            errors.append(result.stderr.decode("utf-8", errors="replace")[-2000:])
        return self.make_outcome(
            status,
            answer=answer,
            final_text=text,
            metrics=metrics,
            exit_code=result.exit_code,
            error="; ".join(errors) or None,
        )


def _shown_anyway(visible: Sequence[Path]) -> list[Path]:
    """Where a host file is already in every sandbox: the system directories and `visible`."""
    return [*(Path(d) for d in SYSTEM_DIRS), *visible]


def metrics_data(sandbox: Sandbox) -> dict[str, Any]:
    """The agent's metrics file as a JSON object ({} when there is none); ValueError when
    it is not one. Adapters of their own loops read their extra keys from it."""
    try:
        raw = sandbox.read_file(f"{sandbox.tools_dir}/{_METRICS_FILE}")
    except SandboxError:
        return {}
    data: Any = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _read_metrics(sandbox: Sandbox) -> tuple[AgentMetrics, str | None]:
    """The agent's metrics file, leniently: bad telemetry never fails a run."""
    try:
        data = metrics_data(sandbox)
        known = {k: v for k, v in data.items() if k in AgentMetrics.model_fields}
        return AgentMetrics.model_validate(known), None
    except (ValueError, ValidationError) as exc:
        return AgentMetrics(), f"ignored the metrics file: {str(exc).splitlines()[0]}"


REPOSITORY = "repository"
"""The name of the repository among the directories hidden from the agent (`show_user_files`)."""
SCRIPT = re.compile(r"[\w.~@+/-]*\.(?:py|sh|bash|js|mjs|cjs|ts|rb|pl|php|lua)")
"""An argument that names a script file: a word of path characters with a script suffix.
Only these are checked to exist before the matrix: other arguments may name things that are
no file (`openai/gpt-4o`) or one the agent will create."""
NOT_FOUND = 3
_FIND = (
    'case "$1" in */*) [ -f "$1" ] && [ -x "$1" ] ;; *) command -v -- "$1" >/dev/null ;; esac '
    f"|| exit {NOT_FOUND}"
)
"""Exit 0 when argv[0] would start (a path to an executable file, or a name on PATH), else
NOT_FOUND; any other status is the sandbox failing to run a shell at all."""
_MISSING = f'for f; do [ -e "$f" ] || {{ printf %s "$f"; exit {NOT_FOUND}; }}; done'
"""Exit NOT_FOUND printing the first argument that names nothing in the sandbox."""


def preflight(agent: Agent, sandbox: Sandbox) -> None:
    """Before the matrix, in a sandbox like the runs' (same root, PATH and working directory):
    can the agent's program start at all? A missing program would otherwise fail every run
    as `agent_error` and the matrix would end as a scorecard of zeros."""
    program = agent.user_executable
    if program is None:
        return
    result = sandbox.exec(["sh", "-c", _FIND, "sh", program], timeout=60.0)
    if result.exit_code == 0:
        _check_scripts(agent.user_scripts, sandbox)
        return
    if result.exit_code == NOT_FOUND:
        raise AgentError(
            f"the agent command's program {program!r} is not an executable the sandbox can run",
            hint="give a path to an executable file (docdelta shows the files the command names "
            "to the sandbox read-only), a program on the system PATH, or a path relative to the "
            f"repository root (the agent's working directory); a program's folder goes in sandbox.paths "
            f"in {CONFIG_PATH}",
        )
    raise SandboxError(
        f"the sandbox could not check the agent command's program {program!r} "
        f"(exit {result.exit_code}): {result.stderr.decode('utf-8', errors='replace').strip()[-500:]}",
        hint="the sandbox itself fails to start a command; see the error above",
    )


def _check_scripts(scripts: Sequence[str], sandbox: Sandbox) -> None:
    """Every script the command names exists where the agent runs (`python3 /nonexistent/agent.py`
    would start, then fail every run with "can't open file")."""
    if not scripts:
        return
    result = sandbox.exec(["sh", "-c", _MISSING, "sh", *scripts], timeout=60.0)
    if result.exit_code == 0:
        return
    missing = result.stdout.decode("utf-8", errors="replace")
    if result.exit_code != NOT_FOUND or missing not in scripts:
        raise SandboxError(
            f"the sandbox could not check the agent command's scripts (exit {result.exit_code}): "
            f"{result.stderr.decode('utf-8', errors='replace').strip()[-500:]}",
            hint="the sandbox itself fails to start a command; see the error above",
        )
    raise AgentError(
        f"the agent command names {missing}, which the sandbox cannot find: every run would fail "
        "before the agent starts",
        hint="fix the path: a relative one is taken from the directory you run docdelta in, and a "
        "file of the repository from the checkout, which holds only committed files; a file in a "
        f"folder named in sandbox.paths ({CONFIG_PATH}) must exist there",
    )
