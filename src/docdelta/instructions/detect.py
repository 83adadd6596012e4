"""Which files are agent instruction files, and which of them a change touches.

The built-in table (`instructions.RULES`) says, per path pattern, which agent families
load the file by default (family names match the agent adapter names, e.g.
`claude_code`). It is deliberately faithful rather than generous: Claude Code does not
read AGENTS.md unless CLAUDE.md imports or links it, Gemini CLI does not read AGENTS.md
unless configured, so a PR that edits only AGENTS.md tells you nothing about them, and
the report must be able to say so. `detect_refs` adds what only the instruction graph of
each side knows: precedence, @imports, links, loading modes.

Patterns are gitignore globs (`docdelta.instructions.globs`). Projects extend the table with
`instructions.include` (family `custom`) and drop entries with `instructions.exclude`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from docdelta.errors import ConfigError
from docdelta.git import SYMLINK_MODE, Repo
from docdelta.instructions.globs import GlobSet
from docdelta.instructions.loading import (
    CUSTOM_FAMILY,
    RULES,
    GitTree,
    Graph,
    build,
    instruction_links,
    rules_for,
)
from docdelta.instructions.models import ChangedFile, Detection, FileStatus, NearMiss
from docdelta.vocabulary import ConditionSpec, sha256_hex

MAX_INSTRUCTION_BYTES = 1024 * 1024

BUILTIN_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = tuple((r.glob, r.families) for r in RULES)
"""(glob, families), from `instructions.RULES`. A path's families are the union over every
pattern it matches; precedence, imports and links are the instruction graph's business."""

KNOWN_FAMILIES = frozenset(f for _, families in BUILTIN_PATTERNS for f in families)
"""Agent families the table knows; adapters of the same name (claude_code, codex, ...) are them."""


def _literal_names(patterns: Iterable[str]) -> dict[str, str]:
    """lower-cased file name -> canonical name, for every pattern ending in a fixed name."""
    names = {}
    for glob in patterns:
        base = glob.rsplit("/", 1)[-1]
        if base and not any(c in base for c in "*?[") and base != "**":
            names[base.lower()] = base
    return names


# Too generic to flag when it turns up elsewhere (docs/guidelines.md is just a doc).
_GENERIC_NAMES = frozenset({"guidelines.md", "settings.json", "settings.local.json"})
_KNOWN_NAMES = {
    low: name
    for low, name in _literal_names(glob for glob, _ in BUILTIN_PATTERNS).items()
    if low not in _GENERIC_NAMES
}


class InstructionMatcher:
    """The built-in table plus a project's `include` globs, minus its `exclude` globs."""

    def __init__(self, include_globs: Sequence[str] = (), exclude_globs: Sequence[str] = ()) -> None:
        self.globs = (tuple(include_globs), tuple(exclude_globs))
        """What makes two matchers equal (a sealed checkout is reused only under the same)."""
        self._include = GlobSet(include_globs)
        self._exclude = GlobSet(exclude_globs)
        self._known: dict[str, tuple[str, ...]] = {}
        """path -> its families: a real tree's ~1,000 paths are asked about several times
        each (both trees, the graph, the seal), and each answer takes ~45 glob tests."""

    def _builtin_families(self, path: str) -> set[str]:
        return {f for rule in rules_for(path) for f in rule.families}

    def families(self, path: str) -> list[str]:
        """Agent families that load `path` by default; empty if it is no instruction file."""
        known = self._known.get(path)
        if known is None:
            found: set[str] = set()
            if not self._exclude.matches(path):
                found = self._builtin_families(path)
                if self._include.matches(path):
                    found.add(CUSTOM_FAMILY)
            known = self._known[path] = tuple(sorted(found))
        return list(known)

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
        readers = sorted(self._builtin_families(posixpath.join(posixpath.dirname(path), canonical)))
        if canonical != name and readers:
            return (
                f"differs only in case from {canonical}: where file names are case-insensitive (macOS, "
                f"Windows) {', '.join(readers)} would load it as its folder's {canonical}"
            )
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
    """One changed file: old and new path (None for /dev/null), and whether a side is a symlink."""

    old: str | None
    new: str | None
    symlink: bool


def _header_symlink(header: str) -> bool:
    """git writes a symlink's mode (120000) in the `index` or `new/deleted file mode` line."""
    return any(line.rstrip().endswith(f" {SYMLINK_MODE}") for line in header.splitlines())


def changed_files(repo: Repo, base: str, head: str) -> list[DiffFile]:
    """The files of `git diff base head` (renames detected) from its raw form, as `diff_files`
    reads them from the patch: a typechange (link <-> file) is a deletion plus an addition."""
    out = []
    for c in repo.changes(base, head):
        old_link, new_link = c.old_mode == SYMLINK_MODE, c.new_mode == SYMLINK_MODE
        if c.status == "A":
            out.append(DiffFile(None, c.new_path, new_link))
        elif c.status == "D":
            out.append(DiffFile(c.old_path, None, old_link))
        elif c.status == "T":
            out += [DiffFile(c.old_path, None, old_link), DiffFile(None, c.new_path, new_link)]
        else:
            out.append(DiffFile(c.old_path, c.new_path, old_link or new_link))
    return out


