"""`docdelta ablate`: which sections of an instruction file earn their cost.

The file at `--ref` is split into units (Markdown sections under the top heading level
that repeats, or top-level bullets), and each condition is the ref's instruction files
with some units removed — an overlay on the same source commit like every condition.

Removing one unit per condition costs (units + 1) conditions. The default design is a
two-level fractional factorial instead: a Sylvester-Hadamard matrix of N >= 2 x units rows,
one column per unit taken from the columns with an odd number of set bits, so main effects
are aliased with no two-unit interaction (resolution IV). Row 0 removes nothing (the full
file: `head`); every other row removes half the units. Each unit's effect is then the mean
of the runs where it was removed minus the mean where it stayed, and uses every run of the
design, so each effect rests on N x repeats / 2 runs per side. One at a time needs
`repeats` runs per side per unit for the same precision: the design replicates just
enough rows (`ceil(2 x repeats / N)`) to match it, and reports the runs it saved.

Per unit it reports the effect on each task's score and on tokens, cost and turns, each
with a seeded bootstrap interval, the tasks it moves (the interval clear of zero and the
effect past the noise band), and "candidate to cut" when it moves no task but costs tokens
(where the agent reports no tokens: any section with text, since it is read on every run).
The design assumes effects add up apart from interactions of three or more units; one
redundant rule stated in two sections shows as two small effects, which the report says.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from pydantic import Field

from docdelta.agents.models import RunStatus
from docdelta.config import load_project_config, matcher
from docdelta.errors import ConfigError
from docdelta.evaluation import Deps, Evaluation, RunOptions, evaluate
from docdelta.experiment.plan import ExperimentRequest
from docdelta.instructions.detect import Overlay, instruction_files
from docdelta.results.layout import ABLATION_FILE
from docdelta.results.models import RunResult
from docdelta.scorecard import stats
from docdelta.tasks.load import load_tasks
from docdelta.validate import MAX_RUNS_WITHOUT_CONFIRMATION, AblationDesign, AblationUnit
from docdelta.vocabulary import DEFAULT_NOISE_BAND, HEAD, Frozen

ABLATE_PREFIX = "ablate-"
PREAMBLE = "(preamble)"


Unit = AblationUnit
Design = AblationDesign


class Section(Frozen):
    """One removable unit of the file: 1-based inclusive lines."""

    name: str
    start: int
    end: int
    chars: int


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark")


def _heading_sections(text: str) -> list[Section]:
    tokens = _md().parse(text)
    lines = text.splitlines()
    heads = [
        (int(t.tag[1]), t.map[0], tokens[i + 1].content)
        for i, t in enumerate(tokens)
        if t.type == "heading_open" and t.map
    ]
    if not heads:
        return []
    counts: dict[int, int] = defaultdict(int)
    for level, _, _ in heads:
        counts[level] += 1
    repeated = [level for level in sorted(counts) if counts[level] > 1]
    level = repeated[0] if repeated else min(counts)
    starts = [(line, title) for lvl, line, title in heads if lvl == level]
    bounds: list[tuple[str, int, int]] = []
    if starts[0][0] > 0:
        bounds.append((_preamble_name(heads, starts[0][0]), 0, starts[0][0]))
    for k, (line, title) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        bounds.append((title.strip() or f"line {line + 1}", line, end))
    return [
        Section(name=name, start=a + 1, end=b, chars=len("\n".join(lines[a:b])))
        for name, a, b in bounds
        if "\n".join(lines[a:b]).strip()
    ]


def _preamble_name(heads: Sequence[tuple[int, int, str]], before: int) -> str:
    titles = [title for _, line, title in heads if line < before]
    return f"{PREAMBLE} {titles[0]}" if titles else PREAMBLE


def _bullet_sections(text: str) -> list[Section]:
    """Each top-level list item; headings and paragraphs are kept in every condition."""
    tokens = _md().parse(text)
    lines = text.splitlines()
    heading = ""
    out: list[Section] = []
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            heading = tokens[i + 1].content.strip()
        if t.type == "list_item_open" and t.level == 1 and t.map:
            a, b = t.map
            while b > a + 1 and not lines[b - 1].strip():
                b -= 1  # a list's last item carries the blank line after it
            body = " ".join(" ".join(lines[a:b]).split()).lstrip("-*+ ")
            label = body[:48] + ("…" if len(body) > 48 else "")
            out.append(
                Section(
                    name=f"{heading} • {label}" if heading else label,
                    start=a + 1,
                    end=b,
                    chars=len("\n".join(lines[a:b])),
                )
            )
    return out


def split(text: str, unit: Unit) -> list[Section]:
    """The file's removable units, in file order."""
    return _heading_sections(text) if unit is Unit.heading else _bullet_sections(text)


