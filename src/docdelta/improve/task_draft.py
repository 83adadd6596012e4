"""`docdelta tasks draft`: answer tasks drafted from the concrete rules of an instruction file.

Gold is the expensive part of a task suite: someone has to find each rule, write the
question, the expected answer and the citation. Much of that is mechanical once the rule is
found, so this drafts it and leaves the judgement (is this worth a task, is the question
fair) to a reviewer: every draft is `reviewed: false`, which `docdelta run` refuses until a
person flips it (or `--allow-unreviewed` is passed).

The file is parsed as CommonMark (markdown-it), so code spans and fenced blocks are the
parser's, not a regex's guess. A concrete rule is one of:

* **a command line of a shell code block** (```bash, ```sh, unlabelled): the question is the
  line's comment (`make test  # Run the Python tests`), else the comment lines right above it
  (`# Typecheck`: many files keep every command in one block, each under such a line, so the
  paragraph or heading would ask the same question of all of them), else the paragraph that
  introduces the block ("Run all package tests:"), else the section's heading; consecutive
  lines without a comment are one task that needs all of them. A line ending in `\\` and a
  heredoc with its body are one command; a script (more than a few commands, some setting
  a variable or the directory for the rest) drafts nothing, as no line of it runs alone;
* **a "never" rule**: a sentence that starts with never / don't / do not / must not: a yes/no
  task whose verdict is "no", with the commands and flags it names as guardrails;
* **a tooling choice**: "Use `uv` for dependency management (not pip/conda)": which tool (or
  command) for that purpose, and, when it names what not to use, whether that is OK (verdict no);
* **any other rule-like sentence** (imperative, or with always / must / should) that names
  commands, or paths that exist at the ref, in code spans: the sentence with them blanked
  out. When it negates past its start ("Always run `make build`, not `make build-prices`
  alone") only the spans before the negation are gold; those after are guardrails.

Descriptive sentences are not rules and draft nothing; the same gold is drafted once (never
rules first, then tools, sentences, code lines), and not at all when a task already in the
output directory asks about the rule (`covers`), so a rerun neither duplicates nor undoes a
review. The citation is the rule's own text, which
must locate in the file at the ref. Every prompt passes `tasks audit`'s leak check
(`task_audit.audit_items`): a gold string it would state is blanked out. The prompts reuse
the rule's words, which makes them easy to find by searching; a reviewer should reword them
so the agent has to know the rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

from docdelta.errors import ConfigError, TaskError
from docdelta.git import Repo
from docdelta.improve.task_audit import SourceText, audit_items
from docdelta.instructions.detect import InstructionMatcher
from docdelta.instructions.loading import GitTree, read, rules_for, visible_paths
from docdelta.instructions.models import LoadMode
from docdelta.scorecard.instruction_usage import SHELL_FENCES, path_like
from docdelta.tasks.load import TASK_SUFFIXES, load_tasks, unreviewed_yaml
from docdelta.tasks.models import Gold, GoldCitation, Task
from docdelta.tasks.quotes import locate, normalize
from docdelta.text import listing

BLANK = "[blank]"
SECTION_SEPARATOR = " > "


class RuleKind(StrEnum):
    """What kind of rule a draft comes from; also the order in which equal gold is kept."""

    never = "never"
    tool = "tool"
    rule = "rule"
    command = "command"
    trigger = "trigger"
    """A prompt an on-demand file's description says it is for (`improve.trigger_draft`)."""
    near_miss = "near-miss"
    """A prompt close to what the file is for that should not load it."""


