"""`docdelta tasks audit`: are the tasks testing anything, by evidence rather than by label?

A task measures an instruction file only when its answer is in the instruction files and
not in what every condition keeps. So every gold item (a command, a file, a cited quote) is
looked up in the source tree the agent would see (the sealed checkout's files: docdelta's
own config and tasks are stripped):

* in instruction files and no human doc -> a **target** item (the docs under test carry
  it); code that holds it too does not change the label, as the agent may never read that
  file, but is flagged (`in-code`): the `none` arm shows whether the agent finds it there;
* also in the human docs (README, CONTRIBUTING, docs/, other prose) -> a **control** item:
  every condition has it, so every arm should tie;
* in neither -> **unattainable** from the docs (the code may still hold it, which is said).

A task is a target when one of its items is, a control when all its items are; items the
prompt itself states (`leaked`) do not count, since the question gives them away. Past
results add what no reading can: tasks every arm always passes (or always fails) carry no
information and are candidates to drop, with the runs they cost. `holdout: true` tasks are
listed so the user sees which results the scorecard shows only in aggregate.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

from pydantic import Field

from docdelta.agents.models import RunStatus
from docdelta.config import ProjectConfig, matcher
from docdelta.git import Repo
from docdelta.grading.answer import normalize_path
from docdelta.instructions.globs import GlobSet
from docdelta.instructions.loading import GitTree, instruction_links
from docdelta.results.store import ResultStore
from docdelta.scorecard import stats
from docdelta.tasks.load import LoadedTask
from docdelta.tasks.models import Task, Trigger
from docdelta.tasks.quotes import locate, normalize
from docdelta.text import listing
from docdelta.vocabulary import Frozen

MAX_SCANNED_BYTES = 1_000_000
"""Larger blobs (data, vendored bundles) are not prose an agent reads for a rule: skipped."""
DOC_SUFFIXES = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc"})
DOC_NAMES = frozenset({"readme", "contributing", "hacking", "development"})
DOC_DIRS = frozenset({"docs", "doc"})


class FileKind(StrEnum):
    """What a file of the source tree is to the audit."""

    instructions = "instructions"
    docs = "docs"
    code = "code"


class GoldLabel(StrEnum):
    """What an item or a task measures, by where its gold stands."""

    target = "target"
    control = "control"
    unattainable = "unattainable"
    unlabelled = "unlabelled"
    """A task with no locatable gold item (only a verdict or key points), or all of them leaked."""


class ItemAudit(Frozen):
    kind: str = Field(description="command, file, citation or trigger")
    expected: str
    label: GoldLabel
    leaked: bool = Field(description="the task prompt states it")
    found_in: dict[FileKind, list[str]] = Field(default={}, description="kind -> files that hold it")
    in_tree: bool = Field(
        default=False,
        description="a file item whose path the tree holds: named by no file, listing may still find it",
    )


class Saturation(Frozen):
    """A task whose every arm scored the same extreme in every past run: no information."""

    level: float = Field(description="1.0: every run passed; 0.0: every run scored nothing")
    arms: list[str]
    runs: int = Field(description="graded runs of the task's current version in the results read")
    cost_usd: float | None = None
    tokens: int | None = None


class Flaw(StrEnum):
    """What makes a task a poor measure of its rule, whatever its label."""

    recites = "recites"
    """The prompt repeats the rule's own words: it tests finding a sentence, not applying it."""
    common_sense = "common-sense"
    """Every run without instruction files passed: agents know it without the file."""
    lost_condition = "lost-condition"
    """A quoted prohibition whose sentence has a condition (`when`, `unless`, ...) the quote
    leaves out: "never edit gen/" is wrong where the rule said "when you change the schema"."""
    unresolved_reference = "unresolved-reference"
    """The rule or the prompt starts with `it`/`this`/`they`: what it means is elsewhere."""
    in_code = "in-code"
    """A target item the code holds too (a CI workflow's `run: make check`): an agent that
    reads that file can answer without the instruction files, so head and none may tie."""
    same_prompt = "same-prompt"
    """Another task asks the same prompt and expects other gold: no answer can pass both, so
    the pair scores the agent's luck (a draft asked by a heading shared by many commands)."""


class TaskFlaw(Frozen):
    kind: Flaw
    detail: str


