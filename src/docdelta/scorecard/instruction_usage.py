"""Instruction usage: did the agents use what the changed instruction lines name?

A score says whether the answer got better; it does not say whether the edit is why.
When a PR adds "run `make check` before you commit", the direct evidence is whether
head runs ran (or recommended) `make check` and base runs did not. So, per added or
removed line of the docs diff (base vs head instruction files):

1. `docs_diff` extracts the commands and paths the line names: backticked spans
   (a span with a space is a command, a span shaped like a path is a path), path-like
   tokens in the prose, and every line of a shell code block (a command);
2. `tally` counts, per arm, the graded runs that used each one: a command is used
   when its words appear, in order, in a command the agent ran or gave in its answer
   (and that command holds no longer changed command that contains them);
   a path when the agent read, named or cited it, or a command of its mentions it.

Both are pure; `read_docs` feeds `docs_diff` from the sealed checkouts `docdelta run`
left in the workdir. The matching is deliberately plain (word runs and path suffixes,
no shell parsing): it is a behaviour signal next to the score, not a grade.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from docdelta.instructions.models import Detection, InstructionFlag
from docdelta.results.models import Manifest, RunResult
from docdelta.results.store import checkout_dir
from docdelta.scorecard import stats
from docdelta.scorecard.models import ArmUse, ChangedLine, InstructionRef
from docdelta.vocabulary import BASE, HEAD

RefKind = Literal["command", "path"]

SHELL_FENCES = frozenset({"", "sh", "bash", "shell", "console", "zsh", "fish", "terminal"})
"""Info strings of fenced code blocks whose lines are commands to run."""
KNOWN_FILES = frozenset(
    {"Makefile", "Dockerfile", "Justfile", "Rakefile", "Gemfile", "Procfile", "Jenkinsfile", "Vagrantfile"}
)
"""Extensionless file names that prose names without backticks."""

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+-]*)")
_SPAN = re.compile(r"(`+)(.+?)\1")
_URL = re.compile(r"\w+://\S+")
_PATH_TOKEN = re.compile(r"(?<![\w/.@:-])(?:\.{1,2}/)?[\w.*-]+(?:/[\w.*-]*)*")
_FILE_NAME = re.compile(r"[\w-]{2,}(?:\.[\w-]+)*\.[A-Za-z][\w]{0,7}")
_WORD = re.compile(r"[^\s'\"`;&|()<>]+")
_PROMPT = re.compile(r"^\s*[$>]\s+")
_EMPHASIS = re.compile(r"(\*\*|__|\*|_)(?P<inner>[^*_].*?)\1")
"""A token wrapped in Markdown emphasis (`**docs/api.md**`): the path is what is inside."""


# ------------------------------------------------------------------ extract
def path_like(token: str) -> bool:
    """`src/x.py`, `tests/`, `./run.sh`, `*.md`, `pyproject.toml`, `Makefile` — but not
    `and/or`, `e.g.` or `3.11`: a slash-separated token counts only with a file name at
    its end, a trailing slash or a leading `./`."""
    last = token.rstrip("/").rsplit("/", 1)[-1]
    if token in KNOWN_FILES or _FILE_NAME.fullmatch(last):
        return True
    return "/" in token and (token.endswith("/") or token.startswith(("./", "../")) or "*" in last)


def _command_words(text: str) -> list[str]:
    """Words of a command with quotes and shell separators dropped, so `bash -lc "make check"`
    and `cd x && make check` both hold the words `make check`."""
    return _WORD.findall(text)


def references(line: str, *, shell_block: bool = False) -> list[tuple[RefKind, str]]:
    """The commands and paths one instruction line names, in order, without repeats."""
    found: list[tuple[RefKind, str]] = []
    if shell_block:
        command = _PROMPT.sub("", line).strip()
        return [("command", command)] if command and not command.startswith("#") else []
    for m in _SPAN.finditer(line):
        span = _PROMPT.sub("", m.group(2)).strip()
        if not span or "://" in span:
            continue
        if not any(c.isspace() for c in span) and path_like(span):
            found.append(("path", span))
        elif _command_words(span) and not span.startswith("-"):
            found.append(("command", span))
    prose = _URL.sub(" ", _SPAN.sub(" ", line))
    for m in _PATH_TOKEN.finditer(prose):
        token = m.group(0).rstrip(".")
        bold = _EMPHASIS.fullmatch(token)
        token = bold.group("inner") if bold else token
        if path_like(token):
            found.append(("path", token))
    return list(dict.fromkeys(found))


def _shell_lines(lines: Sequence[str]) -> list[bool]:
    """Per line: inside a fenced shell block (fence lines themselves are not)."""
    out: list[bool] = []
    fence: str | None = None
    shell = False
    for line in lines:
        m = _FENCE.match(line)
        if fence is None and m:
            fence, shell = m.group(1), m.group(2).lower() in SHELL_FENCES
            out.append(False)
        elif fence is not None and m and m.group(1).startswith(fence) and not m.group(2):
            fence = None
            out.append(False)
        else:
            out.append(fence is not None and shell)
    return out


@dataclass(frozen=True)
class _Side:
    lines: list[str]
    shell: list[bool]

    @classmethod
    def of(cls, text: str) -> _Side:
        lines = text.splitlines()
        return cls(lines, _shell_lines(lines))

    def refs(
        self, path: str, change: Literal["added", "removed"], start: int, end: int
    ) -> Iterator[tuple[RefKind, str, ChangedLine]]:
        for i in range(start, end):
            line = ChangedLine(file=path, line=i + 1, change=change, text=self.lines[i].strip())
            for kind, ref in references(self.lines[i], shell_block=self.shell[i]):
                yield kind, ref, line


_LIST_NUMBER = re.compile(r"^(\s*)\d{1,9}([.)])(?=\s)")


def _unnumbered(line: str) -> str:
    """A line as the diff compares it: an ordered list item without its number, so a rule
    renumbered by an item inserted above it ("2. Run `make check`" -> "3. ...") is unchanged."""
    return _LIST_NUMBER.sub(r"\1#\2", line)


def docs_diff(files: Iterable[tuple[str, str, str]]) -> list[InstructionRef]:
    """Every reference on an added or removed line of `(path, base text, head text)` files.

    Removed lines are numbered in the base file, added lines in the head file, as a
    unified diff would show them; arms are left empty for `tally`. A reference named on
    both sides of one changed block (`src/` in `ruff check src/` -> `ruff check src/
    scripts/`) is left out: the edit did not change it, and both arms using it alike would
    only push what did change out of the rows shown. A reference on several changed lines
    is one, listing them all (in the order it was first met)."""
    out: dict[tuple[RefKind, str], list[ChangedLine]] = {}
    for path, old_text, new_text in files:
        old, new = _Side.of(old_text), _Side.of(new_text)
        keys = [_unnumbered(line) for line in old.lines], [_unnumbered(line) for line in new.lines]
        matcher = difflib.SequenceMatcher(None, *keys, autojunk=False)
        for _, i1, i2, j1, j2 in matcher.get_opcodes():
            removed, added = list(old.refs(path, "removed", i1, i2)), list(new.refs(path, "added", j1, j2))
            kept = {(k, r) for k, r, _ in removed} ^ {(k, r) for k, r, _ in added}
            for kind, ref, line in [*removed, *added]:
                if (kind, ref) in kept and line not in (lines := out.setdefault((kind, ref), [])):
                    lines.append(line)
    return [InstructionRef(kind=kind, ref=ref, lines=lines) for (kind, ref), lines in out.items()]


def read_docs(workdir: Path, manifest: Manifest, detection: Detection) -> list[InstructionRef]:
    """`docs_diff` of the changed instruction files, read from the base and head checkouts.

    Empty when the experiment has no base or head arm (nothing to diff against) or its
    checkouts are gone; a changed file that is a symlink on either side is skipped (the
    file it points to is diffed in its own right when it is an instruction file)."""
    specs = {c.name: c for c in manifest.conditions}
    if BASE not in specs or HEAD not in specs:
        return []
    base, head = (checkout_dir(workdir, specs[c].overlay_sha256) for c in (BASE, HEAD))
    if not (base.is_dir() and head.is_dir()):
        return []
    files = []
    for f in detection.changed:
        old, new = _read_text(base / (f.old_path or f.path)), _read_text(head / f.path)
        if old is not None and new is not None:
            files.append((f.path, old, new))
    return docs_diff(files)


def _read_text(path: Path) -> str | None:
    """The file's text; "" when absent (added or deleted), None for a symlink."""
    if path.is_symlink():
        return None
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return ""


