"""Which files are agent instruction files, and which of them a change touches.

The built-in table says, per path pattern, which agent families load the file by
default (family names match the agent adapter names, e.g. `claude_code`). It is
deliberately faithful rather than generous: Claude Code does not read AGENTS.md,
Gemini CLI does not read AGENTS.md unless configured, so a PR that edits only
AGENTS.md tells you nothing about them, and the report must be able to say so.

Patterns are gitignore globs (`docdelta.globs`). Projects extend the table with
`instructions.include` (family `custom`) and drop entries with `instructions.exclude`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.globs import GlobSet
from docdelta.models import (
    ChangedFile,
    ConditionSpec,
    Detection,
    FileStatus,
    NearMiss,
    sha256_hex,
)

MAX_INSTRUCTION_BYTES = 1024 * 1024
CUSTOM_FAMILY = "custom"

# (glob, families). A path's families are the union over every pattern it matches.
# Zed reads the first of several root files; Copilot's coding agent reads AGENTS.md
# anywhere and CLAUDE.md/GEMINI.md at the root; OpenCode falls back to CLAUDE.md
# when no AGENTS.md exists and loads skills from .claude/skills.
BUILTIN_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("AGENTS.md", ("codex", "opencode", "cursor", "copilot")),
    ("AGENTS.override.md", ("codex",)),
    ("/AGENTS.md", ("zed",)),
    ("/AGENT.md", ("zed",)),
    ("CLAUDE.md", ("claude_code", "opencode")),
    ("/CLAUDE.md", ("zed", "copilot")),
    ("CLAUDE.local.md", ("claude_code",)),
    ("**/.claude/rules/**", ("claude_code",)),
    ("**/.claude/skills/**", ("claude_code", "opencode")),
    ("/.cursorrules", ("cursor", "zed")),
    ("**/.cursor/rules/**/*.mdc", ("cursor",)),
    ("/.github/copilot-instructions.md", ("copilot", "zed")),
    ("/.github/instructions/**/*.instructions.md", ("copilot",)),
    ("/.clinerules", ("cline", "zed")),
    ("/.clinerules/**", ("cline",)),
    ("/.windsurfrules", ("windsurf", "zed")),
    ("/.windsurf/rules/**", ("windsurf",)),
    ("GEMINI.md", ("gemini",)),
    ("/GEMINI.md", ("zed", "copilot")),
    ("/CONVENTIONS.md", ("aider",)),
    ("/.junie/guidelines.md", ("junie",)),
    ("/.rules", ("zed",)),
    ("/.kiro/steering/**", ("kiro",)),
    ("/.amazonq/rules/**", ("amazon_q",)),
    ("/.roo/rules/**", ("roo",)),
    ("/.roo/rules-*/**", ("roo",)),
    ("/.roorules", ("roo",)),
)


SHADOWED: dict[str, tuple[tuple[str, str], ...]] = {
    # OpenCode loads only the first of AGENTS.md, CLAUDE.md it finds (checked against
    # OpenCode 1.18.33 at our scripted model server): a root CLAUDE.md next to a root
    # AGENTS.md never reaches it.
    "opencode": (("CLAUDE.md", "AGENTS.md"),),
}
"""Family -> (file, the file whose presence keeps it from loading), root-relative paths."""

KNOWN_FAMILIES = frozenset(f for _, families in BUILTIN_PATTERNS for f in families)
"""Agent families the table knows; adapters of the same name (claude_code, codex, ...) are them."""

_BUILTIN = tuple((GlobSet([glob]), families) for glob, families in BUILTIN_PATTERNS)


def _literal_names(patterns: Iterable[str]) -> dict[str, str]:
    """lower-cased file name -> canonical name, for every pattern ending in a fixed name."""
    names = {}
    for glob in patterns:
        base = glob.rsplit("/", 1)[-1]
        if base and not any(c in base for c in "*?[") and base != "**":
            names[base.lower()] = base
    return names


# Too generic to flag when it turns up elsewhere (docs/guidelines.md is just a doc).
_GENERIC_NAMES = frozenset({"guidelines.md"})
_KNOWN_NAMES = {
    low: name
    for low, name in _literal_names(glob for glob, _ in BUILTIN_PATTERNS).items()
    if low not in _GENERIC_NAMES
}


class InstructionMatcher:
    """The built-in table plus a project's `include` globs, minus its `exclude` globs."""

    def __init__(self, include_globs: Sequence[str] = (), exclude_globs: Sequence[str] = ()) -> None:
        self._include = GlobSet(include_globs)
        self._exclude = GlobSet(exclude_globs)

    def _builtin_families(self, path: str) -> set[str]:
        return {f for globs, families in _BUILTIN if globs.matches(path) for f in families}

    def families(self, path: str) -> list[str]:
        """Agent families that load `path` by default; empty if it is no instruction file."""
        if self._exclude.matches(path):
            return []
        found = self._builtin_families(path)
        if self._include.matches(path):
            found.add(CUSTOM_FAMILY)
        return sorted(found)

    def matches(self, path: str) -> bool:
        return bool(self.families(path))

    def near_miss(self, path: str) -> str | None:
        """Why `path` may be loaded although it is not an instruction file, or None.

        Catches names that differ only in case (`agents.md`, `Claude.md`: loaded on
        case-insensitive file systems and by case-insensitive lookups), instruction
        file names outside the place agents look (`docs/copilot-instructions.md`),
        and built-in instruction files the project excluded.
        """
        if self.matches(path):
            return None
        builtin = sorted(self._builtin_families(path))
        if builtin:
            return f"excluded by the project config, but read by {', '.join(builtin)}"
        name = posixpath.basename(path)
        canonical = _KNOWN_NAMES.get(name.lower())
        if canonical is None:
            return None
        if canonical != name:
            return f"differs only in case from {canonical}; may be loaded by case-insensitive lookups"
        return f"named like the instruction file {canonical} but outside where agents look for it"


