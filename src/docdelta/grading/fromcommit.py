"""Draft a change task from a past commit that added or changed tests.

The commit is a solved problem with its own proof: its parent is the starting
point, the test files it touched are the hidden tests, and the rest of its diff is
the reference solution. Only the prompt needs a person: it is drafted from the
commit message and the task stays `reviewed: false` until someone rewrites it
as a request that does not give the answer away.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import yaml

from docdelta.errors import ConfigError, TaskError
from docdelta.git import Repo
from docdelta.globs import GlobSet
from docdelta.grading.hidden import TEST_FILES, ChangeAssets, task_folder
from docdelta.models import Gold, Task, Validation

_PY_TEST = GlobSet(["test_*.py", "*_test.py"])


def _task_id(subject: str, sha: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:40].rstrip("-")
    return f"{slug}-{sha[:8]}" if slug else f"commit-{sha[:8]}"


def _message(repo: Repo, sha: str) -> tuple[str, list[str]]:
    """The commit message and parent ids, read from the raw commit object."""
    text = dict(repo.read_blobs([sha]))[sha].decode(errors="replace")
    header, _, message = text.partition("\n\n")
    parents = [line.split()[1] for line in header.splitlines() if line.startswith("parent ")]
    return message.strip(), parents


def task_from_commit(repo: Repo, ref: str) -> tuple[Task, ChangeAssets]:
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
    before = {e.path: e.oid for e in repo.tree(parent) if e.is_blob}
    tests = GlobSet(TEST_FILES)
    touched = [e for e in repo.tree(sha) if e.is_blob and not e.is_symlink and before.get(e.path) != e.oid]
    hidden_entries = [e for e in touched if tests.matches(e.path)]
    if not hidden_entries:
        raise ConfigError(
            f"commit {sha[:12]} adds or changes no test file",
            hint="pick a commit whose diff adds or modifies tests (e.g. tests/test_*.py)",
        )
    blobs = dict(repo.read_blobs(list(dict.fromkeys(e.oid for e in hidden_entries))))
    hidden = {e.path: blobs[e.oid] for e in hidden_entries}
    subject, _, body = message.partition("\n")
    py_tests = [p for p in hidden if _PY_TEST.matches(PurePosixPath(p).name)]
    command = "python3 -m pytest -q " + " ".join(py_tests) if py_tests else "python3 -m pytest -q"
    prompt = (
        f"{subject.strip()}\n\n{body.strip()}".strip()
        + "\n\n(Drafted from a commit message: rewrite it as a request that does not reveal the tests.)"
    )
    task = Task(
        id=_task_id(subject, sha),
        prompt=prompt,
        kind="change",
        gold=Gold(validation=Validation(hidden=sorted(hidden), command=command, source=parent)),
        reviewed=False,
    )
    return task, ChangeAssets(
        hidden=hidden, reference=repo.diff(parent, sha).encode("utf-8", "surrogateescape")
    )


def write_task(task: Task, assets: ChangeAssets, tasks_dir: Path) -> Path:
    """Write `<tasks_dir>/<id>.yaml`, `<id>/hidden/<path>` and `<id>/reference.patch`; never overwrite."""
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
        "# Review the prompt (it must not reveal the tests), run `docdelta selftest`,\n"
        "# then set `reviewed: true`.\n"
    )
    data = task.model_dump(mode="json", exclude_defaults=True)
    data["reviewed"] = False
    task_file.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return task_file
