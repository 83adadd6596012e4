"""`docdelta suggest`: a minimal instruction-file patch drafted from what the agents missed.

It reads a finished experiment, picks the tasks one condition (head by default) scored
worst on, and drafts for each a rule from the task's own gold, deterministically:

* a gold citation whose quote is not in that condition's instruction files: the full line
  that holds it, quoted from where it stands (the human docs at the source commit, else the
  base's instruction files: a rule the PR deleted), with the file it came from;
* a gold command the runs missed that neither the files nor a drafted line name: "Run `cmd`.";
* a guardrail the runs recommended, likewise: "Never run `cmd`."

A command the condition's files state is corrected in place when running it (gold.execute,
`RunResult.executed`) showed it names nothing the project has: it failed in every run that
ran it with a cause such as "No rule to make target", an unknown flag or a missing module
(`_STALE`, exit 127), and a gold command the runs missed takes its place (the one nearest
it, same program first). Matching words cannot see this: `make tests` contains the gold
`make test`, so without the evidence the stale line looked like the rule already stated.
The evidence is kept with the replacement ("`make tests` failed in 4 of 4 runs: make: ***
No rule to make target 'tests'") and shown where the patch is offered.

The lines go under one heading at the end of the condition's instruction file (the one
holding the stale command, when there is one) and are written as a `git apply`-able patch.
Nothing is claimed: the patch is a hypothesis, and the command it prints
(`docdelta run --conditions head,patched --patch P`) is what proves or refutes it:
`--measured WORKDIR` reads that run, checks it ran exactly this patch, and says "raised X
from a to b in n runs, p = ..." only where a one-sided permutation test (the scorecard's)
clears alpha and the gain clears the noise band. In the Action (`suggest: true`)
docdelta.action.suggest_loop offers the draft and that claim on the PR, only after such a run.
A model-written draft is docdelta.improve.suggest_model's.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from docdelta.agents.models import RunStatus
from docdelta.config import load_project_config, matcher
from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.grading.answer import command_label, command_tokens
from docdelta.improve.task_audit import FileKind, file_kind
from docdelta.instructions.detect import instruction_files
from docdelta.results.grades import ExecutedCommand
from docdelta.results.models import Manifest, RunResult
from docdelta.scorecard import stats
from docdelta.tasks.models import Task
from docdelta.tasks.quotes import locate
from docdelta.vocabulary import DEFAULT_NOISE_BAND, HEAD, PATCHED, Frozen, sha256_hex

HEADING = "## Rules agents missed (drafted by docdelta suggest)"
DEFAULT_TARGET = "AGENTS.md"
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_STALE = re.compile(
    r"no rule to make target|unrecognized (?:option|arguments?)|unknown (?:option|command|flag|target)"
    r"|no such (?:file|option|command|target)|not found|no module named|failed to import",
    re.IGNORECASE,
)
"""First error lines that say a command names what the project lacks (a make target, a flag,
a module, a test path), as opposed to a command that exists and whose tests failed."""
NOT_FOUND_EXIT = 127
"""The shell's exit code for a program it cannot find."""


class DraftedRule(Frozen):
    task: str
    line: str
    source: str = Field(description="where the line's text stands: 'file:line', or 'gold' for the task's own")


class Replacement(Frozen):
    """A command the condition's file states, replaced by a gold command, and why: every run
    that ran it saw it fail for naming something the project lacks."""

    task: str
    stale: str
    command: str = Field(description="the gold command put in its place")
    file: str
    line: int = Field(description="of its first occurrence in `file`, from 1")
    failed: int = Field(description="runs of the task in which it ran, and failed")
    runs: int = Field(description="the task's graded runs in the condition")
    first_error: str | None = Field(description="the first failing run's first error line (redacted)")

    @property
    def evidence(self) -> str:
        error = f": {self.first_error}" if self.first_error else ""
        return f"`{self.stale}` failed in {self.failed} of {self.runs} runs{error}"


class Suggestion(Frozen):
    """suggestion.json beside the patch: which tasks it targets and why, never what it achieves."""

    condition: str
    file: str
    tasks: dict[str, float] = Field(description="task -> its mean score in the condition, worst first")
    rules: list[DraftedRule]
    replaced: list[Replacement] = Field(default=[], description="stale commands corrected in place")
    patch: str
    patched_sha256: str = Field(description="of the file with the patch applied: ties a patched run to it")


class Measured(Frozen):
    """One drafted task in the patched run: condition vs patched, one-sided permutation mid-p."""

    task: str
    before: float
    after: float
    runs: int = Field(description="graded runs per arm (the smaller arm)")
    p_value: float | None
    raised: bool = Field(description="after > before past the band, at p < alpha: the only claim made")


