"""Globs over repository-relative POSIX paths, with gitignore's rules, by `pathspec`.

Every glob docdelta evaluates goes through `GlobSet`: the instruction-file table, a
project's `instructions.include`/`exclude` and `checkout.strip`, the grader's test and
build protections, `require_changed`/`forbid_changed` checks. One library, one
dialect, so a pattern means the same thing wherever a user writes it: a pattern
without a slash matches a name at any depth (`AGENTS.md`, `*.test.[jt]s`), one with a
slash is anchored at the root (`/CLAUDE.md`, `.github/instructions/*.md`), `*`/`?`/
`[...]` stay within a segment, `**` spans segments, `dir/` matches everything below a
directory, and a later `!pattern` re-includes what an earlier one matched.
"""

from __future__ import annotations

from collections.abc import Iterable

from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

DIALECT = "gitignore"


def check_glob(pattern: str) -> str:
    """`pattern`, or ValueError when it would match nothing (empty, `/`, a `#` comment)."""
    if not pattern.strip().strip("/") or GitIgnoreSpecPattern(pattern).include is None:
        raise ValueError(f"empty glob {pattern!r}: it would match no path")
    return pattern


class GlobSet:
    """A set of globs; `matches(path)` says whether the set, read as a .gitignore, selects `path`."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(check_glob(p) for p in patterns)
        self._spec = GitIgnoreSpec.from_lines(self.patterns)

    def matches(self, path: str) -> bool:
        return bool(self.patterns) and self._spec.match_file(path)

    def __bool__(self) -> bool:
        return bool(self.patterns)