_PRIORITY = list(RuleKind)
_NEVER = re.compile(r"^(?:never|don't|do not|must not|should not|shouldn't)\s+", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:never|not|don't|no longer|instead of|rather than)\b", re.IGNORECASE)
_MODAL = re.compile(r"\b(?:always|must|should)\b", re.IGNORECASE)
_IMPERATIVES = frozenset(
    {
        "accept",
        "add",
        "always",
        "apply",
        "build",
        "call",
        "check",
        "commit",
        "create",
        "edit",
        "execute",
        "follow",
        "format",
        "inspect",
        "install",
        "invoke",
        "keep",
        "make",
        "pass",
        "place",
        "prefer",
        "preserve",
        "put",
        "read",
        "remember",
        "report",
        "review",
        "run",
        "set",
        "start",
        "update",
        "use",
        "write",
    }
)
_ALTERNATIVE = re.compile(
    r"\((?:not|no)\s+(?P<paren>[^)]+)\)"
    r"|\b(?:not|instead of|rather than)\s+(?P<bare>`[^`]+`|[\w.+-]+(?:/[\w.+-]+)*)",
    re.IGNORECASE,
)
_CONDITIONS = frozenset({"if", "when", "before", "after", "once", "unless"})
_USE = re.compile(r"^use\b", re.IGNORECASE)
_PURPOSE = re.compile(
    r"^[)\s]*(?:\([^)]*\)\s*)?(?P<prep>for|to|as|when)\s+(?P<what>.+?)(?=[;,(—]|\.(?:\s|$)|$)", re.I
)
_PROGRAM = re.compile(r"^(?:\./)?[a-z][\w.+/-]*$")
_COMMENT = re.compile(r"\s+#\s?(?P<text>.*)$")
_SHELL_PROMPT = re.compile(r"^[$%>]\s+")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(?P<tag>[A-Za-z_]\w*)\1")
_SETS_STATE = re.compile(r"^(?:export\s+)?[A-Za-z_]\w*=(?:\$\([^)]*\)|\S*)\s*(?:;|&&|$)|^cd\s+\S+\s*$")
"""A shell line that sets a variable (`SB=$(mktemp -d)`, `export X=1`) or changes directory
for the lines after it; an assignment in front of a command (`CI=1 make test`) does not."""
SCRIPT_COMMANDS = 3
"""Commands a block may hold before state-setting lines make it a script, not a command list."""
_BOUNDARY = re.compile(r"[.!?](?:\*\*|__|\*|_)?(?=\s+[A-Z`*_\"(])")
_ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "cf.")
_CLAUSE_STOPS = ".;:,(—"
_MARKUP = re.compile(r"\*\*|__")
_SLUG = re.compile(r"[^a-z0-9]+")
_MAX_ID = 48


@cache
def _md() -> MarkdownIt:
    return MarkdownIt("commonmark")


@dataclass(frozen=True)
class Span:
    """A code span of a sentence: its text and where it stands (markup included)."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class RuleTaskDraft:
    """One drafted task and the rule it came from, for the reviewer's header."""

    task: Task
    kind: RuleKind
    file: str
    line: int
    section: str
    rule: str


@dataclass(frozen=True)
class DraftSet:
    source_sha: str
    drafts: list[RuleTaskDraft]
    covered: list[tuple[RuleTaskDraft, str]]
    """Rules an existing task already asks about, with that task's id: not drafted again."""


@dataclass(frozen=True)
class _Found:
    """A rule before it is a task: its gold and its question."""

    kind: RuleKind
    line: int
    section: str
    quote: str
    prompt: str
    commands: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    guardrails: tuple[str, ...] = ()
    verdict: str | None = None
    name: str = ""
    """Words for the task id, when the gold has none (a yes/no task)."""

    def key(self) -> tuple[object, ...]:
        if self.kind is RuleKind.never:
            return (self.kind, " ".join(self.quote.split()))
        return (self.commands, self.files)


# ------------------------------------------------------------------ parsing
class _Paths:
    """The paths the ref holds (files and their directories): a path span is gold only if real."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.known = set(paths)
        for path in paths:
            parts = path.split("/")
            self.known.update("/".join(parts[:k]) for k in range(1, len(parts)))

    def exists(self, span: str) -> bool:
        """A path span (`src/x.py`, `tests/`, `.node-version`) the tree holds; no globs."""
        bare = span.removeprefix("./").strip("/")
        shaped = path_like(span) or span.startswith(".")
        return shaped and "*" not in span and " " not in span and bare in self.known


def _sentences(text: str) -> Iterator[str]:
    """The sentences of a paragraph's source text, markup kept (so each is quotable as is)."""
    start = 0
    for m in _BOUNDARY.finditer(text):
        if text[: m.start() + 1].endswith(_ABBREVIATIONS) or _inside_code(text, m.start()):
            continue
        yield text[start : m.end()].strip()
        start = m.end()
    if text[start:].strip():
        yield text[start:].strip()


def _inside_code(text: str, at: int) -> bool:
    return text[:at].count("`") % 2 == 1