def diff_files(diff_text: str) -> list[DiffFile]:
    """Parse a unified diff as git writes it (renames, binary markers, mode lines)."""
    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError as exc:
        raise ConfigError(
            f"cannot parse the diff: {exc}", hint="pass a unified diff as written by `git diff`"
        ) from exc
    return [
        DiffFile(
            _strip_prefix(pf.source_file), _strip_prefix(pf.target_file), _header_symlink(str(pf.patch_info))
        )
        for pf in patch
    ]


def detect_diff(diff_text: str, matcher: InstructionMatcher, *, base: str = "", head: str = "") -> Detection:
    """Changed instruction files (and near misses) in a unified diff, as git writes it."""
    return _detect_files(diff_files(diff_text), matcher, base=base, head=head)


def _detect_files(
    files: Sequence[DiffFile], matcher: InstructionMatcher, *, base: str, head: str
) -> Detection:
    changed: list[ChangedFile] = []
    near: list[NearMiss] = []
    for df in files:
        entry = _changed_file(df.old, df.new, df.symlink, matcher)
        if entry is not None:
            changed.append(entry)
            continue
        for path in dict.fromkeys(p for p in (df.old, df.new) if p):
            reason = matcher.near_miss(path)
            if reason:
                near.append(NearMiss(path=path, reason=reason))
    return Detection(base=base, head=head, changed=changed, near_misses=near)


class ListedFile(Protocol):
    """A changed path as a forge's API lists it (a pull request's files): no diff, no checkout."""

    @property
    def path(self) -> str: ...
    @property
    def status(self) -> FileStatus: ...
    @property
    def old_path(self) -> str | None: ...


def detect_listed(
    files: Iterable[ListedFile], matcher: InstructionMatcher, base: str, head: str
) -> Detection:
    """The changed instruction files among `files` as listed by the API (no checkout of head
    needed, so a fork's head is read as data only)."""
    changed = [
        ChangedFile(path=f.path, status=f.status, old_path=f.old_path, families=matcher.families(f.path))
        for f in files
        if matcher.matches(f.path) or (f.old_path is not None and matcher.matches(f.old_path))
    ]
    return Detection(base=base, head=head, changed=changed)


def unread_by(agent: str, detection: Detection) -> list[str]:
    """The changed files `agent` does not read, when detection knows it as a family
    (claude_code, codex, opencode, gemini, ...). Detection's readers come from the instruction
    graph of base and head, so a file another one shadows (OpenCode: CLAUDE.md beside
    AGENTS.md) has lost that reader, and one an @import or a link reaches has gained it. The
    fake, command and built-in agents have no family and are not judged."""
    if agent not in KNOWN_FAMILIES:
        return []
    return [f.path for f in detection.changed if agent not in f.families]


def detect_refs(repo: Repo, base: str, head: str, matcher: InstructionMatcher) -> Detection:
    """What changed for the agents between two commits: `detect_diff` over `git diff base head`,
    with readers, loading modes, links and @imports from each side's instruction graph; files
    whose content changed only as an agent sees it (through a link or an import); near misses
    over both trees; and the range's other changed files. Records the resolved shas."""
    base_sha, head_sha = repo.resolve(base), repo.resolve(head)
    diff = changed_files(repo, base_sha, head_sha)
    by_name = _detect_files(diff, matcher, base=base_sha, head=head_sha)
    base_tree, head_tree = GitTree(repo, base_sha), GitTree(repo, head_sha)
    graphs = build(base_tree, matcher.families), build(head_tree, matcher.families)
    listed = _typechanges([*by_name.changed, *_link_changes(diff, graphs, by_name)])
    changed = [_with_graph(f, *graphs) for f in listed]
    seen, notes = _seen_changes(graphs, {p for f in changed for p in (f.path, f.old_path) if p}, matcher)
    changed += seen
    near = [*by_name.near_misses, *notes]
    if changed:
        near = _tree_near_misses(matcher, [base_tree, head_tree], graphs, near)
    instruction_paths = {p for f in changed for p in (f.path, f.old_path) if p}
    other = [
        p
        for df in diff
        for p in dict.fromkeys(x for x in (df.old, df.new) if x)
        if p not in instruction_paths and not any(p in g.links for g in graphs)
    ]
    return Detection(
        base=base_sha,
        head=head_sha,
        changed=changed,
        near_misses=near,
        other_changed=list(dict.fromkeys(other)),
    )


def _typechanges(files: list[ChangedFile]) -> list[ChangedFile]:
    """git writes a link that becomes a file (or back) as a deletion plus an addition of one
    path; for the agent that path was modified."""
    added = {f.path for f in files if f.status is FileStatus.added}
    gone = {f.path for f in files if f.status is FileStatus.deleted} & added
    out = []
    for f in files:
        if f.path in gone and f.status is FileStatus.deleted:
            continue
        out.append(f.model_copy(update={"status": FileStatus.modified}) if f.path in gone else f)
    return out