class TaskAuditEntry(Frozen):
    task: str
    label: GoldLabel
    holdout: bool
    reviewed: bool = Field(
        default=True, description="`reviewed: true`: `docdelta run` refuses the task otherwise"
    )
    items: list[ItemAudit]
    saturated: Saturation | None = None
    flaws: list[TaskFlaw] = Field(default=[], description="why the task may not measure its rule")


class SuiteAudit(Frozen):
    """`docdelta tasks audit --json`."""

    source_sha: str
    tasks: list[TaskAuditEntry]
    results_read: int = Field(default=0, description="runs read from --results workdirs")
    stale_runs: int = Field(default=0, description="runs of an older version of a task file: not counted")


@dataclass(frozen=True)
class SourceText:
    """The text files of the source tree an agent sees, by kind."""

    files: dict[str, tuple[FileKind, str]]

    def holders(self, needle: str) -> dict[FileKind, list[str]]:
        wanted = normalize(needle)
        found: dict[FileKind, list[str]] = defaultdict(list)
        if wanted:
            for path, (kind, text) in self.files.items():
                if wanted in text:
                    found[kind].append(path)
        return dict(found)


def file_kind(path: str, instruction: bool) -> FileKind:
    """Instruction files by the project's table; prose (README, CONTRIBUTING, docs/, *.md) is docs."""
    if instruction:
        return FileKind.instructions
    pure = PurePosixPath(path)
    if pure.suffix.lower() in DOC_SUFFIXES or pure.stem.lower() in DOC_NAMES:
        return FileKind.docs
    if any(part.lower() in DOC_DIRS for part in pure.parts[:-1]):
        return FileKind.docs
    return FileKind.code


def read_source(repo: Repo, sha: str, config: ProjectConfig, strip: Sequence[str] = ()) -> SourceText:
    """Every text blob at `sha` the agent's checkout would hold, whitespace-normalised."""
    match = matcher(config)
    stripped = GlobSet([*config.checkout_strip, *strip])
    links = instruction_links(GitTree(repo, sha), match.families)
    entries = [
        e
        for e in repo.tree(sha)
        if e.is_blob
        and not e.is_symlink
        and (e.size or 0) <= MAX_SCANNED_BYTES
        and not stripped.matches(e.path)
    ]
    files: dict[str, tuple[FileKind, str]] = {}
    by_oid = dict(repo.read_blobs(list({e.oid: None for e in entries})))
    for e in entries:
        data = by_oid[e.oid]
        if b"\0" in data[:8192]:
            continue  # binary
        instruction = match.matches(e.path) or e.path in links
        files[e.path] = (file_kind(e.path, instruction), normalize(data.decode("utf-8", "replace")))
    return SourceText(files)


def _label(found: dict[FileKind, list[str]]) -> GoldLabel:
    if found.get(FileKind.docs):
        return GoldLabel.control
    if found.get(FileKind.instructions):
        return GoldLabel.target
    return GoldLabel.unattainable


def _alternatives(entry: str | list[str]) -> list[str]:
    return [entry] if isinstance(entry, str) else list(entry)


def _merge(founds: Iterable[dict[FileKind, list[str]]]) -> dict[FileKind, list[str]]:
    out: dict[FileKind, list[str]] = defaultdict(list)
    for found in founds:
        for kind, paths in found.items():
            out[kind].extend(p for p in paths if p not in out[kind])
    return {k: sorted(v) for k, v in out.items()}


def audit_items(task: Task, source: SourceText) -> list[ItemAudit]:
    """Each locatable gold item of `task`, where it stands and whether the prompt gives it away.

    Commands and files are searched in every file; a citation stands in the file it cites
    (any of its alternatives), and its label follows that file's kind."""
    prompt = normalize(task.prompt)
    items: list[ItemAudit] = []
    for kind, entries in (("command", task.gold.commands), ("file", task.gold.files)):
        for entry in entries:
            alternatives = _alternatives(entry)
            found = _merge(source.holders(a) for a in alternatives)
            leaked = any(normalize(a) in prompt for a in alternatives)
            items.append(
                ItemAudit(
                    kind=kind,
                    expected=" | ".join(alternatives),
                    label=_label(found),
                    leaked=leaked,
                    found_in=found,
                    in_tree=kind == "file" and any(normalize_path(a) in source.files for a in alternatives),
                )
            )
    if task.trigger is not None:
        items.append(_trigger_item(task.trigger, source, prompt))
    for cite in task.gold_citations:
        holders: dict[FileKind, list[str]] = defaultdict(list)
        for choice in cite.choices():
            held = source.files.get(choice.path)
            if held is not None and locate(held[1], choice.quote) is not None:
                holders[held[0]].append(choice.path)
        leaked = any(normalize(c.quote) in prompt for c in cite.choices())
        found = {k: sorted(v) for k, v in holders.items()}
        items.append(
            ItemAudit(
                kind="citation",
                expected=f"{cite.path}: {cite.quote}",
                label=_label(found),
                leaked=leaked,
                found_in=found,
            )
        )
    return items