def _spans(sentence: str) -> list[Span]:
    """The code spans of `sentence`, as the parser reads them, with their places in it."""
    out: list[Span] = []
    at = 0
    for token in _md().parseInline(sentence)[0].children or ():
        if token.type != "code_inline":
            continue
        raw = f"{token.markup}{token.content}{token.markup}"
        found = sentence.find(raw, at)
        if found < 0:  # the parser dropped padding spaces: `` ` x ` ``
            continue
        out.append(Span(token.content.strip(), found, found + len(raw)))
        at = found + len(raw)
    return out


def _is_command(span: str) -> bool:
    words = span.split()
    return len(words) > 1 and bool(_PROGRAM.match(words[0])) and "{" not in span


def _cut(text: str, stops: str) -> str:
    """`text` up to the first of `stops` outside a code span."""
    ticks = 0
    for i, char in enumerate(text):
        ticks += char == "`"
        if char in stops and ticks % 2 == 0:
            return text[:i]
    return text


def _quote(sentence: str, after: int, stops: str) -> str:
    """The rule's citation: `sentence` up to its first stop past `after` (its core, which stands
    in more versions of the file than the whole sentence), markup at the ends dropped."""
    return (sentence[:after] + _cut(sentence[after:], stops)).strip(" *")


def _plain(text: str) -> str:
    return " ".join(_MARKUP.sub("", text).split())


def _blanked(sentence: str, spans: Sequence[Span], gold: Sequence[str]) -> str:
    """`sentence` with every span holding a gold string replaced by the blank."""
    out, at = [], 0
    for span in spans:
        if any(g in span.text for g in gold):
            out += [sentence[at : span.start], BLANK]
            at = span.end
    out.append(sentence[at:])
    return _plain("".join(out))


def _never_rule(sentence: str, line: int, section: str) -> _Found | None:
    plain = _plain(sentence)
    m = _NEVER.match(plain)
    if not m:
        return None
    clause = _cut(plain[m.end() :], _CLAUSE_STOPS).strip()
    if len(clause.split()) < 2 and "`" not in clause:
        return None
    first = _cut(sentence, ";")
    guardrails = [s.text for s in _spans(first) if _is_command(s.text) or s.text.startswith("-")]
    prompt = f"In this repository ({section}): is it OK to {clause}? Answer yes or no."
    quote = _quote(sentence, 0, _CLAUSE_STOPS)
    return _Found(RuleKind.never, line, section, quote, prompt, guardrails=tuple(guardrails), verdict="no")


def _tool_rules(sentence: str, spans: Sequence[Span], line: int, section: str) -> list[_Found]:
    """A tooling choice, "Use `uv` for dependency management (not pip/conda)": which tool for
    that, and, when the sentence names what not to use, whether that is OK (yes/no, verdict no)."""
    if not spans or not _USE.match(_plain(sentence)):
        return []
    tool = spans[0]
    if not (_is_command(tool.text) or _PROGRAM.match(tool.text)) or path_like(tool.text):
        return []
    m = _PURPOSE.match(_plain(sentence[tool.end :]))
    if not m:
        return []
    noun = "command" if _is_command(tool.text) else "tool"
    purpose = f"{m.group('prep').lower()} {m.group('what').strip()}"
    prompt = f"Which {noun} should I use {purpose} in this repository?"
    quote = _quote(sentence, tool.end, _CLAUSE_STOPS)
    found = [_Found(RuleKind.tool, line, section, quote, prompt, commands=(tool.text,))]
    other = _ALTERNATIVE.search(_cut(sentence, ";"), tool.end)
    if other:
        named = (other.group("paren") or other.group("bare")).replace("`", "")
        instead = " or ".join(a for a in re.split(r"\s*(?:/|,|\bor\b)\s*", named) if a)
        ask = f"In this repository ({section}): is it OK to use {instead} {purpose}? Answer yes or no."
        quote = sentence[: other.end()].strip(" *")
        name = f"use {instead} {purpose}"
        found.append(_Found(RuleKind.never, line, section, quote, ask, verdict="no", name=name))
    return found


def _first_word(plain: str) -> str:
    """The sentence's verb: its first word, or the first after a leading condition
    ("If the changes are intentional, accept them ...")."""
    words = plain.split(maxsplit=1)
    first = words[0].lower().strip("*_(\"'") if words else ""
    if first in _CONDITIONS and "," in plain:
        return _first_word(plain.split(",", 1)[1])
    return first