# ----------------------------------------------------------------- detection
def _strip_prefix(name: str) -> str | None:
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def _changed_file(
    old: str | None, new: str | None, symlink: bool, matcher: InstructionMatcher
) -> ChangedFile | None:
    """Classify one file of a diff from the instruction files' point of view.

    A rename out of the instruction set is a deletion for the agent, a rename into
    it an addition; families are those of every agent the change affects.
    """
    old_fam = matcher.families(old) if old else []
    new_fam = matcher.families(new) if new else []
    families = sorted(set(old_fam) | set(new_fam))
    if not families:
        return None
    if old and new and old != new and old_fam and new_fam:
        return ChangedFile(
            path=new, old_path=old, status=FileStatus.renamed, families=families, symlink=symlink
        )
    if new and new_fam:
        status = FileStatus.modified if old == new else FileStatus.added
        return ChangedFile(path=new, status=status, families=families, symlink=symlink)
    assert old is not None
    return ChangedFile(path=old, status=FileStatus.deleted, families=families, symlink=symlink)


@dataclass(frozen=True)
class DiffFile:
    """One file of a unified diff: old and new path (None for /dev/null) and its git header."""

    old: str | None
    new: str | None
    header: str

    @property
    def symlink(self) -> bool:
        """git writes a symlink's mode (120000) in the `index` or `new/deleted file mode` line."""
        return any(line.rstrip().endswith(" 120000") for line in self.header.splitlines())


def diff_files(diff_text: str) -> list[DiffFile]:
    """Parse a unified diff as git writes it (renames, binary markers, mode lines)."""
    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError as exc:
        raise ConfigError(
            f"cannot parse the diff: {exc}", hint="pass a unified diff as written by `git diff`"
        ) from exc
    return [
        DiffFile(_strip_prefix(pf.source_file), _strip_prefix(pf.target_file), str(pf.patch_info))
        for pf in patch
    ]


