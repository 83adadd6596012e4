"""`docdelta schema`: the JSON Schemas of task files and of an agent's final answer, for editors."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from docdelta.errors import ExitCode


def add_parser(sub: Any) -> None:
    s = sub.add_parser("schema", help="print a JSON Schema, for editors")
    s.add_argument("what", choices=("task", "answer"), help="task: task files; answer: an agent's final JSON")


def _schema(args: argparse.Namespace) -> int:
    from docdelta.agents.prompt import answer_json_schema
    from docdelta.tasks.load import task_json_schema

    print(json.dumps(answer_json_schema() if args.what == "answer" else task_json_schema(), indent=2))
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"schema": _schema}