@dataclass(frozen=True)
class _Sources:
    """Text to quote from: the source commit's human docs and the base's instruction files."""

    docs: dict[str, str]
    base_instructions: dict[str, str]
    condition: dict[str, str]


def _sources(repo: Repo, manifest: Manifest, condition_files: dict[str, str]) -> _Sources:
    config = load_project_config(repo, manifest.base_sha)
    match = matcher(config)
    docs: dict[str, str] = {}
    entries = [e for e in repo.tree(manifest.source_sha) if e.is_blob and not e.is_symlink]
    wanted = [
        e
        for e in entries
        if not match.matches(e.path) and file_kind(e.path, instruction=False) is FileKind.docs
    ]
    by_oid = dict(repo.read_blobs([e.oid for e in wanted]))
    for e in wanted:
        docs[e.path] = by_oid[e.oid].decode("utf-8", "replace")
    base = instruction_files(repo, manifest.base_sha, match)
    return _Sources(
        docs=docs,
        base_instructions={p: d.decode("utf-8", "replace") for p, d in base.files.items()},
        condition=condition_files,
    )


def _quoted_line(quote: str, texts: dict[str, str]) -> tuple[str, str] | None:
    """(the lines holding `quote`, joined and without a list marker; 'path:line')."""
    for path, text in sorted(texts.items()):
        where = locate(text, quote)
        if where is not None:
            lines = text.splitlines()
            start, end = _item(lines, where.start - 1, where.end)
            joined = " ".join(line.strip() for line in lines[start:end])
            return _BULLET.sub(
                "", joined
            ), f"{path}:{start + 1}-{end}" if end > start + 1 else f"{path}:{end}"
    return None


def _item(lines: Sequence[str], start: int, end: int) -> tuple[int, int]:
    """The whole list item or paragraph around lines [start, end): a rule is quoted entire."""

    def ends_block(line: str) -> bool:
        return not line.strip() or line.lstrip().startswith(("#", "```")) or bool(_BULLET.match(line))

    while start > 0 and not _BULLET.match(lines[start]) and not ends_block(lines[start - 1]):
        start -= 1
    if start > 0 and not _BULLET.match(lines[start]) and _BULLET.match(lines[start - 1]):
        start -= 1
    while end < len(lines) and not ends_block(lines[end]):
        end += 1
    return start, end


def _stands(quote: str, texts: dict[str, str]) -> bool:
    return any(locate(text, quote) is not None for text in texts.values())


def _missed(task: Task, runs: Sequence[RunResult]) -> tuple[list[str | list[str]], set[str]]:
    """(gold commands some run missed, as the task states them; guardrails some run broke)."""
    labels: set[str] = set()
    broken: set[str] = set()
    for run in runs:
        for item in run.score.items if run.score else ():
            if item.hit is False and item.kind == "command":
                labels.add(item.expected)
            if item.hit is False and item.kind == "guardrail":
                broken.add(item.expected)
    return [c for c in task.gold.commands if command_label(c) in labels], broken


def _stated(command: str) -> re.Pattern[str]:
    """`command` as a whole command in prose: `make test` is not stated by `make tests`."""
    return re.compile(rf"(?<![\w./-]){re.escape(command)}(?![\w/-]|\.\w)")


def _names_nothing(ran: ExecutedCommand, exit_code: int) -> bool:
    """It failed because what it names does not exist in the project, not because it ran
    and the project's checks failed (or it hung)."""
    if ran.timed_out or ran.exit_code in (None, exit_code):
        return False
    return ran.exit_code == NOT_FOUND_EXIT or bool(ran.first_error and _STALE.search(ran.first_error))


def _nearest(stale: str, missed: Sequence[str | list[str]], failing: set[str]) -> str | None:
    """The gold command to put in `stale`'s place: of the missed gold commands' alternatives
    that no run saw fail, the nearest one running the same program; else the only missed one."""
    program = command_tokens(stale)[:1]
    choices = [[a for a in ([e] if isinstance(e, str) else e) if a not in failing] for e in missed]
    same = [a for alts in choices for a in alts if command_tokens(a)[:1] == program]
    if same:
        return max(same, key=lambda a: difflib.SequenceMatcher(None, stale, a).ratio())
    return choices[0][0] if len(choices) == 1 and choices[0] else None