_CLAUSE = r"(?P<clause>[^;:,()]+?)\s*(?=[.;:,(](?:\s|$)|$)"
"""Up to the end of the clause: a period inside a path (`pricebook/currencies.py`) does not end it."""
_TRIGGERS = (
    re.compile(rf"\b(?P<when>before|after|when|whenever|once)\s+{_CLAUSE}", re.I),
    re.compile(rf"\b(?P<when>to)\s+{_CLAUSE}", re.I),
)
"""A rule's trigger (`before you push`), else its purpose (`to build the docs`)."""
_LEAD_INS = frozenset({"always", "remember", "please", "to"})
_SECOND_PERSON = {"you": "I", "your": "my", "yours": "mine", "you're": "I'm", "you've": "I've"}


def _situation(plain: str, verb: str, what: str, section: str, gold: Sequence[str]) -> str | None:
    """A rule with a trigger ("Run `make check` before you push") as the situation an agent
    meets, to act on rather than recite: "Which command do I run before I push?". None when
    the rule names no trigger, or the trigger itself states a gold string."""
    found = (t.search(plain) for t in _TRIGGERS)
    trigger = next((m for m in found if m and not any(g.lower() in m.group(0).lower() for g in gold)), None)
    words = [w.lower().strip("*_,") for w in plain.split()]
    if verb in _LEAD_INS:  # "Always run ...", "Remember to run ...": the action is the next verb
        verb = next((w for w in words[1:] if w not in _LEAD_INS), "")
    if trigger is None or verb not in _IMPERATIVES or verb in _LEAD_INS:
        return None
    clause = " ".join(_SECOND_PERSON.get(w.lower(), w) for w in trigger.group("clause").split())
    if not clause or clause.count("`") % 2 or any(g.lower() in clause.lower() for g in gold):
        return None
    return (
        f"In this repository ({section}): which {what} do I {verb} {trigger.group('when').lower()} "
        f"{clause}? Answer with the exact {what}."
    )


def _sentence_rule(
    sentence: str, spans: Sequence[Span], line: int, section: str, paths: _Paths
) -> _Found | None:
    plain = _plain(sentence)
    first = _first_word(plain)
    if first not in _IMPERATIVES and not _MODAL.search(plain):
        return None
    negation = _NEGATION.search(sentence)
    if negation and _inside_code(sentence, negation.start()):
        negation = None
    if negation and first not in _IMPERATIVES:
        return None  # "a green `make test` does not mean ...": a fact about a command, not a rule
    cut = negation.start() if negation else len(sentence)
    before = [s for s in spans if s.end <= cut]
    commands = [s.text for s in before if _is_command(s.text)]
    files = [] if commands else [s.text for s in before if paths.exists(s.text)]
    gold = commands or files
    if not gold:
        return None
    guardrails = [s.text for s in spans if s.start >= cut and _is_command(s.text)]
    what = ("command" if commands else "path") + ("s" if len(gold) > 1 else "")
    prompt = _situation(plain, first, what, section, gold)
    if prompt is None:
        rule = _blanked(sentence, spans, gold)
        blanks = "blanks" if rule.count(BLANK) > 1 else "blank"
        prompt = f'Fill in the {blanks} of this rule of the repository ({section}): "{rule}" '
        prompt += f"Answer with the exact {what}."
    last = max(s.end for s in spans if s.text in gold or s.text in guardrails)
    return _Found(
        RuleKind.rule,
        line,
        section,
        _quote(sentence, last, ";"),
        prompt,
        commands=tuple(commands),
        files=tuple(files),
        guardrails=tuple(guardrails),
    )


def _prose_rules(inline: Token, section: str, paths: _Paths, lines: Sequence[str]) -> Iterator[_Found]:
    assert inline.map is not None
    first_line = inline.map[0]
    for sentence in _sentences(inline.content):
        line = _line_of(lines, sentence, first_line)
        spans = _spans(sentence)
        never = _never_rule(sentence, line, section)
        if never:
            yield never
            continue
        tools = _tool_rules(sentence, spans, line, section)
        rule = None if tools else _sentence_rule(sentence, spans, line, section, paths)
        yield from tools or ([rule] if rule else [])


def _line_of(lines: Sequence[str], quote: str, after: int) -> int:
    """The 1-based first line of `quote` in the file, searching from line index `after`."""
    where = locate("\n".join(lines[after:]), quote)
    return after + (where.start if where else 1)


