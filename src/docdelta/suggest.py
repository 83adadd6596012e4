"""`docdelta suggest`: a minimal instruction-file patch drafted from what the agents missed.

It reads a finished experiment, picks the tasks one condition (head by default) scored
worst on, and drafts for each a rule from the task's own gold, deterministically:

* a gold citation whose quote is not in that condition's instruction files: the full line
  that holds it, quoted from where it stands (the human docs at the source commit, else the
  base's instruction files: a rule the PR deleted), with the file it came from;
* a gold command the runs missed that neither the files nor a drafted line name: "Run `cmd`.";
* a guardrail the runs recommended, likewise: "Never run `cmd`."

The lines go under one heading at the end of the condition's instruction file and are
written as a `git apply`-able patch. Nothing is claimed: the patch is a hypothesis, and the
command it prints (`docdelta run --conditions head,patched --patch P`) is what proves or
refutes it: `--measured WORKDIR` reads that run, checks it ran exactly this patch, and says
"raised X from a to b in n runs, p = ..." only where a one-sided permutation test (the
scorecard's) clears alpha and the gain clears the noise band. In the Action (`suggest: true`)
docdelta.loop_comment offers the draft and that claim on the PR, only after such a run.
A model-written draft is docdelta.suggest_model's.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from docdelta import stats
from docdelta.config import load_project_config, matcher
from docdelta.detect import instruction_files
from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.models import HEAD, PATCHED, Frozen, Manifest, RunResult, RunStatus, Task, sha256_hex
from docdelta.quotes import locate
from docdelta.task_audit import FileKind, file_kind

HEADING = "## Rules agents missed (drafted by docdelta suggest)"
DEFAULT_TARGET = "AGENTS.md"
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


class DraftedRule(Frozen):
    task: str
    line: str
    source: str = Field(description="where the line's text stands: 'file:line', or 'gold' for the task's own")


class Suggestion(Frozen):
    """suggestion.json beside the patch: which tasks it targets and why, never what it achieves."""

    condition: str
    file: str
    tasks: dict[str, float] = Field(description="task -> its mean score in the condition, worst first")
    rules: list[DraftedRule]
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


def _missed(runs: Sequence[RunResult]) -> tuple[set[str], set[str]]:
    """(gold commands some run missed, guardrails some run broke)."""
    commands: set[str] = set()
    broken: set[str] = set()
    for run in runs:
        for item in run.score.items if run.score else ():
            if item.hit is False and item.kind == "command":
                commands.add(item.expected)
            if item.hit is False and item.kind == "guardrail":
                broken.add(item.expected)
    return commands, broken


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
    commands, broken = _missed(runs)
    # What the files (or a drafted line) already say is no fix: those misses were the agent's slips.
    drafted = " ".join([*(r.line for r in rules), *sources.condition.values()])
    for command in sorted(commands):
        first = command.split(" | ")[0]
        if first not in drafted:
            rules.append(DraftedRule(task=task.id, line=f"Run `{first}`.", source="gold"))
    for guard in sorted(broken):
        if guard not in drafted:
            rules.append(DraftedRule(task=task.id, line=f"Never run `{guard}`.", source="gold"))
    return rules


def _patch(path: str, old: str, rules: Sequence[DraftedRule]) -> tuple[str, str]:
    """(the patch, the patched file's text)."""
    body = old if not old or old.endswith("\n") else old + "\n"
    seen: list[str] = []
    for rule in rules:
        if rule.line not in seen:
            seen.append(rule.line)
    new = body + ("\n" if body.strip() else "") + HEADING + "\n\n" + "".join(f"- {line}\n" for line in seen)
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
    sources = _sources(repo, manifest, files)
    rules = [rule for _, t in worst for rule in draft_rules(tasks[t], runs[t], sources)]
    if not rules:
        return None
    drafted = {r.task for r in rules}
    target = DEFAULT_TARGET if DEFAULT_TARGET in files or not files else sorted(files)[0]
    patch, patched = _patch(target, files.get(target, ""), rules)
    return Suggestion(
        condition=condition,
        file=target,
        tasks={t: round(m, 4) for m, t in worst if t in drafted},
        rules=rules,
        patch=patch,
        patched_sha256=sha256_hex(patched.encode()),
    )


def measure(
    suggestion: Suggestion,
    manifest: Manifest,
    results: Sequence[RunResult],
    *,
    alpha: float = stats.DEFAULT_ALPHA,
    band: float = stats.DEFAULT_NOISE_BAND,
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


def measured_line(m: Measured, lines: int) -> str:
    """The claim, or the refusal of one."""
    p = "—" if m.p_value is None else f"{m.p_value:.3g}"
    if m.raised:
        change = f"from {m.before:.2f} to {m.after:.2f} in {m.runs} runs"
        these = "this line" if lines == 1 else f"these {lines} lines"
        return f"adding {these} raised {m.task} {change}, p = {p}"
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