def without(text: str, sections: Sequence[Section]) -> str:
    """`text` with the lines of `sections` removed."""
    drop = {n for s in sections for n in range(s.start, s.end + 1)}
    kept = [line for n, line in enumerate(text.splitlines(keepends=True), start=1) if n not in drop]
    return "".join(kept)


# -------------------------------------------------------------------- design
class Row(Frozen):
    condition: str
    removed: list[int] = Field(description="indices of the removed units")


class Plan(Frozen):
    """The conditions of one ablation and what they cost against one at a time."""

    design: Design
    units: int
    rows: list[Row]
    repeats: int = Field(description="runs per task and condition")
    tasks: int

    @property
    def runs(self) -> int:
        return len(self.rows) * self.repeats * self.tasks

    @property
    def per_side(self) -> int:
        """Runs per task behind each side (removed, kept) of a unit's effect."""
        if self.design is Design.single:
            return self.repeats
        return len(self.rows) * self.repeats // 2


def single_runs(units: int, repeats: int, tasks: int) -> int:
    """One at a time: the full file plus one condition per unit, `repeats` runs each."""
    return (units + 1) * repeats * tasks


def _odd_columns(n: int, size: int) -> list[int]:
    """`n` Hadamard columns of odd popcount: no two multiply into a chosen one (resolution IV)."""
    odd = [c for c in range(1, size) if bin(c).count("1") % 2 == 1]
    return sorted(odd, key=lambda c: (bin(c).count("1"), c))[:n]


def _negative(row: int, column: int) -> bool:
    """Whether Sylvester's Hadamard matrix (scipy.linalg.hadamard's) is -1 at (row, column):
    its entry is (-1) ** popcount(row & column), so no matrix needs building (nor scipy)."""
    return bin(row & column).count("1") % 2 == 1


def make_plan(units: int, repeats: int, tasks: int, design: Design) -> Plan:
    """The ablation's conditions: `head` (nothing removed) first."""
    if units < 1:
        raise ConfigError("the file has no section to remove", hint="pass --unit bullets, or another --file")
    if design is Design.single:
        rows = [Row(condition=HEAD, removed=[])]
        rows += [Row(condition=f"{ABLATE_PREFIX}{k + 1}", removed=[k]) for k in range(units)]
        return Plan(design=design, units=units, rows=rows, repeats=repeats, tasks=tasks)
    size = 1 << max(2, math.ceil(math.log2(2 * units)))
    columns = _odd_columns(units, size)
    rows = [
        Row(
            condition=HEAD if r == 0 else f"{ABLATE_PREFIX}{r}",
            removed=[k for k, c in enumerate(columns) if _negative(r, c)],
        )
        for r in range(size)
    ]
    replicates = max(1, math.ceil(2 * repeats / size))
    return Plan(design=design, units=units, rows=rows, repeats=replicates, tasks=tasks)


def overlays(
    base: Overlay, path: str, text: str, sections: Sequence[Section], plan: Plan
) -> dict[str, Overlay]:
    """One overlay per ablated row: the ref's instruction files with `path` cut down
    (deleted when nothing is left of it). `head` is the ref's own files."""
    out: dict[str, Overlay] = {}
    for row in plan.rows:
        if not row.removed:
            continue
        files = dict(base.files)
        cut = without(text, [sections[k] for k in row.removed])
        if cut.strip():
            files[path] = cut.encode()
        else:
            files.pop(path, None)
        out[row.condition] = Overlay(files=files, symlinks=dict(base.symlinks))
    return out