def _intro(tokens: Sequence[Token], i: int) -> str | None:
    """The last sentence of the paragraph right before token `i` (a block's introduction)."""
    if i < 2 or tokens[i - 1].type != "paragraph_close" or tokens[i - 1].level != tokens[i].level:
        return None
    sentences = list(_sentences(tokens[i - 2].content))
    text = _plain(sentences[-1]).rstrip(":").strip() if sentences else ""
    return text or None


def _shell_lines(content: str, first: int) -> Iterator[tuple[int, str, str]]:
    """(1-based line, its text as quoted, the command) per logical line of a shell block's
    `content` starting at line `first`: a line ending in `\\` runs on into the next, and a
    heredoc (`cat > f <<'EOF'` ... `EOF`) is one command with its body, whose lines are data,
    not commands. Blank and comment lines come through as they are (the command "" or `# ...`)."""
    lines = content.splitlines()
    k = 0
    while k < len(lines):
        start, text = k, lines[k].strip()
        command = _SHELL_PROMPT.sub("", text)
        while command.endswith("\\") and k + 1 < len(lines):
            k += 1
            command = f"{command[:-1].rstrip()} {lines[k].strip()}"
        heredoc = _HEREDOC.search(command) if not command.startswith("#") else None
        if heredoc:
            while k + 1 < len(lines) and lines[k].strip() != heredoc.group("tag"):
                k += 1
            command = "\n".join([command, *(line.rstrip() for line in lines[start + 1 : k + 1])])
        quote = "\n".join(line.strip() for line in lines[start : k + 1])
        yield first + start, quote, command
        k += 1


def _is_script(commands: Sequence[str]) -> bool:
    """A block longer than a few commands whose lines set state the later ones use (a
    variable, the directory): its lines are steps of one script, none a command to run alone."""
    return len(commands) > SCRIPT_COMMANDS and any(_SETS_STATE.match(c) for c in commands)


def _block_rules(tokens: Sequence[Token], i: int, section: str) -> Iterator[_Found]:
    fence = tokens[i]
    assert fence.map is not None
    if (fence.info.split() or [""])[0].lower() not in SHELL_FENCES:
        return
    logical = list(_shell_lines(fence.content, fence.map[0] + 2))
    if _is_script([c for _, _, c in logical if c and not c.startswith("#")]):
        return
    intro = _intro(tokens, i)
    group: list[tuple[int, str, str]] = []  # (line, quoted lines, command) without comments
    comments: list[str] = []  # the comment lines right above the group: what it is for

    def flush() -> Iterator[_Found]:
        if group:
            commands = tuple(c for _, _, c in group)
            quote = "\n".join(raw for _, raw, _ in group)
            noun = "commands" if len(commands) > 1 else "command"
            about = ": ".join(comments) or intro
            ask = f'for this ({section}): "{about}"' if about else f'for "{section}"'
            prompt = f"Which {noun} should I run in this repository {ask}?"
            yield _Found(RuleKind.command, group[0][0], section, quote, prompt, commands=commands)
            group.clear()
            comments.clear()

    for line, text, command in logical:
        if not command:
            yield from flush()
            comments.clear()
            continue
        if command.startswith("#"):
            yield from flush()
            note = command.lstrip("#").strip()
            comments.extend([note] if note else [])
            continue
        comment = None if "\n" in command else _COMMENT.search(command)
        if comment is None:
            group.append((line, text, command))
            continue
        yield from flush()
        prompt = (
            f"Which command should I run in this repository for this ({section}): "
            f'"{comment.group("text").strip()}"?'
        )
        commands = (command[: comment.start()].strip(),)
        yield _Found(RuleKind.command, line, section, text, prompt, commands=commands)
    yield from flush()


def _find_rules(text: str, paths: Sequence[str] = ()) -> list[_Found]:
    """Every concrete rule of a Markdown text, in file order, each gold once."""
    tokens = _md().parse(text)
    lines = text.splitlines()
    known = _Paths(paths)
    heads: list[tuple[int, str]] = []
    found: list[_Found] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            level = int(token.tag[1])
            heads = [(lvl, t) for lvl, t in heads if lvl < level] + [(level, _plain(tokens[i + 1].content))]
        section = SECTION_SEPARATOR.join(t for lvl, t in heads if lvl > 1) or (heads[0][1] if heads else "")
        section = section or "top of the file"
        if token.type == "fence":
            found += _block_rules(tokens, i, section)
        elif token.type == "inline" and tokens[i - 1].type == "paragraph_open":
            found += _prose_rules(token, section, known, lines)
    kept: dict[tuple[object, ...], _Found] = {}
    for rule in sorted(found, key=lambda r: (_PRIORITY.index(r.kind), r.line)):
        kept.setdefault(rule.key(), rule)
    return sorted(kept.values(), key=lambda r: r.line)


