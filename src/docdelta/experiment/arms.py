"""Arms: columns of the matrix that vary the agent, the model or the context, not only the docs.

A condition is which instruction files a checkout holds (base, head, none, patched). An
**arm** is a condition run by an agent and model of its own, optionally with extra files
laid over its checkout (a skills folder, a docs export): the same docs under two models, or
head with and without a skills folder. Each arm is one more column of the plan, named by the
arm: its cells, results, checkout, manifest entry and cache key are those of a condition whose
overlay is the condition's files plus the arm's, and whose agent is the arm's
(`Manifest.arms`). So the runner, resume, the statistics and the report need nothing new
beyond knowing which agent runs a column.

An arm is compared with one other column (`vs`, default the plan's first column). A
comparison is only evidence about one cause when the two differ in one factor
(`results.models.ARM_FACTORS`); `scorecard.arms.compare` says so when they differ in more.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from docdelta.agents.base import Agent
from docdelta.config import ArmSpec
from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.instructions.detect import MAX_INSTRUCTION_BYTES, Overlay
from docdelta.results.models import AgentInfo, ArmRecord
from docdelta.vocabulary import BUILTIN_CONDITIONS

ARMS_FLAG = "--arms"
FIELDS = tuple(f for f in ArmSpec.model_fields if f != "name")
SYNTAX = "NAME:field=value,field=value;NAME:... e.g. small:model=qwen-small;large:model=qwen-large"
MAX_OVERLAY_FILES = 1000
"""An overlay is a skills folder or a docs export, not a source tree: more files is a mistake."""


# ------------------------------------------------------------------- parsing
def parse_arms(text: str) -> list[ArmSpec]:
    """`--arms`: arms separated by `;`, each `NAME:field=value,...` (fields: FIELDS).

    A ValueError names the arm and the field at fault and what to write instead."""
    specs: list[ArmSpec] = []
    for chunk in (c.strip() for c in text.split(";")):
        if not chunk:
            continue
        name, colon, rest = chunk.partition(":")
        name = name.strip()
        values: dict[str, str] = {"name": name}
        for pair in (p.strip() for p in rest.split(",") if p.strip()) if colon else ():
            key, eq, value = pair.partition("=")
            key = key.strip().replace("-", "_")
            if not eq or not value.strip():
                raise ValueError(f"arm {name!r}: {pair!r} is not field=value (syntax: {SYNTAX})")
            if key not in FIELDS:
                raise ValueError(f"arm {name!r}: unknown field {key!r}; fields: {', '.join(FIELDS)}")
            if key in values:
                raise ValueError(f"arm {name!r}: field {key!r} is given twice; give it once")
            values[key] = value.strip()
        specs.append(spec_of(values, f"arm {name!r}"))
    if not specs:
        raise ValueError(f"no arm given (syntax: {SYNTAX})")
    return specs


def spec_of(values: Mapping[str, object], where: str) -> ArmSpec:
    try:
        return ArmSpec.model_validate(dict(values))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(arm)"
        if field == "name":
            why = "an arm's name is 1-32 lowercase letters, digits, - or _, starting with a letter"
            raise ValueError(f"{where}: name {values.get('name')!r}: {why}") from None
        raise ValueError(f"{where}: {field} = {first.get('input')!r}: {first['msg'].lower()}") from None


def check_arms(specs: Sequence[ArmSpec], conditions: Sequence[str], where: str) -> None:
    """Names unique and no condition's, each built on a condition docdelta builds, each `vs` a
    column of the plan other than itself. `where` names the source (`--arms`, `.docdelta.yml`)."""
    hint = f"fix the arm in {where}"
    seen: set[str] = set()
    for spec in specs:
        if spec.name in BUILTIN_CONDITIONS or spec.name in conditions:
            raise ConfigError(
                f"{where}: arm name {spec.name!r} is a condition's name",
                hint=f"name the arm after what it varies, e.g. {spec.condition}-{spec.model or 'big'}",
            )
        if spec.name in seen:
            raise ConfigError(f"{where}: arm {spec.name!r} is declared twice", hint="name each arm once")
        seen.add(spec.name)
        if spec.condition not in BUILTIN_CONDITIONS:
            raise ConfigError(
                f"{where}: arm {spec.name!r}: condition {spec.condition!r} is not one docdelta builds",
                hint=f"use one of: {', '.join(BUILTIN_CONDITIONS)}",
            )
    columns = [*conditions, *(s.name for s in specs)]
    for spec in specs:
        if spec.vs is not None and (spec.vs not in columns or spec.vs == spec.name):
            others = ", ".join(c for c in columns if c != spec.name) or "(none)"
            raise ConfigError(
                f"{where}: arm {spec.name!r}: vs {spec.vs!r} is not another column of this run",
                hint=f"{hint}: vs names one of {others}",
            )


# ------------------------------------------------------------------ resolving
@dataclass(frozen=True)
class Arm:
    """A declared arm, resolved: its agent built and its overlay's files read."""

    spec: ArmSpec
    agent: Agent
    files: Overlay
    source_dir: str | None = None
    """The repository directory the overlay was read from (`.docdelta.yml`): stripped from every
    checkout, so no other column sees the files as ordinary source."""
    server: Mapping[str, str] | None = None
    """What the model servers of the arm's own sandbox said they serve (`agent_info`)."""

    @property
    def strip(self) -> list[str]:
        return [] if self.source_dir is None else [f"/{self.source_dir}/**"]

    def record(self) -> ArmRecord:
        info = agent_info(self.agent, self.server)
        return ArmRecord(
            condition=self.spec.condition,
            agent=info,
            overlay=self.spec.overlay,
            overlay_sha256=self.files.sha256 if self.spec.overlay else None,
            vs=self.spec.vs,
        )

    def on(self, condition: Overlay) -> Overlay:
        """The column's overlay: the condition's files, then the arm's on top."""
        return Overlay(
            files={**condition.files, **self.files.files},
            symlinks={p: t for p, t in condition.symlinks.items() if p not in self.files.files},
        )


