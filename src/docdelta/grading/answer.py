"""Deterministic scoring of an agent's JSON answer against a task's reviewed gold.

Every gold item becomes one `ScoreItem` whose note tells a maintainer what the
agent missed, so the report can say *why* a run lost points, not only that it did.

Matching rules (decided here, tested in tests/unit/test_answer_scoring.py):

- **Commands** are normalized (prompt marks `$ `/`% `/`> `, backticks, surrounding
  quotes, runs of whitespace; shell operators `&& || ; |` become separate tokens),
  then split into shell words, so quoting style does not matter.
  A gold command is hit when its tokens start a command segment of a candidate:
  `make test` matches `make test -k foo` and `cd app && make test`, not
  `cmake test-all`. Candidates are the answer's `commands` plus commands quoted in
  its text (fenced code lines, `$ ` lines, inline code spans), because agents often
  put the command in prose even when asked for a list.
- **Guardrails** (forbidden commands/snippets) are hit — i.e. respected — when no
  recommended command contains the forbidden tokens anywhere. Only `commands`,
  fenced code lines and `$ ` lines count as recommending: an inline span in prose
  ("never run `git push --force`") is how answers *warn*, so it is not held against them.
- **Files**: paths normalized (`./`, quotes, backticks, `:12`/`#L12` suffixes,
  trailing `/` stripped); candidates are `files`, citation paths and inline spans.
- **Citations**: one item per gold citation (a quote in a file, or any of several);
  the quote is located in the run's own checkout, and the item is hit when some
  answer citation of that path has lines that exist and overlap the quote's. A quote
  absent from the checkout makes the item unattainable there (missed, marked so).
- **Alternatives**: a `commands` or `files` entry that is a list is hit by any one.
- **Executed commands** (`gold.execute`, docdelta.grading.execute): the answer's proposals
  (`proposed_commands`: those that match a gold command first, then the rest it
  recommends) are run, each in a fresh offline sandbox of the sealed checkout. A gold
  command is then hit only when a proposal matching it also exited with
  `gold.execute.exit_code`: `pytest tests/test_gone.py` matches `pytest`, but a test path
  that does not exist fails, and the note shows the exit code and first error line. A miss
  names the proposals that failed, so "No rule to make target" is evidence in the report.
  When nothing could be run (`--sandbox none`), matching alone decides, and the note says so.
- **Verdict**: first word of `verdict` (or, if absent, of the answer text),
  case-insensitive, with yes/no synonyms folded.
- **Key points** stay unscored (`hit=None`) until the judge arrives.

value = hits / scored items. With no scored items there is nothing deterministic
to check except that an answer arrived: 1.0 with an answer, 0.0 without. The
report lists unscored key points as a confound, so such a 1.0 is never silent.

An answer that says nothing (empty text and no commands, files, citations or verdict)
is no answer: it scores 0 like a missing one, guardrails included, because a rule is
not respected by a reply that never got to the question.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from docdelta.agents.models import AgentAnswer, AnswerCitation
from docdelta.results.grades import CommandsExecuted, ExecutedCommand, Score, ScoreItem
from docdelta.tasks.models import GoldCitation, LineRange, Task
from docdelta.tasks.quotes import locate, read_inside

_OPERATORS = ("&&", "||", ";", "|")
_OPERATOR_RE = re.compile(r"\s*(&&|\|\||;|\|)\s*")
_PROMPT_RE = re.compile("^[$%>\u276f](?:\\s+|$)")
_FENCE_RE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_INLINE_RE = re.compile(r"`([^`\n]+)`")
_DOLLAR_LINE_RE = re.compile(r"^\s*\$\s+(.+)$", re.MULTILINE)
_LINE_SUFFIX_RE = re.compile(r"(?::\d+(?:-\d+)?|#L\d+(?:-L?\d+)?)$")
_QUOTES = "\"'"
_YES = frozenset({"yes", "y", "true", "correct", "yep", "yeah", "affirmative", "right"})
_NO = frozenset({"no", "n", "false", "incorrect", "nope", "negative", "wrong"})

NO_ANSWER_NOTE = "no JSON answer"
EMPTY_ANSWER_NOTE = "the answer is empty: none of the fields the task asks for"
UNSCORED_POINT_NOTE = "unscored until the judge arrives"


# ------------------------------------------------------------ normalization
def _strip_wrappers(text: str) -> str:
    """Peel backticks, matching quotes and a prompt mark until nothing changes."""
    prev = None
    s = text.strip()
    while s != prev:
        prev = s
        s = s.strip("`").strip()
        if len(s) >= 2 and s[0] == s[-1] and s[0] in _QUOTES:
            s = s[1:-1].strip()
        s = _PROMPT_RE.sub("", s).strip()
    return s


def normalize_command(raw: str) -> str:
    """Canonical spelling of a command, so `$ make  test` and "`make test`" compare equal."""
    s = _strip_wrappers(raw.replace("\n", " ; "))
    s = _OPERATOR_RE.sub(r" \1 ", s)
    return " ".join(s.split())


def command_tokens(raw: str) -> list[str]:
    """Shell words of a normalized command, quoting removed: `-e '.[dev]'` equals `-e ".[dev]"`.

    Unbalanced quotes (half-copied commands) fall back to whitespace words.
    """
    s = normalize_command(raw)
    try:
        return shlex.split(s)
    except ValueError:
        return s.split()


def normalize_path(raw: str) -> str:
    """Canonical repository-relative path: `./src/app.py:12` -> `src/app.py`."""
    s = _strip_wrappers(raw).replace("\\", "/")
    s = _LINE_SUFFIX_RE.sub("", s)
    while s.startswith("./"):
        s = s[2:]
    s = s.rstrip("/")
    return posixpath.normpath(s) if s else s


def _canonical_verdict(raw: str) -> str:
    words: list[str] = re.findall(r"[a-z0-9']+", raw.lower())
    if not words:
        return ""
    first = words[0]
    if first in _YES:
        return "yes"
    if first in _NO:
        return "no"
    return first


# ---------------------------------------------------------- what was said
def _fenced_lines(text: str) -> list[str]:
    return [line for block in _FENCE_RE.findall(text) for line in block.splitlines() if line.strip()]


def _prose(text: str) -> str:
    return _FENCE_RE.sub("\n", text)


def _recommended(answer: AgentAnswer) -> list[str]:
    """Commands the answer tells the user to run, as written: its list, fenced code, `$ ` lines."""
    return [*answer.commands, *_fenced_lines(answer.answer), *_DOLLAR_LINE_RE.findall(_prose(answer.answer))]


def _recommended_commands(answer: AgentAnswer) -> list[list[str]]:
    return [t for t in (command_tokens(c) for c in _recommended(answer)) if t]


def _inline_spans(answer: AgentAnswer) -> list[str]:
    return _INLINE_RE.findall(_prose(answer.answer))


def _contains(tokens: Sequence[str], needle: Sequence[str], *, anchored: bool) -> bool:
    """Does `needle` occur in `tokens`; if anchored, only at the start of a command segment."""
    n = len(needle)
    if n == 0:
        return False
    return any(
        list(tokens[i : i + n]) == list(needle) and (not anchored or i == 0 or tokens[i - 1] in _OPERATORS)
        for i in range(len(tokens) - n + 1)
    )


# ------------------------------------------------------------------ items
def _alternatives(expected: str | list[str]) -> list[str]:
    return [expected] if isinstance(expected, str) else list(expected)


def _shown(expected: str | list[str], render: Callable[[str], str]) -> str:
    return " or ".join(render(e) for e in _alternatives(expected))


def command_label(expected: str | list[str]) -> str:
    """How a gold command (or its alternatives) is named in its score item's `expected`."""
    return _shown(expected, str)


