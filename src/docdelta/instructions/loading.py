"""The instruction graph: from one tree, what each agent family loads, and how.

A file name is not enough to say who reads what. A `CLAUDE.md` that holds only
`@AGENTS.md` makes Claude Code a reader of AGENTS.md; OpenCode takes the first of a
root AGENTS.md / CLAUDE.md and never the other; Codex prefers AGENTS.override.md in a
directory; `CLAUDE.md -> AGENTS.md` serves one file under two names and a dangling
link serves nothing; `.cursor/rules -> ../docs/rules` turns docs into Cursor rules.
And loading differs: a root AGENTS.md is in every prompt (`always`), a skill, slash
command, subagent or nested file only when called for (`on_demand`), settings and hooks
steer the agent without being read as text (`config`).

`RULES` is the one table of where agents look (detection's matcher is built from it);
`build` applies precedence, follows links and `@path` imports over a `Tree` (a commit
or a sealed checkout) and returns a `Graph`: per family the loaded files, their mode,
and what brought them in. Only what docdelta has checked against an agent's source or
behaviour is modelled beyond the table (claude_code, codex, opencode, gemini, zed).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from docdelta.git import Repo, TreeEntry
from docdelta.instructions.globs import GlobSet
from docdelta.instructions.models import LoadMode
from docdelta.vocabulary import sha256_hex

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

ALWAYS, ON_DEMAND, CONFIG = LoadMode.always, LoadMode.on_demand, LoadMode.config
CUSTOM_FAMILY = "custom"


@dataclass(frozen=True)
class Rule:
    """Files matching `glob` are loaded by `families` in `mode`; `kind` names them for a reader."""

    glob: str
    families: tuple[str, ...]
    mode: LoadMode
    kind: str


_NESTED = "nested instructions, loaded when the agent works in that directory"
# Ordered: for each (path, family) the first matching rule gives the mode, so root files
# (always) come before the same name at any depth (on demand).
RULES: tuple[Rule, ...] = (
    Rule("/AGENTS.override.md", ("codex",), ALWAYS, "project instructions (override)"),
    Rule("/AGENTS.md", ("codex", "opencode", "cursor", "copilot", "zed"), ALWAYS, "project instructions"),
    Rule("/AGENT.md", ("zed",), ALWAYS, "project instructions"),
    Rule("/CLAUDE.md", ("claude_code", "opencode", "zed", "copilot"), ALWAYS, "project memory"),
    Rule("/.claude/CLAUDE.md", ("claude_code",), ALWAYS, "project memory"),
    Rule("/CLAUDE.local.md", ("claude_code",), ALWAYS, "local memory"),
    Rule("/.claude/rules/**", ("claude_code",), ALWAYS, "rule"),
    Rule("/GEMINI.md", ("gemini", "zed", "copilot"), ALWAYS, "context file"),
    # Gemini CLI scans subdirectories for GEMINI.md at start-up: nested ones load too.
    Rule("GEMINI.md", ("gemini",), ALWAYS, "context file"),
    Rule("/.cursorrules", ("cursor", "zed"), ALWAYS, "rules"),
    Rule("**/.cursor/rules/**/*.mdc", ("cursor",), ALWAYS, "rule"),
    Rule("/.github/copilot-instructions.md", ("copilot", "zed"), ALWAYS, "repository instructions"),
    Rule("/.github/instructions/**/*.instructions.md", ("copilot",), ON_DEMAND, "path-specific instructions"),
    Rule("/.clinerules", ("cline", "zed"), ALWAYS, "rules"),
    Rule("/.clinerules/**", ("cline",), ALWAYS, "rules"),
    Rule("/.windsurfrules", ("windsurf", "zed"), ALWAYS, "rules"),
    Rule("/.windsurf/rules/**", ("windsurf",), ALWAYS, "rules"),
    Rule("/CONVENTIONS.md", ("aider",), ALWAYS, "conventions"),
    Rule("/.junie/guidelines.md", ("junie",), ALWAYS, "guidelines"),
    Rule("/.rules", ("zed",), ALWAYS, "rules"),
    Rule("/.kiro/steering/**", ("kiro",), ALWAYS, "steering"),
    Rule("/.amazonq/rules/**", ("amazon_q",), ALWAYS, "rules"),
    Rule("/.roo/rules/**", ("roo",), ALWAYS, "rules"),
    Rule("/.roo/rules-*/**", ("roo",), ALWAYS, "mode rules"),
    Rule("/.roorules", ("roo",), ALWAYS, "rules"),
    Rule("AGENTS.override.md", ("codex",), ON_DEMAND, _NESTED),
    Rule("AGENTS.md", ("codex", "opencode", "cursor", "copilot"), ON_DEMAND, _NESTED),
    Rule("CLAUDE.md", ("claude_code", "opencode"), ON_DEMAND, _NESTED),
    Rule("CLAUDE.local.md", ("claude_code",), ON_DEMAND, _NESTED),
    Rule("**/.claude/rules/**", ("claude_code",), ON_DEMAND, _NESTED),
    Rule("**/.claude/skills/**", ("claude_code", "opencode"), ON_DEMAND, "skill"),
    Rule("/.agents/skills/**", ("codex", "opencode"), ON_DEMAND, "skill"),
    Rule("/.opencode/skill*/**", ("opencode",), ON_DEMAND, "skill"),
    Rule("/.opencode/command*/**", ("opencode",), ON_DEMAND, "slash command"),
    Rule("/.opencode/agent*/**", ("opencode",), ON_DEMAND, "subagent"),
    Rule("**/.claude/commands/**", ("claude_code",), ON_DEMAND, "slash command"),
    Rule("**/.claude/agents/**", ("claude_code",), ON_DEMAND, "subagent"),
    Rule("/.gemini/commands/**", ("gemini",), ON_DEMAND, "slash command"),
    Rule("/.pi/prompts/**", ("pi",), ON_DEMAND, "prompt template"),
    Rule("/.claude/settings.json", ("claude_code",), CONFIG, "settings (permissions, hooks)"),
    Rule("/.claude/settings.local.json", ("claude_code",), CONFIG, "local settings (permissions, hooks)"),
    Rule("/.claude/hooks/**", ("claude_code",), CONFIG, "hook"),
    Rule("/.codex/**", ("codex",), CONFIG, "configuration, hooks"),
    Rule("/.gemini/settings.json", ("gemini",), CONFIG, "settings"),
)

FIRST_FOUND: Mapping[str, tuple[str, ...]] = {
    # OpenCode 1.18.33 (its source, and the scripted server's request log): the first name
    # of AGENTS.md, CLAUDE.md found walking up from the working directory, only that one.
    "opencode": ("AGENTS.md", "CLAUDE.md"),
    # Zed's documented order; it reads the first that exists.
    "zed": (
        ".rules", ".cursorrules", ".windsurfrules", ".clinerules", ".github/copilot-instructions.md",
        "AGENT.md", "AGENTS.md", "CLAUDE.md", "GEMINI.md",
    ),
}  # fmt: skip
"""Family -> root-relative files of which it loads only the first present (readable) one."""

IMPORTING: frozenset[str] = frozenset({"claude_code", "gemini"})
"""Families that expand `@path` imports in their memory files (Claude Code, Gemini CLI)."""
MAX_IMPORT_DEPTH = 5
"""Claude Code follows imports at most five hops deep."""
_MAX_LINK_HOPS = 40
_RULE_SETS = tuple((GlobSet([r.glob]), r) for r in RULES)
_ANY_RULE = GlobSet(r.glob for r in RULES)
"""The table's globs as one set (none is a `!` pattern, so it matches where any rule does)."""


