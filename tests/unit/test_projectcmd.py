"""The drafted test command is the project's own: from its agent docs, through a Makefile
recipe to the runner, else from its manifests; and the drafted prompt states the problem."""

from __future__ import annotations

import pytest

from docdelta.grading.projectcmd import ProjectCommand, find_command
from docdelta.improve.from_commits import case_names, problem_title

MAKEFILE = ".PHONY: test\ntest: ## Run tests\n\tuv run coverage run -m pytest\n\t@uv run coverage report\n"


def _reader(files: dict[str, str]):  # type: ignore[no-untyped-def]
    return files.get


def test_the_docs_command_for_the_hidden_tests_language_wins() -> None:
    agents = "Build: `pnpm run build`\n\n```bash\n$ npm test  # js\nuv run --frozen pytest -x\n```\n"
    found = find_command(_reader({"AGENTS.md": agents, "pyproject.toml": ""}), ["tests/test_a.py"])
    assert found == ProjectCommand("uv run --frozen pytest -x", "AGENTS.md")
    js = find_command(_reader({"AGENTS.md": agents}), ["src/a.test.ts"])
    assert js == ProjectCommand("npm test", "AGENTS.md")


def test_make_test_is_read_through_its_recipe_to_the_runner() -> None:
    found = find_command(
        _reader({"CLAUDE.md": "Run `make test`.", "Makefile": MAKEFILE}), ["tests/test_a.py"]
    )
    assert found is not None and found.command == "uv run coverage run -m pytest"
    assert found.origin == "CLAUDE.md (`make test`, whose Makefile recipe runs it)"
    # A recipe with no runner of that language keeps the make command itself.
    rust = find_command(_reader({"CLAUDE.md": "Run `make test`.", "Makefile": MAKEFILE}), ["tests/a.rs"])
    assert rust == ProjectCommand("make test", "CLAUDE.md")


@pytest.mark.parametrize(
    ("files", "hidden", "command"),
    [
        ({"pyproject.toml": "", "uv.lock": ""}, ["tests/test_a.py"], "uv run --frozen pytest"),
        ({"pyproject.toml": "", "poetry.lock": ""}, ["tests/test_a.py"], "poetry run pytest"),
        ({"pyproject.toml": ""}, ["tests/test_a.py"], "python3 -m pytest"),
        (
            {"package.json": '{"scripts": {"test": "vitest run"}}', "pnpm-lock.yaml": ""},
            ["a.test.ts"],
            "pnpm run test",
        ),
        ({"Cargo.toml": ""}, ["tests/a.rs"], "cargo test"),
        ({"go.mod": ""}, ["a_test.go"], "go test ./..."),
        ({"Makefile": MAKEFILE}, ["tests/test_a.py"], "uv run coverage run -m pytest"),
    ],
)
def test_manifests_say_how_tests_run_when_the_docs_do_not(
    files: dict[str, str], hidden: list[str], command: str
) -> None:
    found = find_command(_reader(files), hidden)
    assert found is not None and found.command == command


def test_no_docs_and_no_manifest_gives_none() -> None:
    assert find_command(_reader({"README.md": "`pytest`"}), ["tests/test_a.py"]) is None


def test_the_title_loses_its_prefix_and_pr_number() -> None:
    assert problem_title("fix: validate Python pricing inputs (#519)") == "Validate Python pricing inputs"
    assert (
        problem_title("fix(filters)!: honor custom formatter in escape (#861)")
        == "Honor custom formatter in escape"
    )
    assert problem_title("Treat an invalid Date as an unsupported dataset value") == (
        "Treat an invalid Date as an unsupported dataset value"
    )


def test_test_case_names_in_four_languages() -> None:
    text = (
        "def test_rejects_negative(value):\n    pass\n"
        "  it('resolves a nested field', () => {})\n  test.each([1])(`keeps ${x}`, () => {})\n"
        "func TestLoopLocals(t *testing.T) {\n#[test]\nfn test_escape_filter() {\n"
    )
    assert case_names(text) == [
        "test_rejects_negative",
        "resolves a nested field",
        "TestLoopLocals",
        "test_escape_filter",
    ]


@pytest.mark.parametrize(
    ("doc", "command"),
    [
        ("Run one test: `uv run pytest -s -k <pattern>`", "uv run pytest -s"),
        ("```bash\nuv run pytest tests/{module}.py -x\n```", "uv run pytest -x"),
        ("Run `npm test -- <file name>`", "npm test"),
        ("Run `cargo test [options]`", "cargo test"),
        ("Run `pytest -k 'a or b' < cases.txt`", "pytest -k 'a or b' < cases.txt"),  # a real redirection
    ],
)
def test_a_docs_placeholder_never_reaches_the_command(doc: str, command: str) -> None:
    hidden = (
        ["src/a.test.ts"] if "npm" in doc else ["tests/test_a.rs"] if "cargo" in doc else ["tests/test_a.py"]
    )
    found = find_command(_reader({"AGENTS.md": doc}), hidden)
    assert found is not None and found.command == command
