"""The example workflows as tests/e2e/test_act.py runs them under act: each shipped file
with only the edits a run off GitHub cannot do without (`as_run`), and the walk that lists
every difference between two workflows (`edits`), which `tests/unit/test_act_workflows.py`
holds to the allow-list `ALLOWED`.

Allowed, and nothing else:
* `uses: docdelta/docdelta@v0` -> `./<the action's local copy>` (no registry here);
* an actions/checkout step's `ref` removed: act emulates actions/checkout by copying its
  workdir (which holds every commit) only for a checkout of the current ref;
* `ca-bundle` added to each docdelta step: the fake GitHub's certificate is from a CA made
  for the tests, which the Action trusts only when told to.
The API key is a secret's value (`act -s`), not an edit of the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / "examples" / "workflows"
ACTION = "docdelta/docdelta@v0"
CA_FILE = "github-ca.pem"
"""The `ca-bundle` every docdelta step gets: a file of the repository under test."""

_STEP = r"jobs\.[\w-]+\.steps\[\d+\]"
ALLOWED = (
    re.compile(rf"{_STEP}\.uses: '{re.escape(ACTION)}' -> '\./docdelta-action-[0-9a-f]+'"),
    re.compile(rf"{_STEP}\.with\.ref: removed"),
    re.compile(rf"{_STEP}\.with\.ca-bundle: added '{re.escape(CA_FILE)}'"),
)
"""Every difference `edits` may report between a shipped workflow and the one act runs."""


def load(text: str) -> dict[str, Any]:
    """A workflow as data; PyYAML reads the key `on` as the boolean True, put back here."""
    doc: dict[Any, Any] = yaml.safe_load(text)
    return {("on" if key is True else str(key)): value for key, value in doc.items()}


def as_run(shipped: str, action_dir: str) -> str:
    """The workflow text act runs for the shipped workflow text `shipped`."""
    doc = load(shipped)
    for job in doc["jobs"].values():
        for step in job["steps"]:
            uses = str(step.get("uses", ""))
            if uses.startswith("actions/checkout"):
                step.get("with", {}).pop("ref", None)
            elif uses == ACTION:
                step["uses"] = f"./{action_dir}"
                step.setdefault("with", {})["ca-bundle"] = CA_FILE
    return yaml.safe_dump(doc, sort_keys=False)


def edits(shipped: Any, run: Any, where: str = "") -> Iterator[str]:
    """Every difference from `shipped` to `run`, one line each: `<path>: removed`,
    `<path>: added <value>` or `<path>: <old> -> <new>` (values as Python reprs)."""
    if isinstance(shipped, dict) and isinstance(run, dict):
        for key in shipped.keys() | run.keys():
            path = f"{where}.{key}" if where else str(key)
            if key not in run:
                yield f"{path}: removed"
            elif key not in shipped:
                yield f"{path}: added {run[key]!r}"
            else:
                yield from edits(shipped[key], run[key], path)
    elif isinstance(shipped, list) and isinstance(run, list) and len(shipped) == len(run):
        for index, (old, new) in enumerate(zip(shipped, run, strict=True)):
            yield from edits(old, new, f"{where}[{index}]")
    elif shipped != run or type(shipped) is not type(run):
        yield f"{where}: {shipped!r} -> {run!r}"


def forbidden(shipped: str, run: str) -> list[str]:
    """The differences between two workflow texts that `ALLOWED` does not allow."""
    return sorted(e for e in edits(load(shipped), load(run)) if not any(a.fullmatch(e) for a in ALLOWED))
