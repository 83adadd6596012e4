"""Task files: load and validate them, check their gold citations, refuse unreviewed gold.

A task's gold answer is only as good as its citations. A citation is a quote in a file,
located in each condition's checkout (`docdelta.tasks.quotes`), so one standing in no condition
is refused before anything runs: the gold (or the docs) moved, and scoring against it
would lie.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from docdelta.config import MAX_INPUT_CHARS, load_model
from docdelta.errors import ConfigError, TaskError
from docdelta.git import Repo
from docdelta.tasks.models import GoldCitation, Task
from docdelta.tasks.quotes import locate, read_inside

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


def export_tasks(repo: Repo, sha: str, path: str, dest: Path) -> Path:
    """The task files under `path` as committed at `sha` (the trusted base), written to `dest`:
    never as a pull request left them in the checkout."""
    entries = [e for e in repo.tree(sha, [path]) if e.is_blob and not e.is_symlink]
    if not entries:
        raise ConfigError(
            f"no task files under {path}/ at {sha[:12]}",
            hint="commit reviewed task files on the base branch, or set the `tasks` input",
        )
    oids = {e.oid: [x for x in entries if x.oid == e.oid] for e in entries}
    for oid, data in repo.read_blobs(list(oids)):
        for e in oids[oid]:
            target = dest / Path(e.path).relative_to(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return dest


def select_tasks(loaded: Sequence[LoadedTask], ids: Sequence[str], directory: Path) -> list[LoadedTask]:
    """Only the tasks named by `ids` (`--task`, repeatable), in file order; every task when
    `ids` is empty. A name that is no task's id is refused with the ids there are: a typo
    must not run nothing, or everything."""
    if not ids:
        return list(loaded)
    known = {item.task.id for item in loaded}
    unknown = [i for i in dict.fromkeys(ids) if i not in known]
    if unknown:
        raise TaskError(
            f"--task {', '.join(unknown)}: no task file in {directory} has that id",
            hint=f"the task ids there are: {', '.join(sorted(known))}",
        )
    wanted = set(ids)
    return [item for item in loaded if item.task.id in wanted]


def citation_holders(cite: GoldCitation, checkouts: Mapping[str, Path]) -> list[str]:
    """The conditions in whose checkout some choice of `cite` stands (its quote is in that file)."""

    def stands(checkout: Path) -> bool:
        texts = ((read_inside(checkout, c.path), c.quote) for c in cite.choices())
        return any(text is not None and locate(text, quote) is not None for text, quote in texts)

    return [name for name, checkout in checkouts.items() if stands(checkout)]


def check_citations(
    tasks: Sequence[LoadedTask], checkouts: Mapping[str, Path], source_sha: str
) -> dict[str, str]:
    """The tasks that cannot apply, by id, with why: a gold citation whose quote stands in no
    condition's checkout (a past PR's conditions predate a rule written later, or `--source`
    names a commit whose files no condition holds) would score every correct answer as a
    miss, so such a task is skipped and listed in the scorecard. When no task applies the
    run is refused, naming the first. A condition without a quote is fine: there the item
    is unattainable, and the scorecard shows so."""
    inapplicable: dict[str, str] = {}
    for item in tasks:
        for i, cite in enumerate(item.task.gold_citations):
            if citation_holders(cite, checkouts):
                continue
            choices = " or ".join(f"{c.path}: {c.quote!r}" for c in cite.choices())
            inapplicable[item.task.id] = f"gold_citations[{i}] quotes {choices}"
            break
    if tasks and len(inapplicable) == len(tasks):
        first = tasks[0]
        raise TaskError(
            f"task {first.task.id!r} ({first.path}): {inapplicable[first.task.id]}, but the quote stands "
            f"in no condition ({', '.join(checkouts)}) of source {source_sha[:12]}"
            + (f", and neither do those of the other {len(tasks) - 1} task(s)" if len(tasks) > 1 else ""),
            hint="fix the quote to match the instruction files (and re-review the gold answer), "
            "or pick a --source whose files hold it",
        )
    return inapplicable


def require_reviewed(tasks: Sequence[LoadedTask], allow_unreviewed: bool) -> None:
    """Refuse tasks whose gold nobody has reviewed, unless the user opts in."""
    unreviewed = [f"{t.task.id} ({t.path})" for t in tasks if not t.task.reviewed]
    if unreviewed and not allow_unreviewed:
        raise TaskError(
            f"unreviewed gold in {len(unreviewed)} task(s): {', '.join(unreviewed)}",
            hint="review each gold answer and set `reviewed: true`, or pass --allow-unreviewed to run anyway",
        )


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (a prompt) as `|` blocks, so the reviewer edits plain text."""


def _block(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _block)


def unreviewed_yaml(task: Task) -> str:
    """A drafted task as a task file's YAML, `reviewed: false` spelled out (it is the default,
    so a plain dump would leave out the one field a reviewer must change)."""
    data = task.model_dump(mode="json", exclude_defaults=True)
    data["reviewed"] = False
    return yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True)


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