def _trigger_item(trigger: Trigger, source: SourceText, prompt: str) -> ItemAudit:
    """A trigger task's one item is its on-demand file: the task measures that file (target)
    when the tree holds it as an instruction file; a file missing there, or that no agent
    loads as instructions, is a trigger no condition can pull (unattainable). A prompt that
    names the file's path tells the agent what to load: leaked."""
    held = source.files.get(trigger.file)
    found = {held[0]: [trigger.file]} if held is not None else {}
    instruction = held is not None and held[0] is FileKind.instructions
    wanted = "should load" if trigger.should_load else "should not load"
    return ItemAudit(
        kind="trigger",
        expected=f"{trigger.file} ({wanted})",
        label=GoldLabel.target if instruction else GoldLabel.unattainable,
        leaked=normalize(trigger.file) in prompt,
        found_in=found,
    )


RECITED_WORDS = 6
"""Consecutive words of an instruction file a prompt may share before it recites the rule."""
_CONDITION = re.compile(r"\b(?:if|when|whenever|unless|except|only|while)\b", re.IGNORECASE)
_CODE = re.compile(r"(`{3,}|~{3,}).*?(?:\1|$)|`[^`]*`")
"""Fenced blocks and code spans of normalised text: `if`/`while` in a script, or `--only` in a
flag, are code, not a rule's condition; the prose around a block still is."""
_PROHIBITION = re.compile(r"\b(?:never|not|don't|avoid|no)\b", re.IGNORECASE)
_BLANK = re.compile(r"\[blank\]|\bfill in the blank", re.IGNORECASE)
"""How `tasks draft`'s quiz prompts (and hand-written ones like them) ask for a rule's missing words."""
_PRONOUN = re.compile(r"^(?:it|this|that|these|those|they|them)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\s[-*+]\s|\s#+\s|\s\d+[.)]\s")