def rules_for(path: str) -> tuple[Rule, ...]:
    """Every rule matching `path`, in table order. Nearly every path of a real tree matches
    none, and is told so by one glob test instead of one per rule (~45): detection asks
    about each of a thousand-file tree's paths several times."""
    if not _ANY_RULE.matches(path):
        return ()
    return tuple(r for g, r in _RULE_SETS if g.matches(path))


def rule_for(path: str, family: str) -> Rule | None:
    """The first rule under which `family` loads `path`."""
    return next((r for r in rules_for(path) if family in r.families), None)


# ---------------------------------------------------------------------- trees
class Tree(Protocol):
    """A repository tree as stored: regular files and symlinks (links are never followed here)."""

    def paths(self) -> Sequence[str]:
        """Every regular file and symlink, repository-relative."""
        ...

    def link(self, path: str) -> str | None:
        """The stored target of the symlink at `path`; None if it is no symlink."""
        ...

    def blob(self, path: str) -> bytes | None:
        """The content of the regular file at `path`; None if there is none."""
        ...


class GitTree:
    """The tree of one commit; contents are read on first use, links in one batch."""

    def __init__(self, repo: Repo, sha: str) -> None:
        self.repo, self.sha = repo, sha
        self.entries: dict[str, TreeEntry] = {e.path: e for e in repo.tree(sha) if e.is_blob}
        links = [e for e in self.entries.values() if e.is_symlink]
        by_oid = dict(repo.read_blobs(list({e.oid: None for e in links})))
        self._links = {e.path: by_oid[e.oid].decode(errors="surrogateescape") for e in links}
        self._blobs: dict[str, bytes] = {}

    def paths(self) -> Sequence[str]:
        return list(self.entries)

    def link(self, path: str) -> str | None:
        return self._links.get(path)

    def prefetch(self, paths: Iterable[str]) -> None:
        """Read the contents of `paths` in one `cat-file --batch` (instead of one git per file)."""
        wanted = [self.entries[p] for p in paths if p in self.entries and p not in self._blobs]
        wanted = [e for e in wanted if not e.is_symlink]
        data = dict(self.repo.read_blobs(list({e.oid: None for e in wanted})))
        self._blobs.update({e.path: data[e.oid] for e in wanted})

    def blob(self, path: str) -> bytes | None:
        entry = self.entries.get(path)
        if entry is None or entry.is_symlink:
            return None
        if path not in self._blobs:
            self._blobs[path] = self.repo.read_blob(entry.oid)
        return self._blobs[path]