def _candidates(answer: AgentAnswer) -> list[tuple[str, list[str]]]:
    """(command as a shell would run it, its words) for everything that can hit a gold
    command; only backticks, quotes around it and a prompt mark are peeled, since
    normalizing would change a quoted `a|b`."""
    raw = [*_recommended(answer), *_inline_spans(answer)]
    return [(_strip_wrappers(c), t) for c in raw if (t := command_tokens(c))]


def _matches(tokens: Sequence[str], expected: str | list[str]) -> bool:
    return any(_contains(tokens, command_tokens(e), anchored=True) for e in _alternatives(expected))


def proposed_commands(task: Task, answer: AgentAnswer) -> list[str]:
    """What gold.execute runs, in this order: the answer's commands that match a gold
    command (so a hit can be checked), then every other command it recommends (so a wrong
    one leaves evidence); inline spans in prose only when they match (prose also warns)."""
    candidates = _candidates(answer)
    matching = [c for c, t in candidates if any(_matches(t, e) for e in task.gold.commands)]
    recommended = [_strip_wrappers(c) for c in _recommended(answer) if command_tokens(c)]
    return list(dict.fromkeys([*matching, *recommended]))


def _evidence(run: ExecutedCommand) -> str:
    how = "timed out" if run.timed_out else f"exit {run.exit_code}"
    return f"`{run.command}` ({how}{f': {run.first_error}' if run.first_error else ''})"


