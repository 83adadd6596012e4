"""Instruction usage: what changed instruction lines name, and which runs of each arm used it.

The docs diff comes from a real two-commit repository sealed into a workdir by
`planning.prepare` (the layout `docdelta report` reads); runs are real result models."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from factories import result
from gitrepo import GitRepo
from unidiff.patch import PatchSet

from docdelta.agents.fake import FakeAgent
from docdelta.agents.models import AgentAnswer, AgentMetrics, CommandRun, RunStatus
from docdelta.config import load_project_config
from docdelta.experiment.plan import ExperimentRequest, prepare
from docdelta.git import Repo
from docdelta.report import render_json, render_markdown
from docdelta.report.html import render_html
from docdelta.results.models import RunResult
from docdelta.results.store import ResultStore
from docdelta.scorecard.instruction_usage import docs_diff, read_docs, references, tally
from docdelta.scorecard.models import InstructionRef
from docdelta.scorecard.summarize import summarize

BASE_DOCS = """\
# Agents
- Tests: `python setup.py test`.
- Be nice.
"""
HEAD_DOCS = """\
# Agents
- Run `make check` before you commit (see docs/testing.md and e.g. the Makefile).
- Be nice.
- Tables live in `pricebook/tables.py` and `tests/`; and/or ask in https://example.invalid/x.py.

```sh
$ ruff check src/
# a comment, not a command
```
"""
TASK = """\
id: t
prompt: How do I run the tests?
gold:
  commands: ["make check"]
