"""`docdelta agent-check`: run an agent once, on one task, in the sandbox a run uses, and
show both sides of the protocol.

A command agent that fails in every run ends as a scorecard of zeros; this shows, before
any matrix, what the agent received (the prompt, the names of its environment variables,
the files it can see) and what docdelta made of what it printed, so a wrong path, a
missing interpreter or an answer in the wrong shape is seen in seconds.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from docdelta.agents import Agent, AgentContext
from docdelta.agents.command import preflight
from docdelta.agents.models import AgentOutcome, RunStatus
from docdelta.agents.prompt import build_prompt
from docdelta.checkout.seal import seal
from docdelta.config import load_project_config, matcher
from docdelta.errors import TaskError
from docdelta.git import Repo
from docdelta.instructions.detect import instruction_files
from docdelta.sandbox.base import ExecResult, SandboxSpec
from docdelta.tasks.load import load_tasks
from docdelta.wiring import SandboxChoice, build_provider, resolve_keys

SHOWN_OUTPUT = 4000
"""Characters of the agent's stdout and stderr shown (their tails): the answer is at the end."""
SHOWN_FILES = 40
"""Files of the checkout listed by name; the rest are counted."""
_LIST_FILES = "find . -name .git -prune -o -type f -print | sort"


@dataclass(frozen=True)
class AgentCheck:
    """What one run of the agent received and produced."""

    task: str
    source: str
    argv: list[str]
    prompt: str
    env_names: list[str]
    files: list[str]
    host_files: list[str]
    result: ExecResult
    outcome: AgentOutcome


def check_agent(
    repo: Repo,
    tasks_dir: Path,
    agent: Agent,
    *,
    ref: str,
    task_id: str | None,
    sandbox: SandboxChoice,
    timeout_s: float,
    environ: Mapping[str, str],
) -> AgentCheck:
    """Seal `ref` with its own instruction files (a run's `head` condition), start the
    sandbox with the run's provider, check the program starts, run the agent once on the
    task `task_id` (default: the first) and keep everything it saw and printed."""
    sha = repo.resolve(ref)
    config = load_project_config(repo, sha)
    loaded = load_tasks(tasks_dir)
    chosen = next((t for t in loaded if task_id in (None, t.task.id)), None)
    if chosen is None:
        raise TaskError(
            f"--task {task_id}: no task with that id in {tasks_dir}",
            hint="pick one of: " + ", ".join(t.task.id for t in loaded),
        )
    found = matcher(config)
    with tempfile.TemporaryDirectory(prefix="docdelta-agent-check-") as scratch:
        sealed = seal(
            repo,
            sha,
            instruction_files(repo, sha, found),
            Path(scratch) / "checkout",
            found,
            config.checkout_strip,
        )
        built = build_provider(
            sandbox,
            repo=repo,
            private={"tasks directory": tasks_dir, "workdir": Path(scratch)},
            config=config,
            agent=agent,
            keys=resolve_keys(config.gateway.upstreams, environ),
        )
        provider = built.provider
        try:
            with provider.create(sealed.path, SandboxSpec(network=agent.network)) as box:
                preflight(agent, box)
                prompt = build_prompt(chosen.task)
                ctx = AgentContext(seed=0, timeout_s=timeout_s)
                invocation = agent.invocation(prompt, box, ctx)
                env = box.exec(["env"], env=invocation.env, timeout=60.0).stdout.decode(errors="replace")
                files = box.exec(["sh", "-c", _LIST_FILES], timeout=60.0).stdout.decode(errors="replace")
                outcome, result = agent.execute(prompt, box, ctx)
        finally:
            provider.close()
    return AgentCheck(
        task=chosen.task.id,
        source=sha,
        argv=invocation.argv,
        prompt=prompt,
        env_names=sorted({line.split("=", 1)[0] for line in env.splitlines() if "=" in line}),
        files=[line.removeprefix("./") for line in files.splitlines() if line],
        host_files=sorted(str(path) for path in built.agent_files),
        result=result,
        outcome=outcome,
    )


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _shown(text: str) -> str:
    """Agent output and file names on the terminal: control characters (an escape sequence
    could rewrite the screen or the title) become visible `\\xNN` escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def render(check: AgentCheck, write: Callable[[str], None] = print) -> None:
    """The report, in the order the protocol runs: what went in, then what came out; every
    line passes `_shown`, since the agent wrote most of it."""

    def out(text: str) -> None:
        write(_shown(text))

    out(f"== task {check.task} at {check.source[:12]}")
    out(f"== command: {json.dumps(check.argv)}")
    out("== host files shown read-only: " + (", ".join(check.host_files) or "none"))
    out(
        f"== environment variable names ({len(check.env_names)}; values not shown): "
        + " ".join(check.env_names)
    )
    listed = check.files[:SHOWN_FILES]
    more = len(check.files) - len(listed)
    out(f"== files in the working directory ({len(check.files)}):")
    out("\n".join(f"   {name}" for name in listed) + (f"\n   ... and {more} more" if more else ""))
    out("== prompt (on stdin):")
    out(check.prompt)
    out(f"== exit code: {check.result.exit_code}; {check.result.duration_s:.1f}s")
    for name, data in (("stdout", check.result.stdout), ("stderr", check.result.stderr)):
        text = data.decode("utf-8", errors="replace")
        cut = f" (last {SHOWN_OUTPUT} of {len(text)} characters)" if len(text) > SHOWN_OUTPUT else ""
        out(f"== {name}{cut}:\n{text[-SHOWN_OUTPUT:]}")
    out(f"== status: {check.outcome.status.value}")
    if check.outcome.answer is not None:
        out("== parsed answer:")
        out(check.outcome.answer.model_dump_json(indent=2))
    if check.outcome.error:
        out(f"== problem: {check.outcome.error}")


def passed(check: AgentCheck) -> bool:
    return check.outcome.status is RunStatus.ok