def _command_items(
    gold: Sequence[str | list[str]], answer: AgentAnswer, executed: CommandsExecuted | None, exit_code: int
) -> list[ScoreItem]:
    candidates = _candidates(answer)
    ran = {} if executed is None else {r.command: r for r in executed.commands}
    failed = [r for r in ran.values() if r.exit_code != exit_code]
    items = []
    for expected in gold:
        matching = list(dict.fromkeys(c for c, t in candidates if _matches(t, expected)))
        shown = _shown(expected, lambda e: f"`{normalize_command(e)}`")
        if not matching:
            hit, note = False, f"never gave the command {shown}"
            if failed:
                note += "; what it proposed failed in the checkout: " + "; ".join(map(_evidence, failed[:2]))
        elif executed is None:
            hit, note = True, "given"
        elif executed.refused is not None:
            hit, note = True, f"given (not run: {executed.refused})"
        else:
            runs = [ran[c] for c in matching if c in ran]
            good = next((r for r in runs if r.exit_code == exit_code), None)
            hit = good is not None
            if good is not None:
                note = f"given, and `{good.command}` ran (exit {good.exit_code}, {good.seconds:.1f}s)"
            elif runs:
                note = "given, but it failed in a fresh offline sandbox of the checkout: " + "; ".join(
                    map(_evidence, runs[:2])
                )
            else:
                note = f"given as `{matching[0]}`, but not run (beyond gold.execute.max_commands)"
        items.append(ScoreItem(kind="command", expected=command_label(expected), hit=hit, note=note))
    return items


def _guardrail_items(gold: Sequence[str], answer: AgentAnswer) -> list[ScoreItem]:
    recommended = _recommended_commands(answer)
    items = []
    for forbidden in gold:
        needle = command_tokens(forbidden)
        offender = next((c for c in recommended if _contains(c, needle, anchored=False)), None)
        note = (
            "not recommended"
            if offender is None
            else f"recommended the forbidden `{normalize_command(forbidden)}` in `{shlex.join(offender)}`"
        )
        items.append(ScoreItem(kind="guardrail", expected=forbidden, hit=offender is None, note=note))
    return items


def _file_items(gold: Sequence[str | list[str]], answer: AgentAnswer) -> list[ScoreItem]:
    named = {normalize_path(p) for p in [*answer.files, *(c.path for c in answer.citations)]}
    named |= {normalize_path(s) for s in _inline_spans(answer)}
    items = []
    for expected in gold:
        hit = any(normalize_path(e) in named for e in _alternatives(expected))
        note = "named" if hit else f"never named the file {_shown(expected, normalize_path)}"
        items.append(ScoreItem(kind="file", expected=_shown(expected, str), hit=hit, note=note))
    return items


def _at(where: LineRange) -> str:
    return f"line {where.start}" if where.start == where.end else f"lines {where}"


def _citation_problem(cited: AnswerCitation, path: str, where: LineRange, lines: int) -> str | None:
    """Why `cited` does not cite `path` at `where` (the quote's place in this checkout), or None."""
    if cited.lines is None:
        return f"cited {path} without line numbers (the quote is at {_at(where)})"
    if cited.lines.end > lines:
        return f"cited {path}:{cited.lines}, but the file has only {lines} lines"
    if not cited.lines.overlaps(where):
        return f"cited {path}:{cited.lines}, the quote is at {_at(where)}"
    return None