reviewed: true
"""


def run(
    condition: str, repeat: int, *, ran: Sequence[str] = (), read: Sequence[str] = (), **answer: object
) -> RunResult:
    """A graded run that ran `ran`, read `read` and answered with `answer` fields."""
    r = result("t", condition, 1.0, repeat)
    metrics = AgentMetrics(commands=[CommandRun(command=c, exit_code=0) for c in ran], files_read=list(read))
    outcome = r.outcome.model_copy(update={"metrics": metrics, "answer": AgentAnswer.model_validate(answer)})
    return r.model_copy(update={"outcome": outcome})


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[ResultStore, GitRepo]:
    """A workdir prepared by the real runner from a repo whose AGENTS.md changed at HEAD."""
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"README.md": "# proj\n", "AGENTS.md": BASE_DOCS, ".docdelta/tasks/t.yaml": TASK})
    repo.commit({"AGENTS.md": HEAD_DOCS})
    store = ResultStore(tmp_path / "work")
    git_repo = Repo(repo.path)
    exp = prepare(
        git_repo,
        ExperimentRequest(base="HEAD~1", head="HEAD", tasks_dir=repo.path / ".docdelta/tasks", repeats=2),
        config=load_project_config(git_repo, "HEAD~1"),
        store=store,
        agent=FakeAgent(),
        sandbox="local",
    )
    assert exp is not None
    return store, repo


def _refs(store: ResultStore) -> list[InstructionRef]:
    manifest, detection = store.read_manifest(), store.read_detection()
    assert manifest is not None and detection is not None
    return read_docs(store.workdir, manifest, detection)


# ---------------------------------------------------------------- extraction
def test_refs_of_the_real_docs_diff_sit_on_the_lines_git_diff_shows(
    sealed: tuple[ResultStore, GitRepo],
) -> None:
    store, repo = sealed
    refs = _refs(store)
    found = {(at.change, at.line, r.kind, r.ref) for r in refs for at in r.lines}
    assert found == {
        ("removed", 2, "command", "python setup.py test"),
        ("added", 2, "command", "make check"),
        ("added", 2, "path", "docs/testing.md"),
        ("added", 2, "path", "Makefile"),
        ("added", 4, "path", "pricebook/tables.py"),
        ("added", 4, "path", "tests/"),
        ("added", 7, "command", "ruff check src/"),
    }
    # every line number is one git itself reports for that added or removed line
    patch = PatchSet(repo.git("diff", "HEAD~1", "HEAD", "--", "AGENTS.md"))
    git_lines = {
        (
            "added" if ln.is_added else "removed",
            ln.target_line_no if ln.is_added else ln.source_line_no,
        ): ln.value
        for hunk in patch[0]
        for ln in hunk
        if ln.is_added or ln.is_removed
    }
    for at in (at for r in refs for at in r.lines):
        assert at.file == "AGENTS.md"
        assert git_lines[(at.change, at.line)].strip() == at.text


def test_no_docs_without_a_base_arm_or_without_the_checkouts(sealed: tuple[ResultStore, GitRepo]) -> None:
    store, _ = sealed
    manifest, detection = store.read_manifest(), store.read_detection()
    assert manifest is not None and detection is not None
    no_base = manifest.model_copy(update={"conditions": [c for c in manifest.conditions if c.name != "base"]})
    assert read_docs(store.workdir, no_base, detection) == []
    assert read_docs(store.workdir / "elsewhere", manifest, detection) == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "Run `uv run pytest -q` then `$ make lint`.",
            [("command", "uv run pytest -q"), ("command", "make lint")],
        ),
        (
            "Edit `src/app/main.py` or `pyproject.toml`.",
            [("path", "src/app/main.py"), ("path", "pyproject.toml")],
        ),
        ("Never pass `--force`; see ``a `b` c``.", [("command", "a `b` c")]),
        (
            "Use the Dockerfile and ./scripts/run.sh, not *.cfg files.",
            [("path", "Dockerfile"), ("path", "./scripts/run.sh")],
        ),
        ("Read/write i.e. e.g. Python 3.11 and/or v1.2 at https://x.invalid/a.py", []),
        ("Keep `docs/*.md` short.", [("path", "docs/*.md")]),
        # a bold path is the same file as its code span, not a second one named `**docs/api.md**`
        (
            "- **docs/api.md**: see `docs/api.md`, and *docs/guide.md*.",
            [("path", "docs/api.md"), ("path", "docs/guide.md")],
        ),
        ("**AGENTS.md** rules; match **/*.py", [("path", "AGENTS.md"), ("path", "**/*.py")]),
    ],
)
def test_what_a_line_names(line: str, expected: list[tuple[str, str]]) -> None:
    assert references(line) == expected


def test_only_shell_code_blocks_hold_commands() -> None:
    head = "intro\n```python\nimport os\n```\n```console\n$ make docs\n```\n"
    refs = docs_diff([("CLAUDE.md", "intro\n", head)])
    assert [(at.line, r.kind, r.ref) for r in refs for at in r.lines] == [(6, "command", "make docs")]


# --------------------------------------------------------------------- tally
def test_a_command_counts_when_its_words_were_run_or_answered_in_order() -> None:
    [ref] = docs_diff([("AGENTS.md", "", "Run `make check`.\n")])
    runs = [
        run("head", 1, ran=["bash -lc 'cd repo && make check -j2'"]),
        run("head", 2, commands=["make check"]),
        run("head", 3, ran=["make checkout", "check make"]),
        run("base", 1, ran=["make test"]),
    ]
    [counted] = tally([ref], runs, ["base", "head", "none"])
    assert {c: (a.used, a.runs) for c, a in counted.arms.items()} == {
        "base": (0, 1),
        "head": (2, 3),
        "none": (0, 0),
    }


def test_a_path_counts_when_read_named_cited_or_mentioned_in_a_command() -> None:
    refs = docs_diff([("AGENTS.md", "", "See `pricebook/tables.py` and `docs/`.\n")])
    runs = [
        run("head", 1, read=["/workspace/repo/pricebook/tables.py"]),
        run("head", 2, citations=[{"path": "pricebook/tables.py", "lines": "3"}]),
        run("head", 3, ran=["python -m pytest docs/test_x.py"]),
        run("head", 4, files=["other/tables.py", "pricebook/tables.pyc"]),
    ]
    tables, docs = tally(refs, runs, ["head"])
    assert (tables.ref, tables.arms["head"].used) == ("pricebook/tables.py", 2)
    assert (docs.ref, docs.arms["head"].used) == ("docs/", 1)


def test_fisher_p_compares_head_with_base() -> None:
    [ref] = docs_diff([("AGENTS.md", "", "Run `make check`.\n")])
    runs = [run("head", i, commands=["make check"]) for i in range(1, 6)]
    runs += [run("base", i) for i in range(1, 6)]
    [counted] = tally([ref], runs, ["base", "head"])
    assert counted.p_value == pytest.approx(2 / 252)  # 5/5 vs 0/5, two-sided Fisher


# -------------------------------------------------------------------- report
def test_scorecard_shows_per_changed_line_who_used_what(sealed: tuple[ResultStore, GitRepo]) -> None:
    store, _ = sealed
    manifest, detection = store.read_manifest(), store.read_detection()
    assert manifest is not None and detection is not None
    runs = [
        run("head", 1, ran=["make check"]),
        run("head", 2, commands=["make check"]),
        run("base", 1, commands=["python setup.py test"]),
        run("base", 2, ran=["pytest"]),
        run("none", 1),
        run("none", 2),
        result("t", "head", None, 3, status=RunStatus.infra_error),
    ]
    s = summarize(manifest, detection, runs, docs=_refs(store))
    md = render_markdown(s)
    section = md.split("**Instruction usage**", 1)[1].split("**Confounds**", 1)[0]
    assert (
        "- `make check` (added at AGENTS.md:2): base 0/2 · head 2/2 · none 0/2 (head vs base Fisher p = 0.33)"
        in section
    )
    assert "- `python setup.py test` (removed at AGENTS.md:2): base 1/2 · head 0/2 · none 0/2" in section
    # lines no run used are one line, not a list of 0/2 · 0/2 · 0/2
    unused = next(line for line in section.splitlines() if line.startswith("- never used in any run"))
    assert unused.endswith(", `ruff check src/` (AGENTS.md:7)")
    assert "- `ruff check src/` (added" not in section


def test_scorecard_has_no_usage_section_without_docs(sealed: tuple[ResultStore, GitRepo]) -> None:
    store, _ = sealed
    manifest, detection = store.read_manifest(), store.read_detection()
    assert manifest is not None and detection is not None
    assert "Instruction usage" not in render_markdown(summarize(manifest, detection, [run("head", 1)]))


def test_a_renumbered_list_item_is_unchanged() -> None:
    """An item inserted at the top of a numbered list renumbers every item below it: those
    rules did not change, and only the new one is added."""
    base = "# Rules\n1. Run `make check`.\n2) Never edit `gen/`.\n"
    head = "# Rules\n1. Run `make lint` first.\n2. Run `make check`.\n3) Never edit `gen/`.\n"
    refs = docs_diff([("AGENTS.md", base, head)])
    assert {(at.change, at.line, r.ref) for r in refs for at in r.lines} == {("added", 2, "make lint")}
    # a list item whose text changed is still a change
    edited = docs_diff([("AGENTS.md", base, base.replace("make check", "make test"))])
    assert {(at.change, r.ref) for r in edited for at in r.lines} == {
        ("removed", "make check"),
        ("added", "make test"),
    }


# ------------------------------------------------- what an edit changed, and who followed it
BASE_CLAUDE = """\
```bash
# Typecheck (only done for src/)
python -m mypy src/

# Run all tests
python -m pytest tests/
```
"""
HEAD_CLAUDE = BASE_CLAUDE.replace("# Typecheck (only done for src/)", "# Typecheck").replace(
    "python -m mypy src/", "python -m mypy src/ scripts/"
)
BASE_SETTINGS = (
    '{"allow": [\n  "Bash(python -m ruff check src/ tests/ --fix)",\n  "Bash(python -m pytest tests/)"\n]}\n'
)
HEAD_SETTINGS = BASE_SETTINGS.replace("tests/ --fix", "tests/ scripts/ --fix")


def test_a_reference_on_both_sides_of_a_changed_line_is_not_a_change() -> None:
    """`src/` and `tests/` are named before and after `scripts/` was added to the line:
    only `scripts/` and the commands that now differ are what the edit changed."""
    refs = docs_diff(
        [(".claude/settings.json", BASE_SETTINGS, HEAD_SETTINGS), ("CLAUDE.md", BASE_CLAUDE, HEAD_CLAUDE)]
    )
    assert [(at.file, at.change, at.line, r.ref) for r in refs for at in r.lines] == [
        (".claude/settings.json", "added", 2, "scripts/"),
        ("CLAUDE.md", "removed", 3, "python -m mypy src/"),
        ("CLAUDE.md", "added", 3, "python -m mypy src/ scripts/"),
    ]


def test_a_run_of_the_new_command_does_not_use_the_old_one_it_extends() -> None:
    """`python -m mypy src/` is the start of `python -m mypy src/ scripts/`: a run of the
    new command followed the added line, not the removed one."""
    removed, added = docs_diff([("CLAUDE.md", BASE_CLAUDE, HEAD_CLAUDE)])
    runs = [
        run("head", 1, ran=["bash -lc 'cd /repo && python -m mypy src/ scripts/'"]),
        run("head", 2, commands=["python -m mypy src/ scripts/ --strict"]),
        run("base", 1, ran=["python -m mypy src/"]),
        run("base", 2, commands=["python -m mypy src/ --strict"]),
    ]
    old, new = tally([removed, added], runs, ["base", "head"])
    assert (old.ref, old.arms["base"].used, old.arms["head"].used) == ("python -m mypy src/", 2, 0)
    assert (new.ref, new.arms["base"].used, new.arms["head"].used) == ("python -m mypy src/ scripts/", 0, 2)


def test_the_scorecard_lists_the_rows_head_and_base_used_differently_first(
    sealed: tuple[ResultStore, GitRepo],
) -> None:
    """Twelve rows used alike by both arms come first in the diff; the one row head used and
    base did not must still be among the rows shown, not in "… and N more"."""
    store, _ = sealed
    manifest, detection = store.read_manifest(), store.read_detection()
    assert manifest is not None and detection is not None
    alike = "".join(f"- see `lib/m{i}.py`\n" for i in range(13))
    docs = docs_diff([("AGENTS.md", "", alike), ("CLAUDE.md", "", "Run `make check`.\n")])
    everything = [f"lib/m{i}.py" for i in range(13)]
    runs = [run("head", i, read=everything, commands=["make check"]) for i in (1, 2, 3)]
    runs += [run("base", i, read=everything) for i in (1, 2, 3)]
    md = render_markdown(summarize(manifest, detection, runs, docs=docs))
    rows = md.split("**Instruction usage**", 1)[1].split("**Confounds**", 1)[0].splitlines()
    first = "- `make check` (added at CLAUDE.md:1): base 0/3 · head 3/3 · none 0/0"
    assert rows[1] == f"{first} (head vs base Fisher p = 0.1)"
    assert "- … and 2 more in the HTML report and the JSON summary" in rows


def test_a_reference_on_several_changed_lines_is_one_row_listing_them(
    sealed: tuple[ResultStore, GitRepo],
) -> None:
    """`make check` named on two added lines (and once more, removed, elsewhere) is one use
    by a run: one row with every line, in the markdown, the JSON summary and the HTML."""
    base = "# Rules\n\nOld: `make check` here.\n"
    head = "# Rules\n- Run `make check` first.\n- Read `docs/x.md`.\n- Again: `make check`.\n"
    docs = docs_diff([("AGENTS.md", "", head), ("CLAUDE.md", base, "# Rules\n")])
    (check,) = (r for r in docs if r.ref == "make check")
    assert [(at.file, at.change, at.line) for at in check.lines] == [
        ("AGENTS.md", "added", 2),
        ("AGENTS.md", "added", 4),
        ("CLAUDE.md", "removed", 3),
    ]
    assert [r.ref for r in docs] == ["make check", "docs/x.md"]
    runs = [run("head", i, commands=["make check"]) for i in (1, 2)] + [run("base", i) for i in (1, 2)]
    store, _ = sealed
    manifest, detection = store.read_manifest(), store.read_detection()
    assert manifest is not None and detection is not None
    summary = summarize(manifest, detection, runs, docs=docs)
    md = render_markdown(summary)
    assert md.count("`make check`") == 1
    assert "- `make check` (added at AGENTS.md:2, 4; removed at CLAUDE.md:3): base 0/2 · head 2/2" in md
    rows = json.loads(render_json(summary))["instruction_usage"]
    assert [(r["ref"], [at["line"] for at in r["lines"]]) for r in rows] == [
        ("make check", [2, 4, 3]),
        ("docs/x.md", [3]),
    ]
    section = render_html(summary, runs).split('<section id="instruction-usage">', 1)[1]
    html = section.split("</section>", 1)[0]
    assert html.count("<tr><td") == 2 and html.count("<code>make check</code>") == 1
    assert all(f"AGENTS.md:{n}" in html for n in (2, 4)) and "CLAUDE.md:3" in html