class DirTree:
    """A checkout on disk (a sealed condition), `.git` excluded."""

    def __init__(self, root: Path) -> None:
        self.root = root
        found = []
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root).as_posix()
            if rel.split("/", 1)[0] != ".git" and (p.is_symlink() or p.is_file()):
                found.append(rel)
        self._paths = found

    def paths(self) -> Sequence[str]:
        return self._paths

    def link(self, path: str) -> str | None:
        full = self.root / path
        return str(full.readlink()) if full.is_symlink() else None

    def blob(self, path: str) -> bytes | None:
        full = self.root / path
        if full.is_symlink() or not full.is_file():
            return None
        return full.read_bytes()


def _within(base_dir: str, target: str) -> str | None:
    """`target` joined to `base_dir` and normalised; None if absolute or leaving the repository."""
    if posixpath.isabs(target):
        return None
    joined = posixpath.normpath(posixpath.join(base_dir, target))
    if joined == ".." or joined.startswith("../"):
        return None
    return "" if joined == "." else joined


def resolve(tree: Tree, path: str, hops: int = 0) -> str | None:
    """Where `path` ends after following every link in it (file and directory links alike),
    or None when a link dangles out of the repository or loops."""
    current = ""
    for part in path.split("/"):
        step = f"{current}/{part}" if current else part
        target = tree.link(step)
        if target is not None:
            inside = _within(posixpath.dirname(step), target)
            if inside is None or hops >= _MAX_LINK_HOPS:
                return None
            resolved = resolve(tree, inside, hops + 1) if inside else ""
            if resolved is None:
                return None
            step = resolved
        current = step
    return current