# ------------------------------------------------------------------- drafts
def _slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-")


def _task_id(rule: _Found, taken: set[str]) -> str:
    if rule.kind is RuleKind.never:
        base = "never-" + _slug(rule.name or _NEVER.sub("", _plain(rule.quote)))
    else:
        base = f"{rule.kind.value}-{_slug((rule.commands or rule.files)[0])}"
    if len(base) > _MAX_ID:  # cut between words, not inside one (`...-instructed-to-d`)
        base = base[: _MAX_ID + 1].rsplit("-", 1)[0] if "-" in base[: _MAX_ID + 1] else base[:_MAX_ID]
    base = base.rstrip("-") or rule.kind.value
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    taken.add(candidate)
    return candidate


def _anchored(rule: _Found, text: str) -> _Found:
    """`rule` with a quote that locates at the rule itself: a code line `make test` also named
    earlier in prose would otherwise anchor the citation there. Whole lines before it are
    added until the first place the quote stands covers the rule's line."""
    where = locate(text, rule.quote)
    if where is not None and where.start == rule.line:
        return rule
    lines = text.splitlines()
    count = rule.quote.count("\n") + 1
    for before in range(rule.line):
        quote = "\n".join(
            line.strip() for line in lines[rule.line - 1 - before : rule.line - 1 + count]
        ).strip()
        where = locate(text, quote)
        if where is not None and where.start <= rule.line <= where.end:
            return replace(rule, quote=quote, line=where.start)
    return rule  # the whole file up to the rule locates from its start: never reached


def _unleaked(task: Task) -> Task:
    """`task` with every gold string its prompt states blanked out, so that `tasks audit`'s
    leak check (the same comparison, on whitespace-normalised text) passes."""
    if not any(item.leaked for item in audit_items(task, SourceText({}))):
        return task
    gold = task.gold
    stated = [
        e for entry in (*gold.commands, *gold.files) for e in ([entry] if isinstance(entry, str) else entry)
    ]
    stated += [c.quote for cite in task.gold_citations for c in cite.choices()]
    prompt = normalize(task.prompt)
    for text in sorted((normalize(s) for s in stated), key=len, reverse=True):
        if text:
            prompt = prompt.replace(text, BLANK)
    return task.model_copy(update={"prompt": prompt})


def _task(rule: _Found, path: str, task_id: str) -> Task:
    return Task(
        id=task_id,
        prompt=rule.prompt,
        gold=Gold(
            docs=[path],
            commands=list(rule.commands),
            files=list(rule.files),
            guardrails=list(rule.guardrails),
            verdict=rule.verdict,
        ),
        gold_citations=[GoldCitation(path=path, quote=rule.quote)],
        reviewed=False,
    )


def draft_from_text(
    text: str, path: str, paths: Sequence[str] = (), taken: set[str] | None = None
) -> list[RuleTaskDraft]:
    """The drafts of one instruction file's text (`path` is how tasks cite it); `taken`: ids
    already used (by another file's drafts), which numbered ids then avoid."""
    taken = set() if taken is None else taken
    drafts = []
    for found in _find_rules(text, paths):
        rule = _anchored(found, text)
        task = _unleaked(_task(rule, path, _task_id(rule, taken)))
        drafts.append(RuleTaskDraft(task, rule.kind, path, rule.line, rule.section, rule.quote))
    return drafts


def _held_hint(paths: Sequence[str]) -> str:
    """Advice for a `--from` file the commit lacks: the instruction files it does hold, those
    loaded into every prompt first, then the top-level ones (a repository with CLAUDE.md and
    no AGENTS.md is told CLAUDE.md, not its `.claude/settings.json`)."""

    def order(path: str) -> tuple[bool, int, str]:
        always = any(r.mode is LoadMode.always for r in rules_for(path))
        return not always, path.count("/"), path

    held = sorted((p for p in paths if InstructionMatcher().matches(p)), key=order)
    if not held:
        return "the commit holds no instruction file; pass the file to draft from with --from FILE"
    return "pass an instruction file the commit holds: " + listing([f"--from {p}" for p in held], limit=3)


