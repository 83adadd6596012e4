"""The project's own test command, as its docs or manifests give it, for a drafted change task.

A drafted task is graded by running its hidden tests, and a real project does not run them
with a bare `python3 -m pytest`: genai-prices says `make test` in AGENTS.md, whose recipe is
`uv run coverage run -m pytest`; minijinja says `cargo test -p minijinja --all-features`. So
the draft takes the first test command its agent docs (AGENTS.md, CLAUDE.md, CONTRIBUTING)
show, in code spans or code blocks, for the language of the hidden tests; a `make` target is
read through its Makefile recipe to the test runner it calls (a report can only be asked of
the runner). Failing that, the manifest says how tests run (pyproject with uv.lock: uv;
package.json's test script; Cargo.toml; go.mod; a Makefile `test` target).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

DOCS = ("AGENTS.md", "CLAUDE.md", "CONTRIBUTING.md", ".github/CONTRIBUTING.md", "docs/CONTRIBUTING.md")
"""Where projects tell agents and contributors how to run the tests, most specific first."""

_PYTEST = (
    r"(?:(?:uv|poetry|hatch|pdm|rye)\s+run\s+(?:-{1,2}\S+\s+)*)?"  # a project runner and its flags
    r"(?:(?:python3?|coverage\s+run)\s+-m\s+)?(?:pytest|py\.test)\b"
)
_RUNNERS: dict[str, str] = {
    "python": rf"{_PYTEST}|(?:uv\s+run\s+)?(?:tox|nox)\b",
    "rust": r"cargo\s+(?:test|nextest\s+run)\b",
    "go": r"go\s+test\b|gotestsum\b",
    "js": r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test\b|(?:npx\s+|pnpm\s+exec\s+)?(?:vitest|jest)\b"
    r"|vp\s+(?:run\s+\S*test|test)\b",
}
_ANY = r"make\s+(?:test|check)\b"
"""A make target can run any language's tests; it is read through its recipe."""
_SUFFIXES = {".py": "python", ".rs": "rust", ".go": "go", ".js": "js", ".ts": "js", ".mjs": "js",
             ".cjs": "js", ".jsx": "js", ".tsx": "js", ".mts": "js", ".cts": "js"}  # fmt: skip
_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class ProjectCommand:
    command: str
    origin: str
    """Where it came from, for the draft's header: `AGENTS.md`, `Makefile target test`, ..."""


def languages(hidden: Sequence[str]) -> set[str]:
    """The languages of the hidden test files (by suffix); insta snapshots etc. count as none."""
    return {lang for p in hidden if (lang := _SUFFIXES.get(PurePosixPath(p).suffix))}


def find_command(read: Callable[[str], str | None], hidden: Sequence[str]) -> ProjectCommand | None:
    """The project's test command for `hidden`, from its docs, else its manifests; `read`
    returns a file's text at the source commit (None if absent). None when neither says."""
    langs = languages(hidden) or set(_RUNNERS)
    runner = re.compile(rf"^(?:{'|'.join(_RUNNERS[lang] for lang in sorted(langs))}|{_ANY})")
    for doc in DOCS:
        text = read(doc)
        for candidate in _commands(text or ""):
            if runner.match(candidate):
                return _through_make(read, ProjectCommand(candidate, doc), langs)
    return _from_manifests(read, langs)


def _commands(text: str) -> Iterator[str]:
    """Shell commands a doc shows: code spans, and the lines of fenced code blocks (without a
    `$ ` prompt or a trailing `# comment`)."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        pieces = [line] if fenced else _SPAN.findall(line)
        for piece in pieces:
            command = without_placeholders(re.sub(r"\s+#.*$", "", piece.strip().removeprefix("$ ")).strip())
            if command:
                yield command


_PLACEHOLDER = r"<[^<>\s](?:[^<>\n]*[^<>\s])?>|\{[^{}\s]+\}|\[[^\[\]\s]+\]|\.\.\."
"""What a doc's example command leaves for the reader to fill in: `<pattern>`, `<file name>`,
`{test}`, `[options]`, `...` (never a redirection: `< in.txt` has a space after the `<`)."""
_WORD_WITH_PLACEHOLDERS = re.compile(rf"(?:{_PLACEHOLDER}|\S)+")


def without_placeholders(command: str) -> str:
    """`uv run pytest -k <pattern>` -> `uv run pytest`: a doc's example shows where the
    reader's own words go, and a drafted validation command must never run the placeholder
    (the shell reads `<pattern>` as a redirection from a file named `pattern`). A word holding
    one goes (`tests/{module}.py`), and so does an option or `--` that takes it."""
    words = _WORD_WITH_PLACEHOLDERS.findall(command)
    if not any(re.search(_PLACEHOLDER, w) for w in words):
        return command
    kept: list[str] = []
    for word in words:
        if re.search(_PLACEHOLDER, word):
            if kept and kept[-1].startswith("-") and "=" not in kept[-1]:
                kept.pop()
            continue
        kept.append(word)
    return " ".join(kept)


def _through_make(
    read: Callable[[str], str | None], found: ProjectCommand, langs: set[str]
) -> ProjectCommand:
    """`make test` -> the runner line of its recipe (what a JUnit report can be asked of)."""
    target = re.match(r"make\s+([\w.-]+)$", found.command)
    if target is None:
        return found
    recipe = _recipe(read("Makefile") or "", target.group(1))
    runner = re.compile(rf"^(?:{'|'.join(_RUNNERS[lang] for lang in sorted(langs))})")
    line = next((line for line in recipe if runner.match(line)), None)
    if line is None:
        return found
    return ProjectCommand(line, f"{found.origin} (`{found.command}`, whose Makefile recipe runs it)")


def _recipe(makefile: str, target: str) -> list[str]:
    """The command lines of `target`'s rule (without `@`/`-` prefixes)."""
    lines = makefile.splitlines()
    head = re.compile(rf"^{re.escape(target)}\s*:(?!=)")
    for i, line in enumerate(lines):
        if head.match(line):
            body = []
            for rule in lines[i + 1 :]:
                if not rule.startswith("\t"):
                    break
                body.append(rule.strip().lstrip("@-").strip())
            return body
    return []


def _from_manifests(read: Callable[[str], str | None], langs: set[str]) -> ProjectCommand | None:
    if "python" in langs and read("pyproject.toml") is not None:
        if read("uv.lock") is not None:
            return ProjectCommand("uv run --frozen pytest", "pyproject.toml and uv.lock")
        if read("poetry.lock") is not None:
            return ProjectCommand("poetry run pytest", "pyproject.toml and poetry.lock")
        return ProjectCommand("python3 -m pytest", "pyproject.toml")
    if "js" in langs and (script := _test_script(read("package.json"))):
        manager = "pnpm" if read("pnpm-lock.yaml") is not None else "yarn" if read("yarn.lock") else "npm"
        return ProjectCommand(f"{manager} run test", f"package.json (scripts.test: {script})")
    if "rust" in langs and read("Cargo.toml") is not None:
        return ProjectCommand("cargo test", "Cargo.toml")
    if "go" in langs and read("go.mod") is not None:
        return ProjectCommand("go test ./...", "go.mod")
    if _recipe(read("Makefile") or "", "test"):
        return _through_make(read, ProjectCommand("make test", "Makefile"), langs)
    return None


def _test_script(text: str | None) -> str | None:
    try:
        scripts = json.loads(text or "{}").get("scripts") or {}
    except (json.JSONDecodeError, AttributeError):
        return None
    script = scripts.get("test") if isinstance(scripts, dict) else None
    return script if isinstance(script, str) and script.strip() else None