# ------------------------------------------------------------------ analysis
class Effect(Frozen):
    """removed - kept, with a seeded bootstrap interval (None when a side has no run)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    removed_runs: int = 0
    kept_runs: int = 0


class SectionReport(Frozen):
    section: Section
    score: Effect = Field(description="over tasks: the mean of per-task effects")
    tasks: dict[str, Effect]
    tokens: Effect
    cost_usd: Effect
    turns: Effect
    lowers: list[str] = Field(description="tasks whose score removing it lowers")
    raises: list[str] = Field(description="tasks whose score removing it raises")
    cut_candidate: bool = Field(
        description="moves no task, and its removal saves tokens (without token telemetry: it has text)"
    )


class AblationReport(Frozen):
    """ablation.json: the plan, the runs and each section's effects."""

    file: str
    ref: str
    unit: Unit
    plan: Plan
    runs_done: int
    single_runs: int = Field(
        description="runs one at a time needs for the same precision: as many runs per side of each effect"
    )
    band: float
    sections: list[SectionReport]


def _metric(run: RunResult, metric: str) -> float | None:
    m = run.outcome.metrics
    if metric == "tokens":
        return None if m.tokens_in is None or m.tokens_out is None else float(m.tokens_in + m.tokens_out)
    value = getattr(m, metric)
    return None if value is None else float(value)


def _effect(strata: Sequence[tuple[list[float], list[float]]], seed: int) -> Effect:
    usable = [(r, k) for r, k in strata if r and k]
    if not usable:
        return Effect(value=None)
    value = stats.stratified_delta(usable)
    interval = stats.bootstrap_interval(usable, seed=seed)
    return Effect(
        value=value,
        low=None if interval is None else interval[0],
        high=None if interval is None else interval[1],
        removed_runs=sum(len(r) for r, _ in usable),
        kept_runs=sum(len(k) for _, k in usable),
    )


def _moves(effect: Effect, band: float, sign: int) -> bool:
    """The interval is clear of zero on `sign`'s side and the effect is past the band."""
    if effect.value is None or effect.low is None or effect.high is None:
        return False
    if sign < 0:
        return effect.high < 0 and effect.value < -band
    return effect.low > 0 and effect.value > band


def analyse(
    sections: Sequence[Section],
    plan: Plan,
    results: Sequence[RunResult],
    *,
    band: float = DEFAULT_NOISE_BAND,
    seed: int = 0,
) -> list[SectionReport]:
    """Each unit's effects from the graded runs of the plan's conditions."""
    removed_by = {row.condition: set(row.removed) for row in plan.rows}
    # One at a time compares each removal with the full file; the factorial with every row keeping it.
    single = plan.design is Design.single
    graded = [
        r
        for r in results
        if r.status is not RunStatus.infra_error and r.score is not None and r.cell.condition in removed_by
    ]
    tasks = sorted({r.cell.task for r in graded})
    reports = []
    for k, section in enumerate(sections):

        def sides(metric: str, task: str, k: int = k) -> tuple[list[float], list[float]]:
            removed: list[float] = []
            kept: list[float] = []
            for r in graded:
                if r.cell.task != task:
                    continue
                value = r.score.value if metric == "score" and r.score else _metric(r, metric)
                dropped = removed_by[r.cell.condition]
                if value is None or (single and dropped and k not in dropped):
                    continue
                (removed if k in dropped else kept).append(value)
            return removed, kept

        per_task = {t: _effect([sides("score", t)], seed) for t in tasks}
        lowers = [t for t, e in per_task.items() if _moves(e, band, -1)]
        raises = [t for t, e in per_task.items() if _moves(e, band, 1)]
        tokens = _effect([sides("tokens", t) for t in tasks], seed)
        reports.append(
            SectionReport(
                section=section,
                score=_effect([sides("score", t) for t in tasks], seed),
                tasks=per_task,
                tokens=tokens,
                cost_usd=_effect([sides("cost_usd", t) for t in tasks], seed),
                turns=_effect([sides("turns", t) for t in tasks], seed),
                lowers=lowers,
                raises=raises,
                cut_candidate=not lowers and not raises and _costs(tokens, section),
            )
        )
    return reports


def _costs(tokens: Effect, section: Section) -> bool:
    """Removing it saves tokens; without token telemetry, its text is read on every run."""
    return tokens.value < 0 if tokens.value is not None else section.chars > 0


def _fmt(effect: Effect, digits: int = 2) -> str:
    if effect.value is None:
        return "—"
    if effect.low is None or effect.high is None:
        return f"{effect.value:+.{digits}f}"
    return f"{effect.value:+.{digits}f} [{effect.low:+.{digits}f}, {effect.high:+.{digits}f}]"


