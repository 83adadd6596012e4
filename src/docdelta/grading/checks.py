"""Deterministic checks on an agent's diff, and "never do X" mistake rules.

The diff is split per file here (`parse_diff`), once, for both the hard checks and
the hidden-test grader (which decides file by file what to apply). We parse git's
own format rather than using a generic patch library because the grader must keep
each file's exact bytes (binary patches, mode lines) to re-apply them with
`git apply`, and must see renames and symlinks to judge them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from docdelta.agents.models import AgentMetrics
from docdelta.instructions.globs import GlobSet
from docdelta.results.grades import CheckResult, ChecksResult, MistakeHit
from docdelta.tasks.models import HardChecks, MistakeRule, mistake_regex

SYMLINK_MODE = "120000"
_MAX_EXAMPLES = 3
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a `git diff`: its paths, kind and the raw bytes to re-apply."""

    old: str | None
    """None for an added file."""
    new: str | None
    """None for a deleted file."""
    raw: bytes
    symlink: bool = False
    binary: bool = False
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        """Every path the edit touches (both sides of a rename)."""
        return list(dict.fromkeys(p for p in (self.old, self.new) if p))

    @property
    def path(self) -> str:
        return self.new or self.old or ""


def _unquote(text: str) -> str:
    """git's C-style quoting of unusual paths (`core.quotePath` or control characters)."""
    if not (len(text) >= 2 and text[0] == '"' and text[-1] == '"'):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1 : i + 4].isdigit():
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(_ESCAPES.get(body[i + 1], ord(body[i + 1])))
            i += 2
    return out.decode("utf-8", "surrogateescape")


def _side(text: str, prefix: str) -> str | None:
    text = _unquote(text.rstrip("\n").split("\t")[0])
    if text == "/dev/null":
        return None
    return text[len(prefix) :] if text.startswith(prefix) else text


def _git_line_paths(line: str) -> tuple[str | None, str | None]:
    """Paths from `diff --git a/X b/Y`; unambiguous only when quoted or X == Y."""
    rest = line[len("diff --git ") :].rstrip("\n")
    if rest.startswith('"'):
        m = re.fullmatch(r'("(?:[^"\\]|\\.)*") (.*)', rest)
        if m:
            return _side(m.group(1), "a/"), _side(m.group(2), "b/")
    half = (len(rest) - 1) // 2
    old, new = rest[:half], rest[half + 1 :]
    if old[2:] == new[2:]:
        return old[2:], new[2:]
    return None, None


def _parse_file(lines: list[str]) -> FileDiff:  # noqa: C901 - one branch per git diff header line
    old, new = _git_line_paths(lines[0])
    symlink = binary = in_hunks = False
    added: list[str] = []
    removed: list[str] = []
    for line in lines[1:]:
        if in_hunks:
            if line.startswith("+"):
                added.append(line[1:].rstrip("\n"))
            elif line.startswith("-"):
                removed.append(line[1:].rstrip("\n"))
            continue
        if line.startswith("@@"):
            in_hunks = True
        elif line.startswith(("--- ", "+++ ")):
            side = _side(line[4:], "a/" if line[0] == "-" else "b/")
            old, new = (side, new) if line[0] == "-" else (old, side)
        elif line.startswith(("rename from ", "copy from ")):
            old = _unquote(line.split(" ", 2)[2].rstrip("\n"))
        elif line.startswith(("rename to ", "copy to ")):
            new = _unquote(line.split(" ", 2)[2].rstrip("\n"))
        elif line.startswith("new file mode "):
            old = None
        elif line.startswith("deleted file mode "):
            new = None
        elif line.startswith(("GIT binary patch", "Binary files ")):
            binary = True
        if line.rstrip("\n").endswith(" " + SYMLINK_MODE):
            symlink = True
    raw = "".join(lines).encode("utf-8", "surrogateescape")
    return FileDiff(old, new, raw, symlink=symlink, binary=binary, added=added, removed=removed)


