"""The leaves of the serialized vocabulary: the strict base model, the content hash, the schema
version, the built-in condition names and the noise band's one default."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


DEFAULT_NOISE_BAND = 0.2
"""Head - base differences within +- this are noise: never called a change, and "no change"
needs the overall interval inside it and every task's inside twice it
(`scorecard.decision.TASK_BAND_FACTOR`). One default for the CLI (`--noise-band`), `.docdelta.yml`
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


PROJECT_URL = "https://github.com/docdelta/docdelta/blob/main"
"""The project's files on GitHub: a posted text or an error's hint links here, never to a
path of a checkout (an installed docdelta has no docs folder)."""
CONFIG_PATH = ".docdelta.yml"
"""The project config (`docdelta.config`), at the repository root. Named here, in the
leaves, so `docdelta detect` can tell there is none without importing them."""