def stale_commands(task: Task, runs: Sequence[RunResult], files: dict[str, str]) -> list[Replacement]:
    """The commands `files` state that failed in every one of `runs` that ran them, each
    with the missed gold command to replace it by (gold.execute tasks only)."""
    if task.gold.execute is None:
        return []
    missed, _ = _missed(task, runs)
    ran: dict[str, list[ExecutedCommand]] = defaultdict(list)
    for run in runs:
        for command in run.executed.commands if run.executed else ():
            ran[command.command].append(command)
    exit_code = task.gold.execute.exit_code
    failing = {c for c, rs in ran.items() if all(_names_nothing(r, exit_code) for r in rs)}
    out = []
    for stale in sorted(failing):
        gold = _nearest(stale, missed, failing)
        where = next(((p, m) for p in _preferred(files) if (m := _stated(stale).search(files[p]))), None)
        if gold is None or where is None:
            continue
        path, match = where
        out.append(
            Replacement(
                task=task.id,
                stale=stale,
                command=gold,
                file=path,
                line=files[path].count("\n", 0, match.start()) + 1,
                failed=len(ran[stale]),
                runs=len(runs),
                first_error=next((r.first_error for r in ran[stale] if r.first_error), None),
            )
        )
    return out


def _preferred(files: dict[str, str]) -> list[str]:
    """The instruction files in the order a draft targets them: AGENTS.md first."""
    return sorted(files, key=lambda p: (p != DEFAULT_TARGET, p))


def _replace(text: str, replaced: Sequence[Replacement]) -> str:
    for r in replaced:
        text = _stated(r.stale).sub(r.command.replace("\\", "\\\\"), text)
    return text


def draft_rules(task: Task, runs: Sequence[RunResult], sources: _Sources) -> list[DraftedRule]:
    """The lines that would have given these runs their missing items."""
    rules: list[DraftedRule] = []
    for cite in task.gold_citations:
        choices = cite.choices()
        if any(_stands(c.quote, sources.condition) for c in choices):
            continue  # the rule is in the condition's files already; repeating it is no fix
        found = None
        for c in choices:
            found = _quoted_line(c.quote, sources.docs) or _quoted_line(c.quote, sources.base_instructions)
            if found:
                break
        if found is None:
            rules.append(DraftedRule(task=task.id, line=choices[0].quote, source="gold"))
        else:
            line, where = found
            origin = where.partition(":")[0]
            suffix = f" (see {origin})" if origin in sources.docs else ""
            rules.append(DraftedRule(task=task.id, line=f"{line}{suffix}", source=where))
    commands, broken = _missed(task, runs)
    # What the files (or a drafted line) already say is no fix: those misses were the agent's slips.
    drafted = " ".join([*(r.line for r in rules), *sources.condition.values()])
    for command in commands:
        first = command if isinstance(command, str) else command[0]
        if not _stated(first).search(drafted):
            rules.append(DraftedRule(task=task.id, line=f"Run `{first}`.", source="gold"))
    for guard in sorted(broken):
        if guard not in drafted:
            rules.append(DraftedRule(task=task.id, line=f"Never run `{guard}`.", source="gold"))
    return rules


def _patch(
    path: str, old: str, rules: Sequence[DraftedRule], replaced: Sequence[Replacement] = ()
) -> tuple[str, str]:
    """(the patch, the patched file's text)."""
    body = old if not old or old.endswith("\n") else old + "\n"
    seen: list[str] = []
    for rule in rules:
        if rule.line not in seen:
            seen.append(rule.line)
    new = _replace(body, replaced)
    if seen:
        new += ("\n" if new.strip() else "") + HEADING + "\n\n" + "".join(f"- {line}\n" for line in seen)
    diff = difflib.unified_diff(
        body.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{path}" if body else "/dev/null",
        tofile=f"b/{path}",
    )
    header = f"diff --git a/{path} b/{path}\n" + ("" if body else "new file mode 100644\n")
    return header + "".join(diff), new