def parse_diff(diff: bytes) -> list[FileDiff]:
    """Split a `git diff` (text or `--binary`) into files; anything before the first file is ignored."""
    text = diff.decode("utf-8", "surrogateescape")
    files: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            files.append([line])
        elif files:
            files[-1].append(line)
    return [_parse_file(chunk) for chunk in files]


# -------------------------------------------------------------- hard checks
def _changed_paths(files: Sequence[FileDiff]) -> list[str]:
    return list(dict.fromkeys(p for f in files for p in f.paths))


def _glob_checks(checks: HardChecks, paths: list[str]) -> Iterable[CheckResult]:
    for glob in checks.require_changed:
        hits = [p for p in paths if GlobSet([glob]).matches(p)]
        note = f"changed {', '.join(hits)}" if hits else f"no changed path matches {glob!r}"
        yield CheckResult(name=f"require_changed {glob}", passed=bool(hits), note=note)
    for glob in checks.forbid_changed:
        hits = [p for p in paths if GlobSet([glob]).matches(p)]
        note = f"changed forbidden {', '.join(hits)}" if hits else "untouched"
        yield CheckResult(name=f"forbid_changed {glob}", passed=not hits, note=note)


def _snippet_checks(checks: HardChecks, files: Sequence[FileDiff]) -> Iterable[CheckResult]:
    added = [(f.path, line) for f in files for line in f.added]
    for snippet in checks.expect_added:
        where = next((path for path, line in added if snippet in line), None)
        note = f"added in {where}" if where else "not in any added line"
        yield CheckResult(name=f"expect_added {snippet!r}", passed=where is not None, note=note)
    for snippet in checks.forbid_added:
        where = next((path for path, line in added if snippet in line), None)
        note = f"added in {where}" if where else "absent"
        yield CheckResult(name=f"forbid_added {snippet!r}", passed=where is None, note=note)


def _size_checks(checks: HardChecks, paths: list[str], files: Sequence[FileDiff]) -> Iterable[CheckResult]:
    n_files, n_lines = len(paths), sum(len(f.added) + len(f.removed) for f in files)
    if checks.min_files is not None:
        yield CheckResult(
            name=f"min_files {checks.min_files}",
            passed=n_files >= checks.min_files,
            note=f"{n_files} file(s) changed",
        )
    if checks.max_files is not None:
        yield CheckResult(
            name=f"max_files {checks.max_files}",
            passed=n_files <= checks.max_files,
            note=f"{n_files} file(s) changed",
        )
    if checks.max_lines is not None:
        yield CheckResult(
            name=f"max_lines {checks.max_lines}",
            passed=n_lines <= checks.max_lines,
            note=f"{n_lines} line(s) added or removed",
        )


def _mistake(rule: MistakeRule, files: Sequence[FileDiff], metrics: AgentMetrics) -> MistakeHit:
    regex = mistake_regex(rule.pattern)
    only = GlobSet(rule.paths) if rule.paths else None
    hits: list[str] = []
    if rule.scope in ("added", "both"):
        for f in files:
            if only is None or only.matches(f.path):
                hits += [f"{f.path}: {line.strip()}" for line in f.added if regex.search(line)]
    if rule.scope in ("commands", "both"):
        hits += [f"$ {c.command}" for c in metrics.commands if regex.search(c.command)]
    return MistakeHit(rule=rule.id, count=len(hits), examples=hits[:_MAX_EXAMPLES])


def run_checks(
    checks: HardChecks,
    rules: Sequence[MistakeRule],
    agent_diff: bytes,
    metrics: AgentMetrics | None = None,
) -> ChecksResult:
    """Every hard check (pass/fail with a note) and every mistake rule's hit count for one run.

    Hard checks look at the whole diff the agent produced, test files included:
    they judge what the agent did, not what the hidden-test grader keeps.
    """
    files = parse_diff(agent_diff)
    paths = _changed_paths(files)
    results = [
        *_glob_checks(checks, paths),
        *_snippet_checks(checks, files),
        *_size_checks(checks, paths, files),
    ]
    used = metrics or AgentMetrics()
    return ChecksResult(checks=results, mistakes=[_mistake(rule, files, used) for rule in rules])