def agent_info(agent: Agent, server: Mapping[str, str] | None = None) -> AgentInfo:
    """What the manifest records of an agent (and the cache key hashes); `server`, what its
    sandbox's model servers said they serve (`wiring.BuiltSandbox`), replaces the agent's own."""
    return AgentInfo(
        name=agent.name,
        version=agent.version,
        model=agent.model,
        settings=agent.recorded_settings,
        server=dict(agent.server_identity if server is None else server),
    )


def _relative(path: str, where: str) -> str:
    parts = path.strip("/").split("/")
    if path.startswith("/") or ".." in parts or not path.strip("/"):
        raise ConfigError(
            f"{where}: overlay {path!r} must be a directory inside the repository",
            hint="name a directory of the repository at the base ref, e.g. overlay: arms/skills",
        )
    return path.strip("/")


def host_overlay(spec: ArmSpec, where: str) -> Overlay:
    """`--arms` overlay: the files under a host directory, at their paths relative to it."""
    if spec.overlay is None:
        return Overlay()
    label = f"{where}: arm {spec.name!r}: overlay {spec.overlay!r}"
    return directory_overlay(Path(spec.overlay).expanduser(), label)


def directory_overlay(root: Path, label: str) -> Overlay:
    """The regular files under host directory `root`, at their paths relative to it: an arm's
    overlay, or the instruction-file template `docdelta run --repos` lays on each repository.
    `label` names the directory's source in errors."""
    if not root.is_dir():
        raise ConfigError(
            f"{label} is not a directory",
            hint="point it at a directory laid out as the files should appear in the checkout",
        )
    files: dict[str, bytes] = {}
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(names):
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                raise ConfigError(
                    f"{label}: file {path} is not a regular file",
                    hint="an overlay holds regular files only (links are not followed)",
                )
            files[path.relative_to(root).as_posix()] = _read(path, label)
    return _bounded(files, label)


def overlay_dir(spec: ArmSpec, where: str) -> str | None:
    """A `.docdelta.yml` overlay's directory in the repository, checked to stay inside it."""
    return None if spec.overlay is None else _relative(spec.overlay, where)


def repo_overlay(spec: ArmSpec, repo: Repo, sha: str, where: str) -> Overlay:
    """`.docdelta.yml` overlay: a directory of the repository at the trusted base ref (never the
    working tree, which in a PR is the head's), at paths relative to it."""
    if spec.overlay is None:
        return Overlay()
    prefix = _relative(spec.overlay, where) + "/"
    entries = [e for e in repo.tree(sha, [prefix]) if e.path.startswith(prefix)]
    if not entries:
        raise ConfigError(
            f"{where}: arm {spec.name!r}: overlay {spec.overlay!r} is no directory at {sha[:12]}",
            hint="commit the directory on the base branch, or fix overlay",
        )
    for e in entries:
        if not e.is_blob or e.is_symlink or (e.size or 0) > MAX_INSTRUCTION_BYTES:
            raise ConfigError(
                f"{where}: arm {spec.name!r}: overlay file {e.path} is not a regular file up to 1 MiB",
                hint="an overlay holds regular files only",
            )
    blobs = dict(repo.read_blobs([e.oid for e in entries]))
    label = f"{where}: arm {spec.name!r}: overlay {spec.overlay!r}"
    return _bounded({e.path[len(prefix) :]: blobs[e.oid] for e in entries}, label)


def _read(path: Path, label: str) -> bytes:
    if path.stat().st_size > MAX_INSTRUCTION_BYTES:
        raise ConfigError(f"{label}: file {path} is over 1 MiB", hint="leave it out of the overlay")
    return path.read_bytes()


def _bounded(files: dict[str, bytes], label: str) -> Overlay:
    if not files:
        raise ConfigError(f"{label} holds no file", hint="fill it or drop overlay")
    if len(files) > MAX_OVERLAY_FILES:
        raise ConfigError(
            f"{label} holds {len(files):,} files, over {MAX_OVERLAY_FILES:,}",
            hint="an overlay is a skills folder or a docs export: point it at that directory",
        )
    return Overlay(files=files)