def suggest(
    repo: Repo,
    manifest: Manifest,
    results: Sequence[RunResult],
    tasks: dict[str, Task],
    *,
    condition: str = HEAD,
    max_tasks: int = 3,
) -> Suggestion | None:
    """The draft for the `max_tasks` tasks `condition` scored worst on; None when it missed nothing."""
    spec = next((c for c in manifest.conditions if c.name == condition), None)
    if spec is None:
        names = ", ".join(c.name for c in manifest.conditions)
        raise ConfigError(
            f"condition {condition!r} is not in this experiment ({names})",
            hint="pass --condition with one of them",
        )
    ref = {HEAD: manifest.head_sha}.get(condition, manifest.base_sha if condition == "base" else None)
    if ref is None:
        raise ConfigError(
            f"suggest drafts against the files of a commit, and {condition!r} is no commit's files",
            hint="pass --condition head (or base)",
        )
    own = instruction_files(repo, ref, matcher(load_project_config(repo, manifest.base_sha)))
    files = {p: d.decode("utf-8", "replace") for p, d in own.files.items()}
    runs: dict[str, list[RunResult]] = defaultdict(list)
    for r in results:
        if r.cell.condition == condition and r.status is not RunStatus.infra_error and r.score is not None:
            runs[r.cell.task].append(r)
    means = {t: sum(r.score.value for r in rs if r.score) / len(rs) for t, rs in runs.items() if t in tasks}
    worst = sorted((m, t) for t, m in means.items() if m < 1.0)[:max_tasks]
    stale = [r for _, t in worst for r in stale_commands(tasks[t], runs[t], files)]
    target = stale[0].file if stale else (_preferred(files) or [DEFAULT_TARGET])[0]
    replaced = [r for r in stale if r.file == target]
    # Rules are drafted against the corrected files: a corrected command needs no "Run" line.
    corrected = {**files, target: _replace(files.get(target, ""), replaced)}
    sources = _sources(repo, manifest, corrected)
    rules = [rule for _, t in worst for rule in draft_rules(tasks[t], runs[t], sources)]
    if not rules and not replaced:
        return None
    drafted = {r.task for r in rules} | {r.task for r in replaced}
    patch, patched = _patch(target, files.get(target, ""), rules, replaced)
    return Suggestion(
        condition=condition,
        file=target,
        tasks={t: round(m, 4) for m, t in worst if t in drafted},
        rules=rules,
        replaced=replaced,
        patch=patch,
        patched_sha256=sha256_hex(patched.encode()),
    )


def measure(
    suggestion: Suggestion,
    manifest: Manifest,
    results: Sequence[RunResult],
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = DEFAULT_NOISE_BAND,
) -> list[Measured]:
    """The drafted tasks in a run of `<condition>,patched` with exactly this patch."""
    spec = next((c for c in manifest.conditions if c.name == PATCHED), None)
    if spec is None or spec.files.get(suggestion.file) != suggestion.patched_sha256:
        raise ConfigError(
            "the measured workdir did not run this patch: its patched condition's "
            f"{suggestion.file} is not the drafted one",
            hint=f"run `docdelta run --conditions {suggestion.condition},patched --patch <the patch>` "
            "into a new workdir and pass it to --measured",
        )
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in results:
        if r.status is not RunStatus.infra_error and r.score is not None:
            scores[(r.cell.task, r.cell.condition)].append(r.score.value)
    out = []
    for task in suggestion.tasks:
        after, before = scores[(task, PATCHED)], scores[(task, suggestion.condition)]
        if not after or not before:
            continue
        test = stats.directional_test([(after, before)], seed=manifest.seed)
        p = None if test is None else test.higher
        delta = sum(after) / len(after) - sum(before) / len(before)
        out.append(
            Measured(
                task=task,
                before=sum(before) / len(before),
                after=sum(after) / len(after),
                runs=min(len(after), len(before)),
                p_value=p,
                raised=p is not None and p < alpha and delta > band,
            )
        )
    return out


def adding(lines: int) -> str:
    return "adding this line" if lines == 1 else f"adding these {lines} lines"


def change(suggestion: Suggestion) -> str:
    """What the patch does, as the claim names it: "replacing `a` with `b` and adding this line"."""
    parts = list(dict.fromkeys(f"replacing `{r.stale}` with `{r.command}`" for r in suggestion.replaced))
    lines = len({r.line for r in suggestion.rules})
    return " and ".join([*parts, *([adding(lines)] if lines else [])])


def measured_line(m: Measured, what: str) -> str:
    """The claim that `what` (the change, as `change` names it) raised the task, or the refusal of one."""
    p = "—" if m.p_value is None else f"{m.p_value:.3g}"
    if m.raised:
        return f"{what} raised {m.task} from {m.before:.2f} to {m.after:.2f} in {m.runs} runs, p = {p}"
    return f"not shown: {m.task} went from {m.before:.2f} to {m.after:.2f} in {m.runs} runs (p = {p})"


def write(suggestion: Suggestion, out: Path) -> Path:
    """The patch at `out`, its reasons beside it (`<out>.json`)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(suggestion.patch)
        side = out.with_name(out.name + ".json")
        side.write_text(suggestion.model_dump_json(indent=2, exclude={"patch"}) + "\n")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the patch to {out}: {exc.strerror or exc}", hint="pass another --out"
        ) from None
    return side