def read(tree: Tree, path: str) -> bytes | None:
    """What an agent opening `path` gets: the content at the end of its links, or None."""
    end = resolve(tree, path)
    return None if end is None else tree.blob(end)


def visible_paths(tree: Tree) -> list[str]:
    """Every path an agent can open: the stored paths plus files seen through directory links
    (`.cursor/rules/x.mdc` when `.cursor/rules -> ../docs/rules`)."""
    stored = list(tree.paths())
    out = list(stored)
    for path in stored:
        target = tree.link(path)
        if target is None:
            continue
        end = resolve(tree, path)
        if end is None:
            continue
        prefix = f"{end}/" if end else ""
        out.extend(f"{path}/{p[len(prefix) :]}" for p in stored if p.startswith(prefix) and p != end)
    return list(dict.fromkeys(out))


def instruction_links(tree: Tree, families: Callable[[str], Sequence[str]]) -> dict[str, str]:
    """Symlinks that are instruction files or through which instruction files are seen
    (a directory link `.cursor/rules`), path -> stored target."""
    paths = visible_paths(tree)
    out: dict[str, str] = {}
    for path in tree.paths():
        target = tree.link(path)
        if target is None:
            continue
        inside = [p for p in paths if p.startswith(f"{path}/")]
        if families(path) or any(families(p) for p in inside):
            out[path] = target
    return out


# --------------------------------------------------------------------- imports
@cache
def _markdown() -> MarkdownIt:
    """The parser that finds code spans, imported on first use: a diff-only `detect` reads no
    file, and markdown-it costs a fifth of its start-up."""
    from markdown_it import MarkdownIt  # noqa: PLC0415

    return MarkdownIt("commonmark")


_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)")
_TRAILING = ".,;:!?)]}\"'"


def imports(text: str) -> list[str]:
    """The `@path` references of a memory file as Claude Code reads them: outside code spans
    and code blocks (parsed as CommonMark), whitespace-delimited, `\\ ` for a space."""
    found: list[str] = []
    for token in _markdown().parse(text):
        if token.type != "inline":
            continue
        for child in token.children or ():
            if child.type == "text":
                found.extend(m.group(1).replace("\\ ", " ") for m in _IMPORT.finditer(child.content))
    return found


def _import_target(tree: Tree, importer: str, ref: str) -> str | None:
    """The repository path `ref` names from `importer`, if it exists there (trailing
    punctuation dropped when only the bare name exists); home paths are outside the tree."""
    if ref.startswith("~"):
        return None
    for candidate in (ref, ref.rstrip(_TRAILING)):
        path = _within(posixpath.dirname(importer), candidate)
        if path and read(tree, path) is not None:
            return path
    return None


# ----------------------------------------------------------------------- graph
@dataclass(frozen=True)
class Loaded:
    """One file an agent family loads: how, what it is, and the file that @imported it."""

    path: str
    mode: LoadMode
    kind: str
    via: str | None = None


@dataclass(frozen=True)
class Graph:
    """What each family loads from one tree, with the links among instruction files."""

    loads: Mapping[str, tuple[Loaded, ...]]
    links: Mapping[str, str] = field(default_factory=dict)
    """Instruction symlinks: path -> stored target."""
    ends: Mapping[str, str | None] = field(default_factory=dict)
    """Every loaded or linked path -> where its links end (None: dangling or outside)."""
    digests: Mapping[str, str | None] = field(default_factory=dict)
    """Every loaded or linked path -> sha256 of what an agent reading it gets (None: nothing)."""

    def files(self, family: str, *modes: LoadMode) -> list[Loaded]:
        """What `family` loads, optionally only in the given modes."""
        return [f for f in self.loads.get(family, ()) if not modes or f.mode in modes]

    def readers(self, path: str) -> dict[str, Loaded]:
        """Family -> how it loads `path`, directly or through a link that ends there."""
        out: dict[str, Loaded] = {}
        for family, files in self.loads.items():
            for f in files:
                if path in (f.path, self.ends.get(f.path)) and family not in out:
                    out[family] = f
        return out

    dangling: tuple[str, ...] = ()
    """Instruction links that end nowhere (a missing target, or outside the repository)."""