def task_flaws(task: Task, source: SourceText, tally: _Tally | None = None) -> list[TaskFlaw]:
    """What reading (and past runs, when given) shows about how `task` is put, beside where
    its gold stands: a quiz that recites its rule, a rule every agent knows without the file
    (measured: the `none` arm's runs), a quote cut from its condition, a rule that starts
    with a pronoun whose referent the task does not carry."""
    flaws: list[TaskFlaw] = []
    instructions = [(p, text.lower()) for p, (k, text) in source.files.items() if k is FileKind.instructions]
    if _BLANK.search(task.prompt):
        flaws.append(
            TaskFlaw(kind=Flaw.recites, detail="the prompt asks to fill in a blank of the rule's sentence")
        )
    words = normalize(task.prompt).lower().split()
    for start in range(len(words) - RECITED_WORDS + 1):
        window = " ".join(words[start : start + RECITED_WORDS])
        held = next((p for p, text in instructions if window in text), None)
        if held is not None and not flaws:
            flaws.append(TaskFlaw(kind=Flaw.recites, detail=f'the prompt repeats {held}\'s words "{window}"'))
            break
    none_scores = tally.scores.get("none", []) if tally else []
    if none_scores and all(score == 1.0 for score in none_scores):
        flaws.append(
            TaskFlaw(
                kind=Flaw.common_sense,
                detail=f"all {len(none_scores)} run(s) without instruction files passed: "
                "agents know this anyway",
            )
        )
    for cite in task.gold_citations:
        cited = source.files.get(cite.path)
        at = cited[1].find(normalize(cite.quote)) if cited else -1
        if cited is not None and at >= 0:
            sentence = _sentence(cited[1], at, at + len(normalize(cite.quote)))
            condition = _CONDITION.search(_CODE.sub(" ", sentence.replace(normalize(cite.quote), " ")))
            if condition and _PROHIBITION.search(cite.quote) and not _CONDITION.search(cite.quote):
                flaws.append(
                    TaskFlaw(
                        kind=Flaw.lost_condition,
                        detail=f'{cite.path} says "{sentence}"; the quote leaves out its '
                        f"`{condition.group(0)}`: check the gold holds without it",
                    )
                )
    texts = [*((c.quote, f"the quote of {c.path}") for c in task.gold_citations), (task.prompt, "the prompt")]
    for text, what in texts:
        pronoun = _PRONOUN.match(text.strip())
        if pronoun:
            flaws.append(
                TaskFlaw(
                    kind=Flaw.unresolved_reference,
                    detail=f"{what} starts with `{pronoun.group(0)}`: what it means is not in the task",
                )
            )
    return list({f.detail: f for f in flaws}.values())


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence (or list item) of normalised `text` that holds `text[start:end]`."""
    before = [m.end() for m in _SENTENCE_END.finditer(text, 0, start)]
    after = _SENTENCE_END.search(text, end)
    return text[before[-1] if before else 0 : after.end() if after else len(text)].strip()


def code_flaws(items: Sequence[ItemAudit]) -> list[TaskFlaw]:
    """A flaw per counted target item that code files hold too: the label stays target (no
    human doc carries it, so the arms need not tie), but an agent may find it in the code."""
    return [
        TaskFlaw(
            kind=Flaw.in_code,
            detail=f"{item.kind} `{item.expected}` also stands in code "
            f"({listing(item.found_in[FileKind.code])}): an agent that reads it can answer without "
            "the instruction files",
        )
        for item in items
        if item.label is GoldLabel.target and not item.leaked and item.found_in.get(FileKind.code)
    ]


def _gold_of(task: Task) -> str:
    return task.gold.model_dump_json(include={"commands", "files", "verdict"})


def same_prompt_flaws(tasks: Sequence[Task]) -> dict[str, list[TaskFlaw]]:
    """Per task, the flaw of sharing its prompt (whitespace-normalised) with tasks whose
    commands, files or verdict differ."""
    by_prompt: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_prompt[normalize(task.prompt)].append(task)
    flaws: dict[str, list[TaskFlaw]] = {}
    for same in by_prompt.values():
        for task in same:
            others = sorted(o.id for o in same if _gold_of(o) != _gold_of(task))
            if others:
                several = len(others) > 1
                detail = (
                    f"{'tasks' if several else 'task'} {', '.join(others)} {'ask' if several else 'asks'} "
                    "the same prompt with other gold: no answer passes all of them"
                )
                flaws[task.id] = [TaskFlaw(kind=Flaw.same_prompt, detail=detail)]
    return flaws


def task_label(items: Sequence[ItemAudit]) -> GoldLabel:
    """Target when an unleaked item is only in the instruction files; control when every
    unleaked item is in the human docs too; else unattainable (or unlabelled: nothing to go on)."""
    counted = [i.label for i in items if not i.leaked]
    if not counted:
        return GoldLabel.unlabelled
    if GoldLabel.target in counted:
        return GoldLabel.target
    if all(label is GoldLabel.control for label in counted):
        return GoldLabel.control
    return GoldLabel.unattainable


@dataclass
class _Tally:
    scores: dict[str, list[float]]
    runs: int = 0
    cost: float | None = None
    tokens: int | None = None


def _tallies(workdirs: Sequence[Path], current: dict[str, str]) -> tuple[dict[str, _Tally], int, int]:
    """Per task, the graded scores per arm of runs of the task's current file (by hash)."""
    tallies: dict[str, _Tally] = {}
    read = stale = 0
    for workdir in workdirs:
        store = ResultStore(workdir)
        manifest = store.read_manifest()
        if manifest is None:
            continue
        for run in store.results(manifest.repo):
            read += 1
            task = run.cell.task
            if current.get(task) != run.task_sha256:
                stale += task in current
                continue
            tally = tallies.setdefault(task, _Tally(defaultdict(list)))
            tally.runs += 1
            metrics = run.outcome.metrics
            if metrics.cost_usd is not None:
                tally.cost = (tally.cost or 0.0) + metrics.cost_usd
            if metrics.tokens_in is not None and metrics.tokens_out is not None:
                tally.tokens = (tally.tokens or 0) + metrics.tokens_in + metrics.tokens_out
            if run.status is not RunStatus.infra_error and run.score is not None:
                tally.scores[run.cell.condition].append(run.score.value)
    return tallies, read, stale


def _saturation(tally: _Tally) -> Saturation | None:
    """Every arm (two or more) at the same extreme in every graded run."""
    level = stats.saturation(tally.scores)
    if level is None:
        return None
    arms = sorted(arm for arm, scores in tally.scores.items() if scores)
    return Saturation(level=level, arms=arms, runs=tally.runs, cost_usd=tally.cost, tokens=tally.tokens)


