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

Trigger tasks ask a narrower question of the same evidence: did an on-demand file's *body*
reach the model? A skill's description is in every prompt (agents list the skills), so
`build_index` also fingerprints each trigger target without its front matter (`body`), and
`body_reached` answers from the ids the gateway logged.
"""

from __future__ import annotations

import re
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
    bodies: dict[str, list[AuditedFile]] = field(default_factory=dict)
    """Fingerprints of trigger targets' bodies (front matter left out) and whose they are; kept
    apart from `files`, so the audit's seen and foreign lists are the same with or without them."""


def build_index(
    conditions: Sequence[ConditionSpec],
    checkouts: Mapping[str, Path],
    detection: Detection,
    targets: Iterable[str] = (),
) -> AuditIndex:
    """Fingerprints of every instruction file of every condition (read from the condition's
    sealed checkout) and of the near-miss files; one fingerprint per distinct content. Each of
    `targets` (trigger tasks' files) also gets a fingerprint of its body per condition."""
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
    bodies = _bodies(conditions, checkouts, sorted(set(targets)))
    fingerprints |= {i: hashes for i, (hashes, _) in bodies.items()}
    return AuditIndex(fingerprints, files, changed, {i: owners for i, (_, owners) in bodies.items()})


FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n.*?^---[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE)
"""YAML front matter at the top of a skill, command or subagent file: its name and description,
which agents show in every prompt whether or not the file is loaded."""


def body(text: str) -> str:
    """The file as loaded, less what is in context without loading it (the front matter)."""
    return FRONT_MATTER.sub("", text, count=1)


def _bodies(
    conditions: Sequence[ConditionSpec], checkouts: Mapping[str, Path], targets: Sequence[str]
) -> dict[str, tuple[list[str], list[AuditedFile]]]:
    """Body id -> (its fingerprint, the (path, conditions) holding it), for every target a
    condition holds; ids carry a prefix so a body never shares an id with a whole file."""
    holders: dict[str, dict[str, set[str]]] = {}
    prints: dict[str, list[str]] = {}
    for spec in conditions:
        for path in targets:
            data = _read(checkouts[spec.name] / path) if path in spec.files else None
            text = "" if data is None else body(data.decode("utf-8", "replace"))
            hashes = fingerprint(text)
            if not hashes:
                continue  # absent, or no body: only the whole file's fingerprint can tell
            # By the body's content: conditions that differ only in the description share it.
            ident = f"body-{sha256_hex(text.encode('utf-8', 'surrogatepass'))[:16]}"
            prints[ident] = hashes
            holders.setdefault(ident, {}).setdefault(path, set()).add(spec.name)
    return {
        i: (prints[i], [AuditedFile(p, frozenset(c)) for p, c in sorted(holders[i].items())]) for i in prints
    }


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


def body_reached(index: AuditIndex, condition: str, path: str, calls: Sequence[ModelCall]) -> bool | None:
    """Whether the body of `condition`'s `path` reached the model in a run, by any channel
    (injected by the agent or read with a tool); None when no call was forwarded (the model
    saw nothing, so there is no evidence either way).

    The whole file's fingerprint counts too: the gateway reports the best-covered of nested
    fingerprints, so a file sent whole is reported as the file, not as its body, and a file
    is only reported when most of its distinctive lines arrived, which a description alone
    never is (agents list a skill as `name: description`, not as its front matter lines)."""
    forwarded = [c for c in calls if c.error is None]
    if not forwarded:
        return None
    for ident in arrived(forwarded):
        owners = [*index.files.get(ident, []), *index.bodies.get(ident, [])]
        if any(f.path == path and condition in f.conditions for f in owners):
            return True
    return False
