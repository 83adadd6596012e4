"""Draft a change task from a past commit that added or changed tests.

The commit is a solved problem with its own proof: its parent is the starting
point (`gold.validation.source`, which the matrix honours), the test files it touched
are the hidden tests, and the rest of its diff is the reference solution.

The drafted prompt states the problem, never the fix: it is the commit's title (without
its `fix:` prefix and PR number) and the names of the tests the commit added, which say
what behaviour is expected. The message body is left out because it usually explains the
fix (logfire-js 7c294b89a694: "normalizeHostedJsonValue called toISOString() on any Date"),
and so is anything from the diff; a title word that only the fix's code contains is named in
the draft's header for the reviewer. The test command is the project's own
(`docdelta.grading.projectcmd`). The task stays `reviewed: false` until a person has read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from docdelta.errors import ConfigError, TaskError
from docdelta.git import Repo, TreeEntry
from docdelta.grading.checks import parse_diff
from docdelta.grading.hidden import TEST_FILES, ChangeAssets, task_folder
from docdelta.grading.projectcmd import ProjectCommand, find_command
from docdelta.instructions.globs import GlobSet
from docdelta.tasks.load import unreviewed_yaml
from docdelta.tasks.models import Gold, Task, Validation

_PY_TEST = GlobSet(["test_*.py", "*_test.py"])
_CONVENTIONAL = re.compile(r"^[a-z]+(?:\([^)]*\))?!?:\s*", re.IGNORECASE)
_PR_NUMBER = re.compile(r"\s*\((?:[\w.-]+/[\w.-]+)?#\d+\)\s*$")
_TEST_CASES = (
    re.compile(r"^\s*(?:async\s+)?def\s+(?P<name>test\w*)\s*\("),  # pytest
    re.compile(r"^\s*(?:it|test)(?:\.\w+)*\s*\(\s*(?P<q>['\"`])(?P<name>.+?)(?P=q)"),  # vitest, jest
    re.compile(r"^\s*func\s+(?P<name>Test\w+)\s*\("),  # go
    re.compile(r"^\s*(?:pub\s+)?(?:async\s+)?fn\s+(?P<name>test\w*)\s*\("),  # rust
)
_WORD = re.compile(r"`([^`]+)`|\b([A-Za-z_][A-Za-z0-9_]*(?:_[A-Za-z0-9]+|[a-z][A-Z][A-Za-z0-9]*))\b")
MAX_LISTED_TESTS = 12


@dataclass(frozen=True)
class CommitTaskDraft:
    task: Task
    assets: ChangeAssets
    notes: list[str] = field(default_factory=list)
    """For the reviewer, written as comments above the task: where the command came from,
    title words that name the fix."""


def _task_id(subject: str, sha: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:40].rstrip("-")
    return f"{slug}-{sha[:8]}" if slug else f"commit-{sha[:8]}"


def _message(repo: Repo, sha: str) -> tuple[str, list[str]]:
    """The commit message and parent ids, read from the raw commit object."""
    text = dict(repo.read_blobs([sha]))[sha].decode(errors="replace")
    header, _, message = text.partition("\n\n")
    parents = [line.split()[1] for line in header.splitlines() if line.startswith("parent ")]
    return message.strip(), parents


def problem_title(subject: str) -> str:
    """`fix: validate Python pricing inputs (#519)` -> `Validate Python pricing inputs`."""
    title = _PR_NUMBER.sub("", _CONVENTIONAL.sub("", subject.strip())).strip()
    return title[:1].upper() + title[1:]


def case_names(text: str) -> list[str]:
    """The test case names `text` defines (pytest functions, vitest/jest titles, Go, Rust)."""
    names = []
    for line in text.splitlines():
        found = next((m for pattern in _TEST_CASES if (m := pattern.match(line))), None)
        if found and found.group("name") not in names:
            names.append(found.group("name"))
    return names


def _described(name: str) -> str:
    """`test_usage_rejects_negative_values` -> `usage rejects negative values`."""
    words = re.sub(r"^test_?", "", name, flags=re.IGNORECASE).replace("_", " ")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", words).lower().strip() or name


def _prompt(title: str, added: dict[str, list[str]]) -> str:
    lines = [title, ""]
    every = [(path, name) for path, names in added.items() for name in names]
    if every:
        lines.append("The maintainers' tests for this expect that:")
        lines += [f"- {_described(name)} ({path})" for path, name in every[:MAX_LISTED_TESTS]]
        if len(every) > MAX_LISTED_TESTS:
            lines.append(f"- and {len(every) - MAX_LISTED_TESTS} more")
    else:
        lines.append(f"The maintainers' tests for this are in {', '.join(added)}.")
    lines += [
        "",
        "Those tests are not in your checkout; they run after you finish. Change the code so they "
        "pass; do not write or edit tests to make them pass.",
    ]
    return "\n".join(lines)


def _giveaways(title: str, fix: bytes, hidden: dict[str, bytes]) -> list[str]:
    """Code words of `title` that the fix adds and no hidden test mentions: the title may be
    naming the solution (a new function, a flag), which a reviewer should reword."""
    tests_glob = GlobSet(TEST_FILES)
    added = "\n".join(
        line for edit in parse_diff(fix) if not tests_glob.matches(edit.path) for line in edit.added
    )
    tests = b"\n".join(hidden.values()).decode(errors="replace")
    words = {a or b for a, b in _WORD.findall(title)}
    return sorted(w for w in words if w in added and w not in tests)


def task_from_commit(repo: Repo, ref: str) -> CommitTaskDraft:
    """A draft change task from commit `ref`: source = its parent, hidden = the test files it touched.

    The reference patch is the commit's whole diff; grading drops its test-file
    edits, so what remains is the solution. Raises ConfigError for a root or merge
    commit, or one that touched no test file.
    """
    sha = repo.resolve(ref)
    message, parents = _message(repo, sha)
    if len(parents) != 1:
        kind = "a root commit" if not parents else "a merge commit"
        raise ConfigError(
            f"{ref} ({sha[:12]}) is {kind}; a task needs exactly one parent to start from",
            hint="pick the commit that added the tests (for a merge, one of its non-merge commits)",
        )
    parent = parents[0]
    before = {e.path: e for e in repo.tree(parent) if e.is_blob}
    tests = GlobSet(TEST_FILES)
    touched = [e for e in repo.tree(sha) if e.is_blob and not e.is_symlink and _oid(before, e.path) != e.oid]
    hidden_entries = [e for e in touched if tests.matches(e.path)]
    if not hidden_entries:
        raise ConfigError(
            f"commit {sha[:12]} adds or changes no test file",
            hint="pick a commit whose diff adds or modifies tests (e.g. tests/test_*.py)",
        )
    blobs = dict(repo.read_blobs(list(dict.fromkeys(e.oid for e in hidden_entries))))
    hidden = {e.path: blobs[e.oid] for e in hidden_entries}
    old = {p: repo.read_blob(before[p].oid).decode(errors="replace") if p in before else "" for p in hidden}
    added = {
        p: [n for n in case_names(hidden[p].decode(errors="replace")) if n not in case_names(old[p])]
        for p in sorted(hidden)
    }
    subject = message.partition("\n")[0]
    title = problem_title(subject) or f"Make the tests of commit {sha[:12]} pass"
    reference = repo.diff(parent, sha).encode("utf-8", "surrogateescape")
    found = find_command(lambda path: _text(repo, before, path), sorted(hidden))
    command = _focused(found, sorted(hidden))
    notes = [
        f"test command from {found.origin}"
        if found
        else "no test command in the project's docs or manifests: review `command`"
    ]
    notes += [
        f"the title names `{w}`, which only the fix adds: reword it if it gives the fix away"
        for w in _giveaways(title, reference, hidden)
    ]
    task = Task(
        id=_task_id(subject, sha),
        prompt=_prompt(title, added),
        kind="change",
        gold=Gold(validation=Validation(hidden=sorted(hidden), command=command, source=parent)),
        reviewed=False,
    )
    return CommitTaskDraft(task, ChangeAssets(hidden=hidden, reference=reference), notes)


def _text(repo: Repo, tree: dict[str, TreeEntry], path: str) -> str | None:
    entry = tree.get(path)
    if entry is None or entry.is_symlink:
        return None
    return repo.read_blob(entry.oid).decode(errors="replace")


def _oid(tree: dict[str, TreeEntry], path: str) -> str | None:
    entry = tree.get(path)
    return entry.oid if entry is not None else None


def _focused(found: ProjectCommand | None, hidden: list[str]) -> str:
    """The command, narrowed to the hidden Python test files when it runs pytest."""
    py_tests = [p for p in hidden if _PY_TEST.matches(PurePosixPath(p).name)]
    command = found.command if found else "python3 -m pytest -q"
    if py_tests and re.search(r"\b(?:pytest|py\.test)\b", command):
        return f"{command} {' '.join(py_tests)}"
    return command


def write_task(draft: CommitTaskDraft, tasks_dir: Path) -> Path:
    """Write `<tasks_dir>/<id>.yaml`, `<id>/hidden/<path>` and `<id>/reference.patch`; never overwrite."""
    task, assets = draft.task, draft.assets
    task_file = tasks_dir / f"{task.id}.yaml"
    folder = task_folder(task_file, task)
    if task_file.exists() or folder.exists():
        raise TaskError(
            f"{task_file} or {folder} already exists", hint="delete the old draft or rename the task id"
        )
    assert task.gold.validation is not None
    for rel, blob in assets.hidden.items():
        target = folder / "hidden" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob)
    if assets.reference is not None:
        (folder / task.gold.validation.reference).write_bytes(assets.reference)
    header = (
        f"# Drafted by `docdelta tasks from-commit`; source (the commit's parent): "
        f"{task.gold.validation.source}\n"
        "# Review the prompt (it must state the problem, not the fix) and the command, run\n"
        "# `docdelta selftest`, then set `reviewed: true`.\n"
        + "".join(f"# - {note}\n" for note in draft.notes)
    )
    task_file.write_text(header + unreviewed_yaml(task), encoding="utf-8")
    return task_file