def _citation_items(gold: Sequence[GoldCitation], answer: AgentAnswer, checkout: Path) -> list[ScoreItem]:
    """One item per gold citation. Its quote is located in this run's own checkout, so a PR
    that moves a rule moves the target with it; an answer citation is right when it names the
    file and overlaps the quote's lines. A quote in none of the checkout's files makes the
    item unattainable in this condition: scored as missed, and marked so."""
    items = []
    for g in gold:
        expected = " or ".join(f"{normalize_path(c.path)}: {c.quote!r}" for c in g.choices())
        located = []
        for choice in g.choices():
            path = normalize_path(choice.path)
            text = read_inside(checkout, path)
            where = None if text is None else locate(text, choice.quote)
            if text is not None and where is not None:
                located.append((path, where, len(text.splitlines())))
        if not located:
            note = "unattainable here: the quote is in no file of this condition"
            items.append(
                ScoreItem(kind="citation", expected=expected, hit=False, note=note, attainable=False)
            )
            continue
        problems = [
            _citation_problem(c, path, where, lines)
            for path, where, lines in located
            for c in answer.citations
            if normalize_path(c.path) == path
        ]
        hit = any(p is None for p in problems)
        if hit:
            note = "cited"
        elif problems:
            note = "; ".join(p for p in problems if p)
        else:
            note = "never cited " + " or ".join(f"{path}:{where}" for path, where, _ in located)
        items.append(ScoreItem(kind="citation", expected=expected, hit=hit, note=note))
    return items


def _verdict_item(expected: str, answer: AgentAnswer) -> ScoreItem:
    said = answer.verdict if answer.verdict is not None else answer.answer
    got, want = _canonical_verdict(said), _canonical_verdict(expected)
    hit = bool(want) and got == want
    note = "matches" if hit else f"verdict was {got or 'missing'!r}, expected {want!r}"
    return ScoreItem(kind="verdict", expected=expected, hit=hit, note=note)


def _says_nothing(answer: AgentAnswer) -> bool:
    said = (answer.commands, answer.files, answer.citations, answer.verdict)
    return not answer.answer.strip() and not any(said)


def _point_items(points: Iterable[str]) -> list[ScoreItem]:
    return [ScoreItem(kind="point", expected=p, hit=None, note=UNSCORED_POINT_NOTE) for p in points]


def _items(
    task: Task, answer: AgentAnswer, checkout: Path, executed: CommandsExecuted | None
) -> list[ScoreItem]:
    gold = task.gold
    exit_code = gold.execute.exit_code if gold.execute is not None else 0
    return [
        *_command_items(gold.commands, answer, executed, exit_code),
        *_file_items(gold.files, answer),
        *_citation_items(task.gold_citations, answer, checkout),
        *([_verdict_item(gold.verdict, answer)] if gold.verdict is not None else []),
        *_guardrail_items(gold.guardrails, answer),
        *_point_items(gold.points),
    ]


def score_answer(
    task: Task, answer: AgentAnswer | None, checkout: Path, executed: CommandsExecuted | None = None
) -> Score:
    """Score one run's answer; `checkout` is the sealed checkout of the run's condition, and
    `executed` what running its proposed commands found (gold.execute; None: not run).

    Without an answer (the agent printed no JSON, or JSON that says nothing) every scored
    item is missed — even guardrails, since saying nothing is not respecting a rule — and
    the score is 0.
    """
    if answer is None or _says_nothing(answer):
        note = NO_ANSWER_NOTE if answer is None else EMPTY_ANSWER_NOTE
        items = [
            i if i.hit is None else i.model_copy(update={"hit": False, "note": note})
            for i in _items(task, AgentAnswer(), checkout, None)
        ]
        return Score(value=0.0, items=items)
    items = _items(task, answer, checkout, executed)
    scored = [i for i in items if i.hit is not None]
    value = sum(1 for i in scored if i.hit) / len(scored) if scored else 1.0
    return Score(value=value, items=items)


__all__ = ["command_tokens", "normalize_command", "normalize_path", "proposed_commands", "score_answer"]