def audit_suite(
    tasks: Sequence[LoadedTask], source: SourceText, source_sha: str, results: Sequence[Path] = ()
) -> SuiteAudit:
    """The audit of every task against the source tree and the past results given."""
    tallies, read, stale = _tallies(results, {t.task.id: t.sha256 for t in tasks})
    shared = same_prompt_flaws([t.task for t in tasks])
    entries = []
    for loaded in tasks:
        items = audit_items(loaded.task, source)
        tally = tallies.get(loaded.task.id)
        entries.append(
            TaskAuditEntry(
                task=loaded.task.id,
                label=task_label(items),
                holdout=loaded.task.holdout,
                reviewed=loaded.task.reviewed,
                items=items,
                saturated=_saturation(tally) if tally else None,
                flaws=task_flaws(loaded.task, source, tally)
                + code_flaws(items)
                + shared.get(loaded.task.id, []),
            )
        )
    return SuiteAudit(source_sha=source_sha, tasks=entries, results_read=read, stale_runs=stale)


def _one_line(text: str) -> str:
    """A multi-line quote or command (a block's lines, a heredoc) on the one line the plain
    text gives each item, so it does not break the indentation that groups items by task."""
    return " ".join(text.split())


def _where(item: ItemAudit) -> str:
    """Where an item stands, as its line ends: the files that state it, or that none does (for a
    file the tree holds, that it exists all the same: the label counts only what files say)."""
    leak = "  LEAKED by the prompt" if item.leaked else ""
    if item.found_in:
        return "in " + "; ".join(f"{k.value}: {listing(v)}" for k, v in item.found_in.items()) + leak
    if item.in_tree:
        return f"named in no file (the file exists: an agent may still find it by listing the tree){leak}"
    return f"stated in no file{leak}"


def render(audit: SuiteAudit) -> str:
    """The audit as plain text: a line per task, its items indented, then the findings."""
    lines = [f"task audit of source {audit.source_sha[:12]}"]
    for entry in audit.tasks:
        holdout = "  [holdout: aggregate only]" if entry.holdout else ""
        unreviewed = "" if entry.reviewed else "  [unreviewed: `docdelta run` refuses it]"
        lines.append(f"{entry.label.value:<13} {entry.task}{holdout}{unreviewed}")
        for item in entry.items:
            lines.append(
                f"    {item.label.value:<13} {item.kind} `{_one_line(item.expected)}` {_where(item)}"
            )
        lines.extend(f"    ! {flaw.kind.value}: {_one_line(flaw.detail)}" for flaw in entry.flaws)
    flawed = [e for e in audit.tasks if e.flaws]
    if flawed:
        lines.append("")
        lines.append(
            f"tasks that may not measure their rule (`!` above): {len(flawed)} of {len(audit.tasks)}"
        )
    leaked = [(e.task, i) for e in audit.tasks for i in e.items if i.leaked]
    lines.append("")
    lines.append(f"leaked answers: {len(leaked)}")
    lines.extend(f"  {task}: the prompt states {i.kind} `{_one_line(i.expected)}`" for task, i in leaked)
    saturated = [e for e in audit.tasks if e.saturated]
    lines.append(
        f"saturated tasks (candidates to drop): {len(saturated)} of {len(audit.tasks)}, "
        f"from {audit.results_read} past runs"
        + (f" ({audit.stale_runs} of older task versions not counted)" if audit.stale_runs else "")
    )
    for e in saturated:
        s = e.saturated
        assert s is not None
        cost = f", ${s.cost_usd:.2f}" if s.cost_usd is not None else ""
        tokens = f", {s.tokens:,} tokens" if s.tokens is not None else ""
        lines.append(
            f"  {e.task}: every run of {', '.join(s.arms)} scored {s.level:g}; it cost {s.runs} runs"
            f"{cost}{tokens}"
        )
    drafts = [e.task for e in audit.tasks if not e.reviewed]
    lines.append(f"unreviewed tasks (set `reviewed: true` once checked): {len(drafts)} of {len(audit.tasks)}")
    held = [e.task for e in audit.tasks if e.holdout]
    lines.append(f"holdout tasks (run, shown only in aggregate): {len(held)}")
    lines.extend(f"  {t}" for t in held)
    return "\n".join(lines)
