"""Detection and audit records: changed instruction files, how each is loaded, what reached the model."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from docdelta.vocabulary import SCHEMA_VERSION, Frozen


class FileStatus(StrEnum):
    added = "added"
    modified = "modified"
    deleted = "deleted"
    renamed = "renamed"


class LoadMode(StrEnum):
    """How an agent family takes in an instruction file (`docdelta.instructions.loading`)."""

    always = "always"
    """In the agent's context from the start of every run (root AGENTS.md, CLAUDE.md, its @imports)."""
    on_demand = "on_demand"
    """Loaded only when the agent or the user calls for it: skills, slash commands, subagents,
    nested files of a directory the agent works in."""
    config = "config"
    """Not read as text but steers the agent: settings, permissions, hooks."""


class ChangedFile(Frozen):
    """One instruction file that differs between base and head."""

    path: str
    status: FileStatus
    old_path: str | None = None
    families: list[str] = Field(description="agent families that read this file, e.g. ['codex', 'opencode']")
    symlink: bool = False
    link_target: str | None = Field(
        default=None, description="a symlink's target as stored (at head, else base)"
    )
    loading: dict[str, LoadMode] = Field(default={}, description="family -> how it loads the file")
    kinds: dict[str, str] = Field(
        default={}, description="family -> what the file is to it, e.g. 'slash command'"
    )
    imported_by: list[str] = Field(default=[], description="instruction files that @import this one")

    def loading_text(self) -> str:
        """`claude_code (on demand: slash command), codex`: the readers and how each loads it."""
        parts = []
        for family in self.families:
            mode = self.loading.get(family, LoadMode.always)
            how = "" if mode is LoadMode.always else mode.value.replace("_", " ")
            if how and family in self.kinds:
                how = f"{how}: {self.kinds[family]}"
            parts.append(f"{family} ({how})" if how else family)
        return ", ".join(parts)


class NearMiss(Frozen):
    """A file that is not an instruction file by our table but may be loaded anyway
    (e.g. `agents.md` via a case-insensitive lookup) — a confound, reported, not evaluated."""

    path: str
    reason: str


class Detection(Frozen):
    schema_version: int = SCHEMA_VERSION
    base: str
    head: str
    changed: list[ChangedFile]
    near_misses: list[NearMiss] = []
    other_changed: list[str] = Field(
        default=[], description="files changed in the range that are no instruction file (code, tests, docs)"
    )

    @property
    def empty(self) -> bool:
        return not self.changed


class InstructionAudit(Frozen):
    """Which instruction files' text reached the model in one run, as the gateway saw the
    requests (see docdelta.instructions.audit). Files are named `path`, or `condition:path` /
    `near-miss:path` for files that are not this condition's."""

    seen: list[str] = Field(default=[], description="this condition's instruction files that reached it")
    missing: list[str] = Field(
        default=[], description="this condition's changed instruction files that never reached it"
    )
    foreign: list[str] = Field(
        default=[], description="files that reached it although they are not this condition's"
    )

    @property
    def flagged(self) -> bool:
        return bool(self.missing or self.foreign)


class InstructionFlag(Frozen):
    """Runs of one condition where a file did not reach the model (`missing`) or a file
    that is not the condition's did (`foreign`)."""

    condition: str
    kind: Literal["missing", "foreign"]
    file: str
    runs: int
    audited: int = Field(description="runs of the condition whose requests were audited")
