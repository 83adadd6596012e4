"""`docdelta run --repos FILE`: one evaluation per repository of a YAML file, and what pools them.

An organisation that keeps one instruction-file template across its repositories wants to
know what the template does in each of them and over all of them. The file lists the
repositories; each is compared either between two of its own refs (`head`) or between its
`base` and the same commit with the file's shared `template` directory laid over it. Each
entry becomes the `ExperimentRequest` a single `docdelta run` would make, evaluated by the one
composition root into its own workdir (`<--workdir>/<name>`), so a rerun resumes each
repository as it resumes one; `scorecard.summarize.pooled_verdict` then decides head vs base
over every task of every repository as one family.

The template's head is a commit made with plumbing only (`git.overlay_commit`, no ref moved,
no work tree touched), dated as its base so that a rerun makes the same commit and finds the
plan it resumes. The code the agents work on is the base's (`source` base): only the
template's instruction files differ between the arms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from docdelta.config import load_model, load_project_config
from docdelta.errors import ConfigError
from docdelta.experiment.arms import directory_overlay
from docdelta.git import Repo, overlay_commit
from docdelta.instructions.detect import Overlay
from docdelta.vocabulary import BASE, HEAD, Frozen

REPOS_FLAG = "--repos"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
"""A repository's name is its workdir's directory: one path segment, no `..`."""
FIELDS_HINT = (
    "fields: template (a directory laid over each base as its head) and repos, a list of "
    "{name, path, base, head, tasks}"
)


class SuiteRepo(Frozen):
    """One repository of the file. Relative paths: `path` from the file's directory, `tasks`
    from the repository's."""

    name: str | None = Field(
        default=None, pattern=NAME_PATTERN, description="its workdir and its row (default: path's last part)"
    )
    path: Path = Field(description="the repository's directory")
    base: str = Field(default="HEAD", min_length=1, description="the ref the change is measured against")
    head: str | None = Field(
        default=None, min_length=1, description="the ref with the change (else the file's template)"
    )
    tasks: Path | None = Field(default=None, description="default: the base's .docdelta.yml tasks directory")


class SuiteFile(Frozen):
    """The `--repos` file."""

    template: Path | None = Field(
        default=None, description="a directory of instruction files laid over each base as its head"
    )
    repos: list[SuiteRepo] = Field(min_length=1)


@dataclass(frozen=True)
class SuiteEntry:
    """One repository, resolved: what its `ExperimentRequest` takes."""

    name: str
    repo: Repo
    base: str
    head: str
    tasks: Path
    source: str
    """head for two refs; base for a template, whose code is the repository's own."""


def load_suite(path: Path) -> list[SuiteEntry]:
    """Read and check the whole file before anything runs: a bad entry is a ConfigError that
    names the file, the entry and the field."""
    source = f"{REPOS_FLAG} {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file", hint=f"pass a YAML file ({FIELDS_HINT})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read it as UTF-8 text ({exc})", hint=FIELDS_HINT) from None
    parsed = load_model(text, SuiteFile, source=source, error=ConfigError, hint=FIELDS_HINT)
    here = path.parent
    template = None
    if parsed.template is not None:
        template = directory_overlay(here / parsed.template, f"{source}: template {str(parsed.template)!r}")
    entries: list[SuiteEntry] = []
    for index, item in enumerate(parsed.repos):
        entry = _entry(item, f"{source}: repos[{index}]", here, template)
        if any(e.name == entry.name for e in entries):
            raise ConfigError(
                f"{source}: repos[{index}]: name {entry.name!r} is taken by another entry",
                hint="give each repository its own name: it names its workdir",
            )
        entries.append(entry)
    return entries


def _entry(item: SuiteRepo, where: str, here: Path, template: Overlay | None) -> SuiteEntry:
    root = here / item.path
    if not (root / ".git").exists():
        raise ConfigError(
            f"{where}: path {str(item.path)!r} is no git repository ({root.resolve()})",
            hint="point path at a repository's directory, relative to the file",
        )
    name = item.name or root.resolve().name
    if not re.fullmatch(NAME_PATTERN, name):
        raise ConfigError(
            f"{where}: the directory's name {name!r} cannot name a workdir",
            hint="set name: letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    where = f"{where} ({name})"
    if (item.head is None) == (template is None):
        why = (
            "has no head, and the file no template"
            if template is None
            else "has head, and the file a template"
        )
        raise ConfigError(
            f"{where}: {why}",
            hint="compare two refs of each repository (head) or lay one template over each base, not both",
        )
    repo = Repo(root)
    try:
        base_sha = repo.resolve(item.base)
        if item.head is not None:
            repo.resolve(item.head)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc.message}", hint=exc.hint) from None
    if template is None:
        head, source = str(item.head), HEAD
    else:
        message = "docdelta: instruction-file template"
        head = overlay_commit(root, base_sha, template.files, message, reproducible=True)
        source = BASE
    tasks = root / (item.tasks or load_project_config(repo, base_sha).tasks)
    if not tasks.is_dir():
        raise ConfigError(
            f"{where}: tasks directory {tasks} does not exist",
            hint="set tasks, relative to the repository, or create the directory",
        )
    return SuiteEntry(name, repo, item.base, head, tasks, source)
