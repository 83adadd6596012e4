"""The part of the shared vocabulary (`docdelta.models`) that `docdelta detect` needs.

`docdelta.models` re-exports every name here, and the rest of docdelta imports them from
there. They live apart so that `detect` builds these few pydantic classes and not all of
the vocabulary's ~65: the class statements alone cost about 0.1 s of a start-up whose goal
is 0.5 s on 2 cores (issue 12; tests/unit/test_cli_imports.py, bench/bench_detect.py).
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
DEFAULT_NOISE_BAND = 0.2
"""Head - base differences within +- this are noise: never called a change, and "no change"
needs every interval inside it. One default for the CLI (`--noise-band`), `.docdelta.yml`
(`noise_band`) and the Action (`noise-band`); a run records the band it planned with in its
manifest, so `docdelta report` decides alike. Measured by bench/bench_gate_cli.py at the shipped
defaults (docs/scorecard.md has its figures): at +-0.05 "no change" is out of reach of any
affordable run count, so every harmless PR would be inconclusive."""


class Frozen(BaseModel):
    """Strict, immutable base: unknown fields are errors, so typos in files surface."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def sha256_hex(data: bytes) -> str:
    """The one content hash used for every identifying hash we record."""
    return hashlib.sha256(data).hexdigest()


BASE, HEAD, NONE, PATCHED = "base", "head", "none", "patched"
"""The built-in condition names: the PR's base and head, no instruction files, and head
with a patch applied. A condition is any named overlay; these are the ones docdelta builds."""
BUILTIN_CONDITIONS = (BASE, HEAD, NONE, PATCHED)
DEFAULT_CONDITIONS = (BASE, HEAD, NONE)


class ConditionSpec(Frozen):
    """A condition is an overlay of instruction files on the source commit."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    files: dict[str, str] = Field(description="path -> sha256 of the file's bytes")
    overlay_sha256: str


# ----------------------------------------------------------------- detection
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