def _sha(data: bytes | None) -> str | None:
    return None if data is None else sha256_hex(data)


def build(tree: Tree, families: Callable[[str], Sequence[str]]) -> Graph:
    """The instruction graph of `tree`. `families(path)` is the project's matcher (the
    built-in table plus `include`, minus `exclude`); it decides what counts at all."""
    paths = visible_paths(tree)
    candidates = {p: fams for p in paths if (fams := families(p))}
    if isinstance(tree, GitTree):
        tree.prefetch(resolve(tree, p) or p for p in candidates)
    links = instruction_links(tree, families)
    ends: dict[str, str | None] = {p: resolve(tree, p) for p in {*candidates, *links}}
    texts: dict[str, bytes | None] = {p: read(tree, p) for p in ends}

    loads: dict[str, dict[str, Loaded]] = {}
    for path, fams in candidates.items():
        if texts[path] is None:
            continue  # a dangling link: nothing to load
        for family in fams:
            rule = rule_for(path, family)
            mode, kind = (rule.mode, rule.kind) if rule else (ALWAYS, "project instruction file")
            loads.setdefault(family, {})[path] = Loaded(path, mode, kind)
    for family, order in FIRST_FOUND.items():
        present = [p for p in order if p in loads.get(family, {})]
        for shadowed in present[1:]:
            del loads[family][shadowed]
    codex = loads.get("codex", {})
    for path in [p for p in codex if posixpath.basename(p) == "AGENTS.override.md"]:
        codex.pop(posixpath.join(posixpath.dirname(path), "AGENTS.md"), None)
    for family in IMPORTING & set(loads):
        _expand_imports(tree, loads[family], texts, ends)
    digests = {p: _sha(t) for p, t in texts.items()}
    frozen = {f: tuple(sorted(v.values(), key=lambda x: x.path)) for f, v in sorted(loads.items()) if v}
    stored = tree.paths()
    dangling = tuple(
        sorted(
            p
            for p in links
            if (end := ends[p]) is None
            or (tree.blob(end) is None and not any(s.startswith(f"{end}/") for s in stored))
        )
    )
    return Graph(loads=frozen, links=links, ends=ends, digests=digests, dangling=dangling)


def _expand_imports(
    tree: Tree, loaded: dict[str, Loaded], texts: dict[str, bytes | None], ends: dict[str, str | None]
) -> None:
    """Add every file reached by @imports (recursively, at most MAX_IMPORT_DEPTH hops, each file
    once, so cycles end) in the importer's mode; an always-loaded import upgrades an on-demand one."""
    frontier = [(f.path, f.mode, 0) for f in loaded.values() if f.mode is not CONFIG]
    while frontier:
        importer, mode, depth = frontier.pop(0)
        if depth >= MAX_IMPORT_DEPTH:
            continue
        text = texts.get(importer)
        if text is None:
            continue
        for ref in imports(text.decode("utf-8", "replace")):
            target = _import_target(tree, importer, ref)
            if target is None:
                continue
            known = loaded.get(target)
            if known is not None and (known.mode is ALWAYS or mode is not ALWAYS):
                continue
            loaded[target] = Loaded(target, mode, known.kind if known else "import", via=importer)
            if target not in texts:
                texts[target], ends[target] = read(tree, target), resolve(tree, target)
            frontier.append((target, mode, depth + 1))
