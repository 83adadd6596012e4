"""Task files: load and validate them, check their gold citations, refuse unreviewed gold.

A task's gold answer is only as good as its citations, so every citation is checked
against the source commit before anything runs: a quote that no longer stands at
its lines means the gold (or the docs) moved, and scoring against it would lie.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docdelta.config import MAX_INPUT_CHARS, load_model
from docdelta.errors import TaskError
from docdelta.git import Repo
from docdelta.models import GoldCitation, Task

TASK_SUFFIXES = (".yaml", ".yml", ".json")
_SCHEMA_HINT = "run `docdelta schema task` for the task file format"


@dataclass(frozen=True)
class LoadedTask:
    task: Task
    path: Path
    sha256: str
    """Of the file's bytes: part of the experiment's identity in the manifest."""


def _load_one(path: Path) -> LoadedTask:
    size = path.stat().st_size
    if size > MAX_INPUT_CHARS:  # refused before reading: a huge file must not fill memory
        raise TaskError(
            f"{path} is {size:,} bytes, over the {MAX_INPUT_CHARS:,} a task file may have", hint=_SCHEMA_HINT
        )
    data = path.read_bytes()
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path} is not UTF-8 text", hint=_SCHEMA_HINT) from exc
    task = load_model(
        text, Task, source=str(path), error=TaskError, hint=_SCHEMA_HINT, is_json=path.suffix == ".json"
    )
    return LoadedTask(task=task, path=path, sha256=hashlib.sha256(data).hexdigest())


def load_tasks(directory: Path) -> list[LoadedTask]:
    """Every `*.yaml|*.yml|*.json` directly in `directory`, sorted by file name."""
    paths = sorted(p for p in directory.glob("*") if p.suffix in TASK_SUFFIXES and p.is_file())
    if not paths:
        state = "does not exist" if not directory.exists() else "holds no *.yaml, *.yml or *.json files"
        raise TaskError(
            f"task directory {directory} {state}",
            hint="write tasks to .docdelta/tasks/<id>.yaml (or pass --tasks DIR); " + _SCHEMA_HINT,
        )
    loaded = [_load_one(p) for p in paths]
    seen: dict[str, Path] = {}
    for item in loaded:
        first = seen.setdefault(item.task.id, item.path)
        if first != item.path:
            raise TaskError(
                f"task id {item.task.id!r} is used by both {first} and {item.path}",
                hint="task ids must be unique; rename one of them",
            )
    return loaded


def _norm(text: str) -> str:
    return " ".join(text.split())


def _find_quote(lines: list[str], quote: str) -> str | None:
    """The smallest line range where the quote does stand, so the error can suggest the fix."""
    for end in range(len(lines)):
        window = ""
        for start in range(end, -1, -1):
            window = _norm(f"{lines[start]} {window}")
            if quote in window:
                return f"{start + 1}" if start == end else f"{start + 1}-{end + 1}"
            if len(window) > len(quote) + len(lines[end]) + 1:
                break  # any match ending on line `end` would already be inside the window
    return None


def _check_citation(text: str | None, cite: GoldCitation) -> str | None:
    """None if the quote stands at the cited lines, else what is there instead."""
    if text is None:
        return "the file does not exist at the source commit"
    lines = text.splitlines()
    start, end = cite.lines.start, cite.lines.end
    if end > len(lines):
        return f"the file has only {len(lines)} lines"
    quote = _norm(cite.quote)
    cited = "\n".join(lines[start - 1 : end])
    if quote in _norm(cited):
        return None
    found = _find_quote(lines, quote)
    moved = f" (the quote is at lines {found})" if found else ""
    shown = cited if len(cited) <= 300 else cited[:300] + "..."
    return f"those lines read {shown!r}{moved}"


def check_citations(tasks: Sequence[LoadedTask], repo: Repo, source_sha: str) -> None:
    """Every gold citation's quote must stand (whitespace-normalized) at its lines in `source_sha`."""
    blobs = {e.path: e.oid for e in repo.tree(source_sha) if e.is_blob}
    texts: dict[str, str | None] = {}
    for item in tasks:
        for i, cite in enumerate(item.task.gold_citations):
            if cite.path not in texts:
                oid = blobs.get(cite.path)
                texts[cite.path] = repo.read_blob(oid).decode(errors="replace") if oid else None
            problem = _check_citation(texts[cite.path], cite)
            if problem:
                raise TaskError(
                    f"task {item.task.id!r} ({item.path}): gold_citations[{i}] {cite.path}:{cite.lines} "
                    f"quotes {cite.quote!r}, but {problem} at {source_sha[:12]}",
                    hint="update the citation's lines or quote (and re-review the gold answer)",
                )


def require_reviewed(tasks: Sequence[LoadedTask], allow_unreviewed: bool) -> None:
    """Refuse tasks whose gold nobody has reviewed, unless the user opts in."""
    unreviewed = [f"{t.task.id} ({t.path})" for t in tasks if not t.task.reviewed]
    if unreviewed and not allow_unreviewed:
        raise TaskError(
            f"unreviewed gold in {len(unreviewed)} task(s): {', '.join(unreviewed)}",
            hint="review each gold answer and set `reviewed: true`, or pass --allow-unreviewed to run anyway",
        )


def task_json_schema() -> dict[str, Any]:
    """JSON Schema of task files, for editors (`docdelta schema task`)."""
    schema = Task.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return _accept_line_shorthands(schema)


_LINE_SHORTHANDS = [
    {"type": "integer", "minimum": 1},
    {"type": "string", "pattern": r"^\s*L?\d+\s*(?:[-:]\s*L?\d+)?\s*$"},
    {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2, "maxItems": 2},
]


def _accept_line_shorthands(schema: dict[str, Any]) -> dict[str, Any]:
    """Task files may write `lines: 12` or `"12-14"`; the generated schema only knows the
    object form, so an editor would flag valid files. Widen every LineRange reference."""
    ref = "#/$defs/LineRange"
    widened = {"anyOf": [{"$ref": ref}, *_LINE_SHORTHANDS]}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if node.get("$ref") == ref and len(node) == 1:
                return widened
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result