# -------------------------------------------------------------------- tally
@dataclass(frozen=True)
class _RunUse:
    """What one run touched: the words of each command, and each path it read, named or cited."""

    commands: tuple[tuple[str, ...], ...]
    paths: frozenset[str]

    @classmethod
    def of(cls, run: RunResult) -> _RunUse:
        outcome = run.outcome
        commands = [c.command for c in outcome.metrics.commands]
        paths = list(outcome.metrics.files_read)
        if outcome.answer is not None:
            commands += outcome.answer.commands
            paths += [*outcome.answer.files, *(c.path for c in outcome.answer.citations)]
        words = tuple(tuple(_command_words(c)) for c in commands)
        paths += [w for ws in words for w in ws if "/" in w or "." in w or w in KNOWN_FILES]
        return cls(words, frozenset(p.removeprefix("./") for p in paths))

    def used(self, kind: RefKind, ref: str, longer: Sequence[tuple[str, ...]]) -> bool:
        """`longer`: the other changed commands that hold `ref`'s words; a command that
        holds one of them used that one (the most specific changed line it ran), not `ref`."""
        if kind == "command":
            words = tuple(_command_words(ref))
            return any(
                _contains(ws, words) and not any(_contains(ws, other) for other in longer)
                for ws in self.commands
            )
        return any(_path_matches(ref.removeprefix("./"), p) for p in self.paths)