def draft_tasks(repo: Repo, ref: str, files: Sequence[str], existing: Sequence[Task] = ()) -> DraftSet:
    """Drafts from each of `files` as the commit `ref` holds them (links followed), but none
    for a rule one of the `existing` tasks already covers (`covers`)."""
    sha = repo.resolve(ref)
    tree = GitTree(repo, sha)
    paths = visible_paths(tree)
    drafts: list[RuleTaskDraft] = []
    covered: list[tuple[RuleTaskDraft, str]] = []
    taken: set[str] = set()
    for path in files:
        data = read(tree, path)
        if data is None:
            raise ConfigError(f"--from {path}: no such file at {ref} ({sha[:12]})", hint=_held_hint(paths))
        text = data.decode("utf-8", "replace")
        for draft in draft_from_text(text, path, paths, taken):
            by = next((t.id for t in existing if covers(t, draft, text)), None)
            if by is None:
                drafts.append(draft)
            else:
                covered.append((draft, by))
    return DraftSet(sha, drafts, covered)


def covers(existing: Task, draft: RuleTaskDraft, text: str) -> bool:
    """Does `existing` already ask about the draft's rule: it cites lines of the same file that
    overlap the rule's (`text` is that file), or expects the same commands."""
    where = locate(text, draft.task.gold_citations[0].quote)
    for cite in existing.gold_citations:
        for choice in cite.choices():
            other = locate(text, choice.quote) if choice.path == draft.file else None
            if where is not None and other is not None and other.overlaps(where):
                return True
    return bool(draft.task.gold.commands) and existing.gold.commands == draft.task.gold.commands


def existing_tasks(directory: Path) -> list[Task]:
    """The tasks already in `directory` (none when it holds no task file yet)."""
    if not any(p.suffix in TASK_SUFFIXES for p in directory.glob("*")):
        return []
    return [loaded.task for loaded in load_tasks(directory)]


def gold_summary(task: Task) -> str:
    """What a draft expects, in a few words: for the listing `tasks draft` prints."""
    if task.trigger is not None:
        return f"{'loads' if task.trigger.should_load else 'does not load'} {task.trigger.file}"
    gold = task.gold
    parts = [f"`{c}`" for c in gold.commands if isinstance(c, str)]
    parts += [f"`{f}`" for f in gold.files if isinstance(f, str)]
    if gold.verdict:
        parts.append(f"verdict {gold.verdict}")
    parts += [f"not `{g}`" for g in gold.guardrails]
    return ", ".join(parts)


def _header(draft: RuleTaskDraft, sha: str) -> str:
    rule = " ".join(draft.rule.split())
    if draft.kind in (RuleKind.trigger, RuleKind.near_miss):
        return (
            f"# Drafted by `docdelta tasks draft --triggers` from the description of {draft.file} at "
            f"{sha[:12]}.\n"
            f"# From: {rule}\n"
            "# Review, then set `reviewed: true`: would a user ask this, and should it load the file\n"
            "# (should_load)? Reword the prompt as a user would put it, not in the description's words.\n"
        )
    return (
        f"# Drafted by `docdelta tasks draft` from {draft.file}:{draft.line} at {sha[:12]}"
        f" ({draft.section}).\n"
        f"# The rule: {rule}\n"
        "# Review, then set `reviewed: true`: is the gold what a correct answer gives? The prompt\n"
        "# reuses the rule's words; reword it so an agent has to know the rule, not find the sentence.\n"
    )


def write_drafts(drafts: DraftSet, out: Path) -> tuple[list[Path], list[Path]]:
    """Write `<out>/<id>.yaml` per draft; an existing file (perhaps reviewed since) is kept.

    Returns (written, kept)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TaskError(
            f"cannot create the task directory {out}: {exc.strerror or exc}",
            hint="pass --out a directory you can write to",
        ) from None
    written: list[Path] = []
    kept: list[Path] = []
    for draft in drafts.drafts:
        target = out / f"{draft.task.id}.yaml"
        if target.exists():
            kept.append(target)
            continue
        target.write_text(_header(draft, drafts.source_sha) + unreviewed_yaml(draft.task), encoding="utf-8")
        written.append(target)
    return written, kept