def _link_changes(
    diff: Sequence[DiffFile], graphs: tuple[Graph, Graph], by_name: Detection
) -> list[ChangedFile]:
    """Links the diff adds, deletes or retargets that are instruction links only by what is seen
    through them (a directory link `.cursor/rules -> ../docs/rules`)."""
    links = {*graphs[0].links, *graphs[1].links}
    known = {p for f in by_name.changed for p in (f.path, f.old_path) if p}
    out = []
    for df in diff:
        path = df.new or df.old
        if path is None or path in known or path not in links:
            continue
        status = (
            FileStatus.added
            if df.old is None
            else FileStatus.deleted
            if df.new is None
            else FileStatus.modified
        )
        out.append(ChangedFile(path=path, status=status, families=[], symlink=True))
    return out


def _with_graph(f: ChangedFile, base: Graph, head: Graph) -> ChangedFile:
    """A changed file's readers as the graphs say (base for its old path, head for the new):
    precedence drops a shadowed reader, a link or an @import adds one."""
    readers = {**base.readers(f.old_path or f.path), **head.readers(f.path)}
    for graph in (base, head):  # a directory link: the readers of what is seen through it
        if f.path in graph.links:
            inside = [x.path for fs in graph.loads.values() for x in fs if x.path.startswith(f"{f.path}/")]
            for path in inside:
                readers = {**graph.readers(path), **readers}
    if not readers and f.status is FileStatus.deleted:
        readers = base.readers(f.path)
    link = base.links.get(f.old_path or f.path) if f.status is FileStatus.deleted else head.links.get(f.path)
    return f.model_copy(
        update={
            "families": sorted(readers),
            "loading": {family: loaded.mode for family, loaded in sorted(readers.items())},
            "kinds": {family: loaded.kind for family, loaded in sorted(readers.items())},
            "imported_by": sorted({x.via for x in readers.values() if x.via}),
            "link_target": link,
            "symlink": link is not None or (f.symlink and f.status is not FileStatus.modified),
        }
    )


def _through_link(path: str, links: Iterable[str]) -> str | None:
    """The instruction link `path` is, or is seen through (`.cursor/rules` for `.cursor/rules/a.mdc`)."""
    return next((link for link in links if path == link or path.startswith(f"{link}/")), None)


def _seen_changes(
    graphs: tuple[Graph, Graph], listed: set[str], matcher: InstructionMatcher
) -> tuple[list[ChangedFile], list[NearMiss]]:
    """Files the diff does not list as instruction files but that changed for an agent loading
    them. Each condition carries its instruction files and links, so these are evaluated: a
    file that appears or disappears (a link added or left dangling), and a changed content
    that is an instruction file (`CLAUDE.md -> AGENTS.md`). A doc reached through an @import
    or a link is the source commit's version in every condition: its edit is a note."""
    base, head = graphs
    links = {*base.links, *head.links}
    changed, notes = [], []
    loaded = {f.path for g in graphs for files in g.loads.values() for f in files} | links
    for path in sorted(loaded - listed):
        before, after = base.digests.get(path), head.digests.get(path)
        if before == after:
            continue
        link = _through_link(path, links)
        ends = [e for e in (base.ends.get(path), head.ends.get(path)) if e]
        carried = matcher.matches(path) or link is not None
        if carried and (None in (before, after) or all(matcher.matches(e) for e in ends)):
            status = FileStatus.added if before is None else FileStatus.modified
            status = FileStatus.deleted if after is None else status
            entry = ChangedFile(path=path, status=status, families=[], symlink=path in links)
            changed.append(_with_graph(entry, base, head))
            continue
        readers = {**base.readers(path), **head.readers(path)}
        importers = sorted({x.via for x in readers.values() if x.via})
        how = (
            f"is @imported by {', '.join(importers)}" if importers else f"is seen through the symlink {link}"
        )
        notes.append(
            NearMiss(
                path=path,
                reason=f"changed and {how} (loaded by {', '.join(sorted(readers)) or 'no agent'}), but as a "
                "doc it is the source commit's version in every condition: this edit is not evaluated",
            )
        )
    return changed, notes


def _tree_near_misses(
    matcher: InstructionMatcher, trees: Sequence[GitTree], graphs: Sequence[Graph], found: list[NearMiss]
) -> list[NearMiss]:
    """Near misses anywhere in base's or head's tree (not only in the diff), plus dangling
    instruction links: confounds of any evaluation, whether or not the PR touched them."""
    out = {n.path: n for n in found}
    for tree in trees:
        for path in tree.paths():
            reason = None if path in out else matcher.near_miss(path)
            if reason:
                out[path] = NearMiss(path=path, reason=reason)
    for graph, side in zip(graphs, ("base", "head"), strict=True):
        for path in graph.dangling:
            out.setdefault(
                path,
                NearMiss(
                    path=path,
                    reason=f"a symlink to {graph.links[path]!r}, which does not exist at {side}: "
                    "no agent can read it",
                ),
            )
    return [out[p] for p in sorted(out)]


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
    links = instruction_links(GitTree(repo, sha), matcher.families)
    entries = [e for e in repo.tree(sha) if e.is_blob and (matcher.matches(e.path) or e.path in links)]
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