def render(report: AblationReport) -> str:
    """The ablation as markdown: the design's cost, then a row per section."""
    p = report.plan
    saved = 1 - report.runs_done / report.single_runs if report.single_runs else 0.0
    how = (
        f"fractional factorial: {len(p.rows)} conditions (each removes about half the sections)"
        if p.design is Design.factorial
        else f"one at a time: {len(p.rows)} conditions"
    )
    lines = [
        f"## docdelta ablation of `{report.file}` at {report.ref[:12]} ({report.unit.value} units)",
        "",
        f"{len(report.sections)} sections; {how} x {p.repeats} repeat(s) x {p.tasks} tasks = "
        f"{report.runs_done} runs; one at a time with the same precision ({p.per_side} runs per side "
        f"of each effect): {report.single_runs} runs "
        f"(saved {saved:.0%}).",
        "",
        "Effects are removed - kept, with 95% bootstrap intervals; a task moves when its "
        f"interval is clear of 0 and the effect is past the ±{report.band:g} band.",
        "",
        "| section | lines | chars | score | tokens | turns | cost $ | tasks it moves | |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for s in report.sections:
        moved = [f"{t} {_fmt(s.tasks[t])}" for t in [*s.lowers, *s.raises]]
        mark = "candidate to cut" if s.cut_candidate else ""
        lines.append(
            f"| {s.section.name} | {s.section.start}-{s.section.end} | {s.section.chars:,} | "
            f"{_fmt(s.score)} | {_fmt(s.tokens, 0)} | {_fmt(s.turns, 1)} | {_fmt(s.cost_usd, 4)} | "
            f"{'; '.join(moved) or '—'} | {mark} |"
        )
    lines += [
        "",
        "The design assumes effects add up (up to interactions of three or more sections); a rule "
        "stated in two sections shows as two smaller effects. A candidate to cut is needed by no task "
        "of this suite: it may still matter for work the tasks do not cover.",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------- run


@dataclass(frozen=True)
class AblationRequest:
    ref: str
    file: str
    tasks_dir: Path
    unit: Unit = Unit.heading
    design: Design = Design.factorial
    repeats: int = 4
    """Runs per side one at a time would give each effect; the factorial matches that precision."""
    seed: int = 0
    max_runs: int | None = MAX_RUNS_WITHOUT_CONFIRMATION
    file_named: str = "--file"
    """How the caller spelled `file` for an error about it: the CLI's flag, or the Action's input."""


def ablate(request: AblationRequest, options: RunOptions, deps: Deps) -> tuple[AblationReport, Evaluation]:
    """Split the file, plan the conditions, run them through the composition root, analyse."""
    repo = deps.repo
    sha = repo.resolve(request.ref)
    files = instruction_files(repo, sha, matcher(load_project_config(repo, sha)))
    data = files.files.get(request.file)
    if data is None:
        known = ", ".join(sorted(files.files)) or "none"
        where = sha[:12] if sha.startswith(request.ref) else f"{request.ref} ({sha[:12]})"
        raise ConfigError(
            f"{request.file_named} {request.file} is no instruction file at {where}",
            hint=f"pass one of the instruction files there: {known}",
        )
    text = data.decode("utf-8", "replace")
    sections = split(text, request.unit)
    tasks = len(load_tasks(request.tasks_dir))
    design = make_plan(len(sections), request.repeats, tasks, request.design)
    experiment = ExperimentRequest(
        base=sha,
        head=sha,
        tasks_dir=request.tasks_dir,
        conditions=[row.condition for row in design.rows],
        repeats=design.repeats,
        seed=request.seed,
        max_runs=request.max_runs,
        overlays=overlays(files, request.file, text, sections, design),
        require_change=False,
    )
    done = evaluate(experiment, options, deps)
    assert done is not None  # require_change=False: there is always something to run
    results = done.store.results(done.experiment.manifest.repo)
    report = AblationReport(
        file=request.file,
        ref=sha,
        unit=request.unit,
        plan=design,
        runs_done=len(results),
        single_runs=single_runs(len(sections), design.per_side, tasks),
        band=done.experiment.manifest.band,
        sections=analyse(sections, design, results, band=done.experiment.manifest.band, seed=request.seed),
    )
    (done.store.workdir / ABLATION_FILE).write_text(report.model_dump_json(indent=2) + "\n")
    return report, done
