"""`docdelta tasks draft --triggers`: trigger tasks drafted from on-demand files' descriptions.

Whether an agent loads a skill (slash command, subagent) hangs on the description in its
front matter, so that is where the prompts come from:

* **should load**: each example the description quotes ("add grok 4.5", "update openai o5
  prices"), and the situation after "Use when" ("Use when asked to add/update pricing for a
  model");
* **near misses** (should not load): what the description rules out ("Not for reading or
  querying prices", "Do not use when ..."), and, when several files are drafted together,
  each other file's should-load prompts: a prompt meant for a sibling skill is the closest
  miss there is.

A description that yields no near miss is reported, not papered over with a template: a
near miss is only worth something when a person knows it sounds close and is not. Every
draft is `reviewed: false`, like every other draft (`improve.task_draft`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import yaml

from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.improve.task_draft import DraftSet, RuleKind, RuleTaskDraft
from docdelta.instructions.audit import FRONT_MATTER
from docdelta.instructions.loading import GitTree, read, rule_for, rules_for
from docdelta.instructions.models import LoadMode
from docdelta.tasks.models import Task, Trigger

SECTION = "description"
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201c\u201d]{3,100})[\"\u201d]")
_USE = r"(?:it |this )?"
_CLAUSE = r"(?P<what>(?:[^.;]|\.(?=\S))+)"
"""Up to the sentence's end: a `.` followed by a space (or the end), not the dot of
`download_cli.py`."""
_USE_WHEN = re.compile(
    rf"\buse {_USE}(?:when|for|if)\s+(?:asked to\s+|you need to\s+|the user (?:wants|asks) to\s+)?" + _CLAUSE,
    re.IGNORECASE,
)
_NOT_FOR = re.compile(
    rf"\b(?:not for|(?:do not|don't|never) use {_USE}(?:for|when))\s+{_CLAUSE}", re.IGNORECASE
)
_CLAUSE_END = re.compile(r",?\s+(?:[\u2014\u2013-]{1,2}\s|for example|such as|\()", re.IGNORECASE)


def description(text: str) -> str | None:
    """The `description` of a file's YAML front matter, one line; None without one."""
    m = FRONT_MATTER.match(text)
    if m is None:
        return None
    inner = m.group(0).split("\n", 1)[1].rsplit("---", 1)[0]
    try:
        data = yaml.safe_load(inner)
    except yaml.YAMLError:
        return None
    value = data.get("description") if isinstance(data, dict) else None
    return " ".join(value.split()) if isinstance(value, str) and value.strip() else None


def _request(words: str) -> str:
    """A clause as a prompt: cut before its examples, trimmed, first letter up."""
    clause = _CLAUSE_END.split(words, maxsplit=1)[0].strip(" ,:\u2014-")
    return clause[:1].upper() + clause[1:]


def prompts(text: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(should-load, near-miss) prompts of a description, each with the words it came from."""
    text = re.sub(r"\be\.g\.", "for example", text, flags=re.IGNORECASE)  # its dots end no clause
    should = [(_request(m.group(1)), m.group(0)) for m in _QUOTED.finditer(text)]
    should += [(_request(m.group("what")), _words(m.group(0))) for m in _USE_WHEN.finditer(text)]
    near = [(_request(m.group("what")), _words(m.group(0))) for m in _NOT_FOR.finditer(text)]
    ruled_out = {p.lower() for p, _ in near}
    should = [(p, w) for p, w in should if len(p) > 2 and p.lower() not in ruled_out]
    return _unique(should), _unique(near)


def _words(clause: str) -> str:
    return _CLAUSE_END.split(clause, maxsplit=1)[0]


def _unique(found: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    return list({p.lower(): (p, w) for p, w in reversed(found)}.values())[::-1]


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "prompt"


def _line_of(text: str) -> int:
    """The line of the front matter where the description starts (a folded one spans several)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("description:"):
            return number
    return 1


def draft_triggers(
    repo: Repo, ref: str, files: Sequence[str], existing: Sequence[Task] = ()
) -> tuple[DraftSet, list[str]]:
    """Trigger-task drafts from each of `files` as `ref` holds them, and the files for which
    no near miss could be drafted. A prompt an existing task already holds for the same file
    is not drafted again (it shows under `covered`)."""
    sha = repo.resolve(ref)
    tree = GitTree(repo, sha)
    found: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]], int]] = {}
    for path in files:
        first = [rule_for(path, f) for f in {f for r in rules_for(path) for f in r.families}]
        if not any(r is not None and r.mode is LoadMode.on_demand for r in first):
            raise ConfigError(
                f"--from {path}: not an on-demand instruction file, so nothing decides whether to load it",
                hint="--triggers drafts from skills, slash commands and subagents, e.g. "
                "--from .claude/skills/<name>/SKILL.md",
            )
        data = read(tree, path)
        if data is None:
            raise ConfigError(
                f"--from {path}: no such file at {ref} ({sha[:12]})", hint="pass a file the commit holds"
            )
        text = data.decode("utf-8", "replace")
        said = description(text)
        if said is None:
            raise ConfigError(
                f"--from {path}: no `description` in its front matter, which is what an agent decides by",
                hint="add `description: Use when ...` between the `---` lines at the top of the file",
            )
        should, near = prompts(said)
        found[path] = (should, near, _line_of(text))
    taken = {(t.trigger.file, " ".join(t.prompt.lower().split())) for t in existing if t.trigger is not None}
    ids = {t.id for t in existing}
    drafts: list[RuleTaskDraft] = []
    covered: list[tuple[RuleTaskDraft, str]] = []
    lonely: list[str] = []
    for path, (should, near, line) in found.items():
        siblings = [
            (p, f"a prompt for {other}: {w}")
            for other, (s, _, _) in found.items()
            if other != path
            for p, w in s
        ]
        misses = near + siblings
        if not misses:
            lonely.append(path)
        for prompt, words, loads in [*((p, w, True) for p, w in should), *((p, w, False) for p, w in misses)]:
            task_id = _free_id(
                f"trigger-{_slug(path.split('/')[-2] if '/' in path else path, 20)}-{_slug(prompt)}", ids
            )
            task = Task(
                id=task_id,
                kind="trigger",
                prompt=prompt,
                trigger=Trigger(file=path, should_load=loads),
                reviewed=False,
            )
            draft = RuleTaskDraft(
                task, RuleKind.trigger if loads else RuleKind.near_miss, path, line, SECTION, words
            )
            if (path, " ".join(prompt.lower().split())) in taken:
                covered.append((draft, task_id))
                continue
            ids.add(task_id)
            drafts.append(draft)
    return DraftSet(sha, drafts, covered), lonely


def _free_id(wanted: str, taken: set[str]) -> str:
    base = wanted[:60].strip("-")
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"
