"""The injected-instruction audit: which instruction files' text actually reached the model.

A condition only means something if the agent's prompt held that condition's files and
no others. Agents differ in what they load (Claude Code ignores AGENTS.md, OpenCode reads
only the first of AGENTS.md / CLAUDE.md, a case-insensitive lookup may pick up
`docs/agents.md`), so the runner checks it per run instead of trusting a table:

1. `build_index` fingerprints every distinct instruction file content of every condition,
   plus the near-miss files detection found (`gateway.fingerprint`: hashed lines only);
2. the gateway matches each forwarded request against the fingerprints and logs the ids
   it found in `ModelCall.instructions`;
3. `audit_run` maps those ids back to files for one run: `seen` (this condition's files),
   `missing` (this condition's *changed* files that never arrived: the edit under test was
   not read), `foreign` (another condition's version, or a near-miss file the agent's own
   prompt held — a near-miss the agent merely read with a tool is what every arm may do);
4. `flags` counts flagged runs per condition and file for the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from docdelta.gateway.fingerprint import Channel, fingerprint
from docdelta.gateway.models import ModelCall
from docdelta.instructions.models import Detection, InstructionAudit
from docdelta.vocabulary import ConditionSpec, sha256_hex

NEAR_MISS = "near-miss"


@dataclass(frozen=True)
class AuditedFile:
    path: str
    conditions: frozenset[str]
    """Conditions whose checkout holds this content at `path`; empty for a near-miss file."""


@dataclass(frozen=True)
class AuditIndex:
    """The fingerprints handed to the gateway and what each one stands for (host only)."""

    fingerprints: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, list[AuditedFile]] = field(default_factory=dict)
    changed: dict[str, frozenset[str]] = field(default_factory=dict)
    """condition -> its changed instruction files that have a fingerprint (can be audited)."""


def build_index(
    conditions: Sequence[ConditionSpec], checkouts: Mapping[str, Path], detection: Detection
) -> AuditIndex:
    """Fingerprints of every instruction file of every condition (read from the condition's
    sealed checkout) and of the near-miss files; one fingerprint per distinct content."""
    holders: dict[str, dict[str, set[str]]] = {}  # content id -> path -> conditions
    texts: dict[str, bytes] = {}

    def add(path: str, data: bytes, condition: str | None) -> None:
        ident = sha256_hex(data)[:16]
        texts[ident] = data
        owners = holders.setdefault(ident, {}).setdefault(path, set())
        if condition is not None:
            owners.add(condition)

    for spec in conditions:
        for path in spec.files:
            data = _read(checkouts[spec.name] / path)
            if data is not None:
                add(path, data, spec.name)
    any_checkout = next(iter(checkouts.values()), None)
    for miss in detection.near_misses:
        data = None if any_checkout is None else _read(any_checkout / miss.path)
        if data is not None:
            add(miss.path, data, None)

    fingerprints = {i: fingerprint(t.decode("utf-8", "replace")) for i, t in texts.items()}
    fingerprints = {i: hashes for i, hashes in fingerprints.items() if hashes}
    files = {i: [AuditedFile(p, frozenset(c)) for p, c in sorted(holders[i].items())] for i in fingerprints}
    changed_paths = {f.path for f in detection.changed}
    changed = {
        spec.name: frozenset(
            f.path
            for fs in files.values()
            for f in fs
            if spec.name in f.conditions and f.path in changed_paths
        )
        for spec in conditions
    }
    return AuditIndex(fingerprints, files, changed)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # a dangling link or a directory: nothing the agent could read as text
        return None


def arrived(calls: Iterable[ModelCall]) -> dict[str, Channel]:
    """Fingerprint ids in the forwarded calls of a run; `injected` in any call wins."""
    out: dict[str, Channel] = {}
    for call in calls:
        if call.error is not None:
            continue  # refused or failed: the model never saw it
        for ident, channel in call.instructions.items():
            if out.get(ident) != "injected":
                out[ident] = channel
    return out


def audit_run(index: AuditIndex, condition: str, calls: Sequence[ModelCall]) -> InstructionAudit:
    """What reached the model in one run of `condition`, judged against that condition."""
    seen: set[str] = set()
    foreign: set[str] = set()
    for ident, channel in arrived(calls).items():
        files = index.files.get(ident, [])
        own = {f.path for f in files if condition in f.conditions}
        seen |= own
        if own:
            continue
        for f in files:
            if f.conditions:
                foreign.add(f"{','.join(sorted(f.conditions))}:{f.path}")
            elif channel == "injected":
                foreign.add(f"{NEAR_MISS}:{f.path}")
    missing = index.changed.get(condition, frozenset()) - seen
    return InstructionAudit(seen=sorted(seen), missing=sorted(missing), foreign=sorted(foreign))
