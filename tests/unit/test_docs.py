"""The documentation a newcomer reads: the README stays a front page, the generated reference
pages match their sources, and every link between pages lands on a file and a heading."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from docdelta.agents import agent_class, agent_names
from docdelta.agents.base import GatewayAgent
from docdelta.tasks.models import Task

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
README_MAX_LINES = 200


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prose(path: Path) -> list[str]:
    """The lines outside code blocks: links and headings in examples are not the page's."""
    out, fenced = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_anchor(line.lstrip("#")) for line in _prose(path) if re.match(r"^#{1,6} ", line)}


def test_the_generated_reference_pages_match_action_yml_the_cli_parser_and_the_config_schema() -> None:
    assert _gen_docs().main(["--check"]) == 0, "run: python scripts/gen_docs.py"


def test_a_new_cli_flag_makes_the_cli_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _gen_docs()
    reference = gen.cli_reference()
    assert "#### `docdelta run`" in reference and "| 2 | `BAD_INPUT` |" in reference
    monkeypatch.setitem(gen.PARTS, "cli-reference", ("cli.md", lambda: reference + "\n--new-flag"))
    assert gen.main(["--check"]) == 1


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_between_pages_lands_on_a_file_and_a_heading(page: Path) -> None:
    broken = []
    for line in _prose(page):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{target}: no file {dest.relative_to(ROOT)}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_the_task_pages_example_is_a_valid_task_with_both_shapes_of_gold_command() -> None:
    """docs/tasks.md says a `commands` item is a string or a list of alternatives: its example
    shows both, and loads as the schema reads it."""
    page = (ROOT / "docs" / "tasks.md").read_text()
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    task = Task.model_validate(yaml.safe_load(example))
    assert [type(c) for c in task.gold.commands] == [str, list]
    assert "## How an answer is scored" in page


def test_the_power_the_docs_state_for_the_example_workflows_is_for_the_repeats_they_ship() -> None:
    """The README's headline figures are for `repeats: auto`; the workflows `init` copies run a
    fixed number, so the README and action.md say what that number detects. A change to the
    examples' repeats must move those sentences (and the bench rows they quote) with it."""
    shipped = set()
    for path in sorted((ROOT / "examples" / "workflows").glob("*.yml")):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for step in job["steps"]:
                repeats = (
                    (step.get("with") or {}).get("repeats")
                    if "docdelta/docdelta" in step.get("uses", "")
                    else None
                )
                if isinstance(repeats, int) and path.name != "docdelta-matrix.yml":
                    shipped.add(repeats)
    assert len(shipped) == 1, f"the evaluating example workflows disagree on repeats: {shipped}"
    (n,) = shipped
    readme = " ".join((ROOT / "README.md").read_text().split())
    action = " ".join((ROOT / "docs" / "action.md").read_text().split())
    assert f"The example workflows (and the one `docdelta init` writes) run a fixed `repeats: {n}`" in readme
    assert f"**`repeats: {n}` is cheap, not sensitive.** The examples run a fixed {n} repeats" in action


def test_the_agents_table_states_each_model_agents_default_model() -> None:
    """A user switching `agent:` (say to codex, for AGENTS.md) must know which model it runs
    and so what it costs: each model agent's row names its default, or says it has none."""
    rows = {
        m.group(1): line
        for line in (ROOT / "docs" / "agents.md").read_text().splitlines()
        if (m := re.match(r"\| `(\w+)` \|", line))
    }
    for name in agent_names():
        kind = agent_class(name)
        if not issubclass(kind, GatewayAgent):
            continue
        default = kind.default_model
        wanted = f"model `{default}` unless `--model`/`model:`" if default else "no default model"
        assert wanted in rows[name], (name, wanted)
