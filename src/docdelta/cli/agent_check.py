"""`docdelta agent-check`: one run of the agent on one task, showing what it received and what
was parsed (`docdelta.improve.agent_check`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docdelta.errors import ExitCode
from docdelta.git import Repo


def add_parser(sub: Any) -> None:
    ac = sub.add_parser(
        "agent-check",
        help="run the agent once on one task in the sandbox; show what it received and what was parsed",
    )
    ac.add_argument("--repo", type=Path, default=Path())
    ac.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    ac.add_argument("--task", help="the task's id (default: the first task file)")
    ac.add_argument(
        "--ref", default="HEAD", help="the commit whose files and instruction files the agent sees"
    )
    ac.add_argument("--agent", default="command", help="the agent, as for `run` (default: command)")
    ac.add_argument("--agent-cmd", help="the command agent's executable and arguments")
    ac.add_argument("--model", help="the model the agent uses (agents that call a model API)")
    ac.add_argument("--timeout", type=float, default=600.0, help="wall-clock seconds for the run")
    ac.add_argument("--sandbox", default="local", choices=("local", "docker"), help="default: local")


def _agent_check(args: argparse.Namespace) -> int:
    from docdelta.improve.agent_check import check_agent, passed, render
    from docdelta.wiring import AgentChoice, SandboxChoice, build_agent

    agent = build_agent(AgentChoice(args.agent, cmd=args.agent_cmd, model=args.model))
    check = check_agent(
        Repo(args.repo),
        args.tasks,
        agent,
        ref=args.ref,
        task_id=args.task,
        sandbox=SandboxChoice(args.sandbox),
        timeout_s=args.timeout,
        environ=os.environ,
    )
    render(check)
    return ExitCode.OK if passed(check) else ExitCode.BAD_INPUT


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"agent-check": _agent_check}
