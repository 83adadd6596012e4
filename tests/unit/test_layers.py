"""The package map in docs/architecture.md is the layer order, and the code keeps it.

The page lists every package and top-level module of `src/docdelta/` with its layer; these
tests read that table (the one place the order is written), so a new module without a row,
a row for a module that is gone, or an import from a lower layer into a higher one fails
here, and the map cannot go stale."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "docdelta"
MAP = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| +(\d+) \| `([\w.]+?)(/|\.py)` \|", re.M)


def layers() -> dict[str, int]:
    """unit (a package's or a top-level module's name) -> its layer, from the page's table."""
    rows = ROW.findall(MAP.read_text())
    assert rows, f"{MAP} has no package map rows"
    return {name: int(layer) for layer, name, _kind in rows}


def unit_of(module: str) -> str:
    """`docdelta.scorecard.stats` -> `scorecard`; `docdelta.wiring` -> `wiring`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where, for every import of docdelta by docdelta,
    lazy ones inside functions included."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        here = unit_of(".".join(rel.parts).removesuffix(".__init__"))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "docdelta":
                if node.module == "docdelta":
                    targets = [f"docdelta.{alias.name}" for alias in node.names]
                else:
                    targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "docdelta"]
            for target in targets:
                there = unit_of(target)
                if target == "docdelta.__version__":
                    there = "__init__"
                if there != here:
                    found[(here, there)].append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
    return found


def test_every_package_and_module_has_one_row_in_the_map() -> None:
    tree = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    tree |= {p.stem for p in PACKAGE.glob("*.py")}
    mapped = set(layers())
    assert sorted(tree - mapped) == [], f"add a row to the package map in {MAP.name}"
    assert sorted(mapped - tree) == [], f"remove the rows of units that are gone from {MAP.name}"


def test_no_import_runs_up_the_layers() -> None:
    order = layers()
    upward = [
        f"{here} (layer {order[here]}) imports {there} (layer {order[there]}): {', '.join(where)}"
        for (here, there), where in sorted(imports().items())
        if order[there] < order[here]
    ]
    assert upward == []


def test_units_of_one_layer_import_each_other_without_a_cycle() -> None:
    order = layers()
    graph: dict[str, set[str]] = defaultdict(set)
    for here, there in imports():
        if order[here] == order[there]:
            graph[here].add(there)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph[start]:
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(u for u in list(graph) if reaches(u, u, {u}))
    assert cycles == []


def test_the_rules_read_the_real_import_graph() -> None:
    """An empty graph would pass every rule above: known imports must be in it."""
    order = layers()
    assert order["cli"] < order["evaluation"] < order["experiment"] < order["scorecard"]
    assert ("cli", "evaluation") in imports()
    assert order["gateway"] > order["sandbox"] and ("sandbox", "gateway") in imports()