def detect_diff(diff_text: str, matcher: InstructionMatcher, *, base: str = "", head: str = "") -> Detection:
    """Changed instruction files (and near misses) in a unified diff, as git writes it."""
    changed: list[ChangedFile] = []
    near: list[NearMiss] = []
    for df in diff_files(diff_text):
        entry = _changed_file(df.old, df.new, df.symlink, matcher)
        if entry is not None:
            changed.append(entry)
            continue
        for path in dict.fromkeys(p for p in (df.old, df.new) if p):
            reason = matcher.near_miss(path)
            if reason:
                near.append(NearMiss(path=path, reason=reason))
    return Detection(base=base, head=head, changed=changed, near_misses=near)


def detect_refs(repo: Repo, base: str, head: str, matcher: InstructionMatcher) -> Detection:
    """detect_diff over `git diff base head`; the Detection records the resolved shas."""
    base_sha, head_sha = repo.resolve(base), repo.resolve(head)
    return detect_diff(repo.diff(base_sha, head_sha), matcher, base=base_sha, head=head_sha)


# ------------------------------------------------------------------- overlay
@dataclass(frozen=True)
class Overlay:
    """The instruction files of one condition: regular files and symlinks (never followed)."""

    files: Mapping[str, bytes] = field(default_factory=dict)
    symlinks: Mapping[str, str] = field(default_factory=dict)

    @cached_property
    def sha256(self) -> str:
        """Stable over sorted paths and contents; a link hashes as its target."""
        parts = []
        for path in sorted({*self.files, *self.symlinks}):
            if path in self.symlinks:
                parts.append(f"L\0{path}\0{self.symlinks[path]}\n".encode())
            else:
                parts.append(f"F\0{path}\0{sha256_hex(self.files[path])}\n".encode())
        return sha256_hex(b"".join(parts))

    def spec(self, name: str) -> ConditionSpec:
        """The manifest entry: each path's sha256 (a link's is that of its target text)."""
        digests = {p: sha256_hex(d) for p, d in self.files.items()}
        digests.update({p: sha256_hex(t.encode()) for p, t in self.symlinks.items()})
        return ConditionSpec(name=name, files=dict(sorted(digests.items())), overlay_sha256=self.sha256)


def check_link(path: str, target: str, where: str) -> str:
    """Refuse an instruction symlink that escapes the repository; return the target."""
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if posixpath.isabs(target) or resolved == ".." or resolved.startswith("../"):
        raise ConfigError(
            f"instruction file {path} at {where} is a symlink to {target!r}, outside the repository",
            hint="point the link at a file inside the repository, or exclude it in .docdelta.yml",
        )
    return target


def _check_size(path: str, size: int, where: str) -> None:
    if size > MAX_INSTRUCTION_BYTES:
        raise ConfigError(
            f"instruction file {path} at {where} is {size} bytes, over the 1 MiB limit",
            hint="split it, or exclude it in .docdelta.yml (instructions.exclude)",
        )


def check_content(path: str, data: bytes, where: str) -> bytes:
    """Refuse instruction files no agent could sensibly read as text: too big or binary."""
    _check_size(path, len(data), where)
    if b"\0" in data:
        raise ConfigError(
            f"instruction file {path} at {where} is binary (contains a NUL byte)",
            hint="instruction files must be text; exclude it in .docdelta.yml (instructions.exclude)",
        )
    return data


def instruction_files(repo: Repo, sha: str, matcher: InstructionMatcher) -> Overlay:
    """Every instruction file at commit `sha`, checked, with symlinks kept as links."""
    where = sha[:12]
    entries = [e for e in repo.tree(sha) if e.is_blob and matcher.matches(e.path)]
    for e in entries:  # refuse a huge file before reading it
        _check_size(e.path, e.size or 0, where)
    by_oid = dict(repo.read_blobs(list({e.oid: None for e in entries})))
    files = {e.path: check_content(e.path, by_oid[e.oid], where) for e in entries if not e.is_symlink}
    links = {
        e.path: check_link(e.path, by_oid[e.oid].decode(errors="surrogateescape"), where)
        for e in entries
        if e.is_symlink
    }
    return Overlay(files=files, symlinks=links)
