"""Write the generated parts of docs/: the Action's inputs and outputs (from action.yml), the
CLI reference (from the argparse parser, exit codes first) and the `.docdelta.yml` reference
(from the pydantic schema).

Each generated part sits between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`
in its page; the prose around it is hand-written. `python scripts/gen_docs.py` rewrites the
parts; `--check` exits 1 naming every stale page (tests/unit/test_docs_generated.py runs it,
so a new flag, input or config field cannot land undocumented).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from docdelta.cli.main import _parser
from docdelta.config import ProjectConfig
from docdelta.errors import ExitCode
from docdelta.gateway.config import DEFAULT_PRICES

Parser = argparse.ArgumentParser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAX_DEFAULT = 60
"""Longer defaults (the upstream list, the price table) are tables of their own, not a cell."""
WIDTH = "100"
"""argparse wraps help to the terminal's width: fixed here so the page is the same everywhere."""


def _cell(text: str) -> str:
    """One markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def action_inputs() -> str:
    spec = yaml.safe_load((ROOT / "action.yml").read_text())
    rows = ["| input | default | what it does |", "| --- | --- | --- |"]
    for name, field in spec["inputs"].items():
        default = field.get("default", "")
        shown = f"`{default}`" if default != "" else ("*required*" if field.get("required") else "")
        rows.append(f"| `{name}` | {_cell(shown)} | {_cell(field.get('description', ''))} |")
    rows += ["", "| output | what it holds |", "| --- | --- |"]
    for name, field in spec.get("outputs", {}).items():
        rows.append(f"| `{name}` | {_cell(field.get('description', ''))} |")
    return "\n".join(rows)


def _exit_codes() -> Iterator[tuple[str, int, str]]:
    """(name, value, docstring) of every member of `ExitCode`, read from the source: attribute
    docstrings exist only there."""
    tree = ast.parse((ROOT / "src/docdelta/errors.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == ExitCode.__name__)
    docs: dict[str, str] = {}
    for node, nxt in zip(cls.body, [*cls.body[1:], None], strict=True):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            is_doc = isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
            docs[node.targets[0].id] = str(nxt.value.value) if is_doc else "Done."  # type: ignore[union-attr]
    for code in ExitCode:
        yield code.name, code.value, docs[code.name]


def cli_reference() -> str:
    os.environ["COLUMNS"] = WIDTH
    parser = _parser()
    out = ["### Exit codes", "", "| code | name | meaning |", "| ---: | --- | --- |"]
    out += [f"| {value} | `{name}` | {_cell(doc)} |" for name, value, doc in _exit_codes()]
    out += ["", "### Commands", ""]

    def walk(p: Parser, path: list[str]) -> Iterator[tuple[list[str], Parser]]:
        yield path, p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*path, name])

    for path, p in walk(parser, []):
        if not path:
            continue
        out += [f"#### `docdelta {' '.join(path)}`", "", "```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(out).rstrip()


def _fields(schema: dict[str, Any], defs: dict[str, Any], prefix: str) -> Iterator[tuple[str, str, str, str]]:
    for name, prop in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        target = prop
        ref = prop.get("$ref") or next((a.get("$ref") for a in prop.get("allOf", []) if "$ref" in a), None)
        if ref:
            target = defs[ref.split("/")[-1]]
        kind = _type(prop, defs)
        default = json.dumps(prop["default"]) if "default" in prop else ""
        if len(default) > MAX_DEFAULT:
            default = "(built in, see below)" if ref else "(built in)"
        desc = prop.get("description") or (target.get("description", "") if ref else "")
        yield path, kind, default, desc
        if ref and target.get("type") == "object" and "properties" in target:
            yield from _fields(target, defs, f"{path}.")


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in prop:
        target = defs[prop["$ref"].split("/")[-1]]
        if "enum" in target:
            return " \\| ".join(f"`{v}`" for v in target["enum"])
        return "object"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_type(p, defs) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}), defs)}"
    if kind == "object" and "additionalProperties" in prop and isinstance(prop["additionalProperties"], dict):
        return f"map of {_type(prop['additionalProperties'], defs)}"
    return str(kind)


def config_reference() -> str:
    schema = ProjectConfig.model_json_schema()
    defs = schema.get("$defs", {})
    rows = ["| field | type | default | what it does |", "| --- | --- | --- | --- |"]
    for path, kind, default, desc in _fields(schema, defs, ""):
        shown = f"`{_cell(default)}`" if default and not default.startswith("(") else default
        rows.append(f"| `{path}` | {kind} | {shown} | {_cell(desc)} |")
    return "\n".join(rows)


def price_table() -> str:
    rows = [
        "| model (name prefix) | input | output | cache read | cache write |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for model, price in sorted(DEFAULT_PRICES.items()):
        cells = (price.input, price.output, price.cache_read, price.cache_write)
        rows.append(f"| `{model}` | " + " | ".join(f"{c:g}" for c in cells) + " |")
    return "\n".join(rows)


PARTS: dict[str, tuple[str, Callable[[], str]]] = {
    "action-inputs": ("action.md", action_inputs),
    "cli-reference": ("cli.md", cli_reference),
    "config-reference": ("configuration.md", config_reference),
    "price-table": ("agents.md", price_table),
}


def render(page_text: str, name: str, body: str) -> str:
    begin, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
    note = "<!-- written by scripts/gen_docs.py: edit the source, then run it -->"
    block = f"{begin}\n{note}\n\n{body}\n\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(page_text):
        raise SystemExit(f"docs: {name}'s markers are missing from its page; add {begin} ... {end}")
    return pattern.sub(lambda _: block, page_text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for name, (page, make) in PARTS.items():
        path = DOCS / page
        old = path.read_text()
        new = render(old, name, make())
        if new != old:
            stale.append(f"docs/{page} ({name})")
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        pages = ", ".join(stale)
        print(f"stale generated docs: {pages}; run: python scripts/gen_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
