"""The one prompt every agent gets, in every condition.

It must be byte-identical across conditions: any difference (a path, a condition
name, a hint about what is being measured) would be a confound. It says nothing
about docdelta; it reads like a request from a colleague, plus the answer format
the grader needs. The task text sits under a `## Task` heading and the format under
`## Answer format`; the fake agent finds the question by that heading.
"""

from __future__ import annotations

import json
from typing import Any

from docdelta.agents.models import AgentAnswer
from docdelta.tasks.models import Task

ANSWER_SHAPE: dict[str, str] = {
    "answer": "your answer in a few sentences",
    "commands": "list of shell commands you recommend, exactly as they should be typed",
    "files": "list of repository paths (relative to the repository root) that the answer involves",
    "citations": 'list of {"path": "<file>", "lines": "<start>-<end>"} where the answer is stated',
    "verdict": '"yes" or "no" when the question asks for one, otherwise null',
}
"""The final JSON object, field by field; it matches `models.AgentAnswer`."""

_EXAMPLE = {
    "answer": "...",
    "commands": ["..."],
    "files": ["path/to/file"],
    "citations": [{"path": "path/to/file", "lines": "10-12"}],
    "verdict": None,
}

_KIND_INTRO = {
    "answer": "Answer the question below about this repository. Look at the repository's files to find "
    "the answer; do not change any file.",
    "change": "Make the change requested below in this repository, following its conventions.",
    # Trigger tasks measure what the agent loads for a request; the intro must not hint at it.
    "trigger": "Help with the request below in this repository, following its conventions.",
}


def build_prompt(task: Task) -> str:
    """The prompt for `task`; a pure function of the task, never of the condition."""
    fields = "\n".join(f"- `{key}`: {meaning}" for key, meaning in ANSWER_SHAPE.items())
    return (
        "You are working in a software repository; your current directory is its root.\n"
        f"{_KIND_INTRO[task.kind]}\n\n"
        f"## Task\n\n{task.prompt.strip()}\n\n"
        "## Answer format\n\n"
        "When you are done, end your reply with exactly one JSON object, and nothing after it, "
        "with these fields:\n"
        f"{fields}\n\n"
        f"For example:\n```json\n{json.dumps(_EXAMPLE, indent=2)}\n```\n"
    )


def answer_json_schema() -> dict[str, Any]:
    """JSON Schema of the answer (`docdelta schema answer`): what a command agent prints last.
    The descriptions are the prompt's own, so the schema and what agents are told never differ."""
    schema = AgentAnswer.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["description"] = (
        "The last JSON object an agent prints on stdout; unknown keys are ignored, missing ones are empty."
    )
    for key, meaning in ANSWER_SHAPE.items():
        schema["properties"][key]["description"] = meaning
    return schema