def _contains(words: tuple[str, ...], run: tuple[str, ...]) -> bool:
    n = len(run)
    return n > 0 and any(words[i : i + n] == run for i in range(len(words) - n + 1))


def _path_matches(ref: str, path: str) -> bool:
    """`ref` names `path`: the same file seen from any depth (an absolute path in the
    sandbox ends with the repository path), a file under a `dir/` ref, or a glob match."""
    if ref.endswith("/"):
        return path.startswith(ref) or f"/{ref}" in path
    parts = path.split("/")
    return any(fnmatchcase("/".join(parts[i:]), ref) for i in range(len(parts)))


def tally(
    refs: Sequence[InstructionRef], runs: Sequence[RunResult], conditions: Sequence[str]
) -> list[InstructionRef]:
    """`refs` with, per condition, how many of `runs` (graded runs only) used each, and a
    head vs base Fisher test of those counts.

    A run's command counts for the most specific changed command it holds: after
    `python -m mypy src/` became `python -m mypy src/ scripts/`, a run of the new command
    used the added line, not the removed one its words begin with."""
    by_condition: dict[str, list[_RunUse]] = {c: [] for c in conditions}
    for run in runs:
        by_condition.setdefault(run.cell.condition, []).append(_RunUse.of(run))
    commands = {tuple(_command_words(r.ref)) for r in refs if r.kind == "command"}
    out = []
    for ref in refs:
        words = tuple(_command_words(ref.ref))
        longer = [c for c in commands if c != words and _contains(c, words)] if ref.kind == "command" else []
        arms: Mapping[str, list[bool]] = {
            c: [u.used(ref.kind, ref.ref, longer) for u in uses] for c, uses in by_condition.items()
        }
        head, base = ([1.0 if x else 0.0 for x in arms.get(c, [])] for c in (HEAD, BASE))
        out.append(
            ref.model_copy(
                update={
                    "arms": {c: ArmUse(used=sum(xs), runs=len(xs)) for c, xs in arms.items()},
                    "p_value": stats.fisher_passes(head, base),
                }
            )
        )
    return out


def audit_flags(results: Iterable[RunResult]) -> list[InstructionFlag]:
    """Per condition and file, how many audited runs missed it or got it although foreign."""
    audited: Counter[str] = Counter()
    hits: Counter[tuple[str, Literal["missing", "foreign"], str]] = Counter()
    for run in results:
        audit = run.instructions_seen
        if audit is None:
            continue
        condition = run.cell.condition
        audited[condition] += 1
        hits.update((condition, "missing", path) for path in audit.missing)
        hits.update((condition, "foreign", path) for path in audit.foreign)
    return [
        InstructionFlag(condition=c, kind=k, file=f, runs=n, audited=audited[c])
        for (c, k, f), n in sorted(hits.items())
    ]
