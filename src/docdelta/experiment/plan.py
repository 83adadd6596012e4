"""Planning a matrix: from the user's request to a sealed, recorded `Experiment`.

`prepare` resolves two refs, detects the changed instruction files, loads and checks the
tasks, seals one checkout per condition and writes the manifest with its seeded
interleaved order (`plan_order`). It is kept apart from the cell loop (`docdelta.experiment.runner`)
because everything here is fixed before the first cell starts: a resumed or sharded
matrix must find the same plan, and `_check_same_experiment` refuses a workdir that holds
another one.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from docdelta import __version__
from docdelta.agents.base import Agent
from docdelta.checkout import envs
from docdelta.checkout.seal import SealedCheckout, build_overlays, seal_conditions
from docdelta.config import ArmSpec, ProjectConfig, matcher
from docdelta.errors import ConfigError, TaskError
from docdelta.experiment.arms import Arm, agent_info
from docdelta.git import Repo
from docdelta.grading.hidden import ChangeAssets, load_assets
from docdelta.instructions.audit import AuditIndex, build_index
from docdelta.instructions.detect import InstructionMatcher, Overlay, detect_refs
from docdelta.instructions.models import Detection
from docdelta.results.models import Cell, Manifest, RunBounds
from docdelta.results.store import ResultStore, checkout_dir
from docdelta.scorecard import thresholds
from docdelta.scorecard.models import PooledControl
from docdelta.tasks.load import LoadedTask, check_citations, load_tasks, require_reviewed, select_tasks
from docdelta.tasks.models import PassThreshold
from docdelta.validate import AUTO, MAX_RUNS_WITHOUT_CONFIRMATION, unique_conditions
from docdelta.vocabulary import BASE, DEFAULT_CONDITIONS, HEAD, ConditionSpec, sha256_hex


@dataclass(frozen=True)
class Experiment:
    """Everything a run of the matrix needs, fixed before the first cell starts."""

    repo_name: str
    manifest: Manifest
    detection: Detection
    tasks: dict[str, LoadedTask]
    checkouts: dict[str, SealedCheckout]
    assets: dict[str, ChangeAssets] = field(default_factory=dict)
    """Change tasks' hidden tests and reference, read from trusted copies at prepare time."""
    task_checkouts: dict[str, dict[str, SealedCheckout]] = field(default_factory=dict)
    """Change tasks that name their own source commit: condition -> a checkout of that commit."""
    pooled: PooledControl | None = None
    """Earlier batches of the base arm from the results store, pooled into the control."""

    def checkout(self, task_id: str, condition: str) -> SealedCheckout:
        """The sealed checkout a cell runs on: its task's own source commit, else the
        experiment's. A task drafted from a past commit starts from that commit's parent,
        where its hidden tests fail and its reference applies; head's code has the fix."""
        return self.task_checkouts.get(task_id, self.checkouts)[condition]

    @cached_property
    def audit_index(self) -> AuditIndex:
        """Fingerprints of every condition's instruction files, for the gateway's audit."""
        paths = {name: c.path for name, c in self.checkouts.items()}
        targets = [lt.task.trigger.file for lt in self.tasks.values() if lt.task.trigger is not None]
        return build_index(self.manifest.conditions, paths, self.detection, targets)


@dataclass(frozen=True)
class ExperimentRequest:
    """What the user asked for; `prepare` resolves it against the repository."""

    base: str
    head: str
    tasks_dir: Path
    conditions: Sequence[str] = DEFAULT_CONDITIONS
    repeats: int = 3
    adaptive: bool = False
    """--repeats auto: `repeats` is the cap; `docdelta.experiment.rounds` runs the plan round by round."""
    noise_band: float | None = None
    """The band the run is planned with, recorded in the manifest (None: the default)."""
    seed: int = 0
    source: str = HEAD
    patch: Path | None = None
    allow_unreviewed: bool = False
    max_runs: int | None = MAX_RUNS_WITHOUT_CONFIRMATION
    """Refuse a plan of more runs than this (None: no bound; the CLI's --yes)."""
    overlays: Mapping[str, Overlay] = field(default_factory=dict)
    """Conditions built by the caller (an ablation's variants), by name; each named in `conditions`."""
    arms: Sequence[ArmSpec] = ()
    """Arms declared on the command line (`--arms`; an overlay is a host directory)."""
    config_arms: bool = False
    """Without `arms`, add `.docdelta.yml`'s (`docdelta run`, the Action's PRs; not an ablation)."""
    require_change: bool = True
    """False: evaluate even when base and head hold the same instruction files (ablation)."""
    skip_base_from: int | None = None
    """Plan no base runs when the results store pools at least this many earlier base runs of
    every task (None: always run the base arm)."""
    pass_threshold: PassThreshold | None = None
    """The bar of tasks that set no `pass_threshold` of their own (`docdelta.scorecard.thresholds`)."""
    only_tasks: Sequence[str] = ()
    """Run only these task ids (`--task`, while iterating); empty: every task."""
    refresh: bool = False
    """The base arm alone, stored for later PRs (the Action on a push to the default branch):
    a gold quote may stand only in the head such a PR brings, so citations are checked by each
    PR's evaluation over all its conditions, not here."""


def planned_repeats(repeats: int | str, max_repeats: int) -> tuple[int, bool]:
    """A `repeats` setting (a number or `auto`) as a request takes it: (`repeats`, `adaptive`).
    `auto` plans up to `max_repeats` and runs round by round until each task is decided."""
    if repeats == AUTO:
        return max_repeats, True
    return int(repeats), False


def plan_size(tasks: int, columns: int, repeats: int) -> int:
    """The runs of a plan: every task in every column (condition or arm), `repeats` times.
    `docdelta plan` and the Action's plan job size the job matrix with it, and a sharded run
    runs exactly that many (it keeps a base arm the pool could stand in for)."""
    return tasks * columns * repeats


def plan_cost(planned: int, *, timeout_s: float, reserve_usd: float) -> str:
    """What a plan may cost and take, where the options bound it: the reserve is each run's
    spend limit, the timeout each run's longest wall-clock time (runs go one at a time)."""
    hours = f"take up to {planned * timeout_s / 3600:,.1f} hours (--timeout {timeout_s:g}s per run)"
    if reserve_usd > 0:
        return f"it may cost up to ${planned * reserve_usd:,.2f} (--reserve-usd per run) and {hours}; "
    return f"it may {hours}; "


class PlanTooLarge(ConfigError):
    """The plan has more runs than the request allows without confirmation."""

    def __init__(self, planned: int, tasks: int, conditions: int, repeats: int, bound: int) -> None:
        super().__init__(
            f"the plan is {planned:,} runs ({tasks} task{'s' if tasks != 1 else ''} x {conditions} "
            f"conditions x {repeats:,} repeats), more than the {bound:,} that run without confirmation",
            hint="check --repeats and --conditions, or pass --yes to run it",
        )
        self.planned = planned


def plan_order(task_ids: Sequence[str], conditions: Sequence[str], repeats: int, seed: int) -> list[Cell]:
    """Interleave conditions: every repeat round holds each (task, condition) once, shuffled
    by a seeded RNG, so drift over time (rate limits, provider load) hits all arms alike."""
    rng = random.Random(seed)
    order: list[Cell] = []
    for repeat in range(1, repeats + 1):
        block = [Cell(task=t, condition=c, repeat=repeat) for t in task_ids for c in conditions]
        rng.shuffle(block)
        order.extend(block)
    return order


def cell_seed(seed: int, cell: Cell) -> int:
    """Derived from (seed, task, repeat) but NOT the condition: the same random draw
    serves every arm of a repeat (common random numbers), so only the docs differ."""
    digest = sha256_hex(f"{seed}/{cell.task}/{cell.repeat}".encode())
    return int(digest[:12], 16)


def prepare(
    repo: Repo,
    request: ExperimentRequest,
    *,
    config: ProjectConfig,
    store: ResultStore,
    agent: Agent,
    sandbox: str,
    image_digest: str | None = None,
    server: Mapping[str, str] | None = None,
    bounds: RunBounds | None = None,
    control: Callable[[Experiment], PooledControl | None] | None = None,
    arms: Sequence[Arm] = (),
) -> Experiment | None:
    """Resolve refs, detect, load and check tasks, seal one checkout per condition and
    write the manifest. Returns None when no instruction file changed. Each of `arms` is
    one more column after the conditions (`docdelta.experiment.arms`).

    `config` must come from the trusted base ref (`load_project_config(repo, base)`):
    the PR head, maybe a fork, must not steer its own evaluation. `control` finds the earlier
    base batches to pool (`cache.pool`); with enough of them (`ExperimentRequest.skip_base_from`)
    the plan leaves the base arm out (`skip_pooled_arm`)."""
    if request.repeats < 1:
        raise ConfigError("--repeats must be at least 1", hint="use --repeats 3 or more for statistics")
    try:
        unique_conditions(request.conditions)
    except ValueError as exc:
        raise ConfigError(str(exc), hint="e.g. --conditions base,head,none") from None
    base_sha, head_sha = repo.resolve(request.base), repo.resolve(request.head)
    source_sha = {HEAD: head_sha, BASE: base_sha}.get(request.source) or repo.resolve(request.source)
    match = matcher(config)
    detection = detect_refs(repo, base_sha, head_sha, match)
    if detection.empty and request.require_change:
        return None

    loaded = select_tasks(load_tasks(request.tasks_dir), request.only_tasks, request.tasks_dir)
    columns = [*request.conditions, *(a.spec.name for a in arms)]
    planned = plan_size(len(loaded), len(columns), request.repeats)
    if request.max_runs is not None and planned > request.max_runs:
        raise PlanTooLarge(planned, len(loaded), len(columns), request.repeats, request.max_runs)
    require_reviewed(loaded, request.allow_unreviewed)

    task_sources = own_sources(repo, loaded, source_sha)
    assets = {
        lt.task.id: load_assets(lt.task, lt.path, repo, task_sources.get(lt.task.id, source_sha))
        for lt in loaded
        if lt.task.kind == "change"
    }
    hidden_paths = sorted({f"/{path}" for a in assets.values() for path in a.hidden})
    overlays = build_overlays(
        repo, base_sha, head_sha, request.conditions, match, request.patch, request.overlays
    )
    if arms:
        built_on = sorted({a.spec.condition for a in arms})
        below = build_overlays(repo, base_sha, head_sha, built_on, match, request.patch, request.overlays)
        overlays.update({a.spec.name: a.on(below[a.spec.condition]) for a in arms})
    # Hidden tests that live in the source commit never reach the agent's checkout.
    arm_dirs = [glob for a in arms for glob in a.strip]
    strip = [*config.checkout_strip, *strip_inside(repo.root, request.tasks_dir), *hidden_paths, *arm_dirs]
    # The workspace is installed for a commit only if some task runs on it (minutes each).
    runs_here = any(lt.task.id not in task_sources for lt in loaded)
    env_links = envs.links(envs.install(repo, source_sha, config.sandbox)) if runs_here else {}
    seal = partial(_seal, repo, store, overlays, match, strip)
    checkouts = seal(source_sha, env_links, own=False)
    skipped = (
        {}
        if request.refresh
        else check_citations(loaded, {n: c.path for n, c in checkouts.items()}, source_sha)
    )
    loaded = [lt for lt in loaded if lt.task.id not in skipped]
    assets = {tid: a for tid, a in assets.items() if tid not in skipped}
    task_sources = {tid: sha for tid, sha in task_sources.items() if tid not in skipped}
    by_source: dict[str, dict[str, SealedCheckout]] = {}
    for sha in sorted(set(task_sources.values())):
        by_source[sha] = seal(sha, envs.links(envs.install(repo, sha, config.sandbox)), own=True)

    tasks = {lt.task.id: lt for lt in loaded}
    conditions = [overlays[name].spec(name) for name in columns]
    check_triggers(loaded, conditions)
    manifest = Manifest(
        repo=repo.name,
        base_sha=base_sha,
        head_sha=head_sha,
        source_sha=source_sha,
        source_tree_sha256=next(iter(checkouts.values())).source_sha256,
        conditions=conditions,
        tasks={tid: lt.sha256 for tid, lt in sorted(tasks.items())},
        task_sources=dict(sorted(task_sources.items())),
        agent=agent_info(agent, server),
        agent_command=agent.command_line,
        sandbox=sandbox,
        image_digest=image_digest,
        seed=request.seed,
        repeats=request.repeats,
        adaptive=request.adaptive,
        bounds=bounds,
        noise_band=request.noise_band,
        docdelta_version=__version__,
        order=plan_order(sorted(tasks), columns, request.repeats, request.seed),
        holdout=sorted(tid for tid, lt in tasks.items() if lt.task.holdout),
        unreviewed=sorted(tid for tid, lt in tasks.items() if not lt.task.reviewed),
        skipped=dict(sorted(skipped.items())),
        arms={a.spec.name: a.record() for a in arms},
        thresholds=thresholds.effective({t: lt.task for t, lt in tasks.items()}, request.pass_threshold),
        created_at=datetime.now(UTC),
    )
    task_checkouts = {tid: by_source[sha] for tid, sha in task_sources.items()}
    exp = Experiment(repo.name, manifest, detection, tasks, checkouts, assets, task_checkouts)
    exp = skip_pooled_arm(exp, control, request.skip_base_from)
    _check_same_experiment(store, exp.manifest)
    store.write_manifest(exp.manifest)
    store.write_detection(detection)
    return exp


def check_triggers(loaded: Sequence[LoadedTask], conditions: Sequence[ConditionSpec]) -> None:
    """Refuse a trigger task whose file is no instruction file of any condition: nothing could
    load it, so every run would grade the same and say nothing about a description."""
    held = {path for spec in conditions for path in spec.files}
    for lt in loaded:
        trigger = lt.task.trigger
        if trigger is not None and trigger.file not in held:
            raise TaskError(
                f"{lt.path}: trigger.file {trigger.file!r} is no instruction file of any condition "
                f"({', '.join(s.name for s in conditions)})",
                hint="name a skill, slash command, subagent or rule file that exists at base or head, "
                "e.g. .claude/skills/<name>/SKILL.md (`docdelta detect` lists them)",
            )


def _seal(
    repo: Repo,
    store: ResultStore,
    overlays: Mapping[str, Overlay],
    match: InstructionMatcher,
    strip: Sequence[str],
    sha: str,
    env_links: Mapping[str, str],
    *,
    own: bool,
) -> dict[str, SealedCheckout]:
    """One sealed checkout per condition of source commit `sha` (the conditions share its
    stripped source, sealed once). `own`: a task's own source commit, whose checkouts are
    named by it too."""
    named_by = sha if own else None
    dests = {name: checkout_dir(store.workdir, o.sha256, named_by) for name, o in overlays.items()}
    made = seal_conditions(repo, sha, {dests[n]: o for n, o in overlays.items()}, match, strip, env_links)
    return {name: made[dest] for name, dest in dests.items()}


def skip_pooled_arm(
    exp: Experiment, control: Callable[[Experiment], PooledControl | None] | None, at_least: int | None
) -> Experiment:
    """The experiment with the pool `control` finds, and without base cells when that pool
    holds at least `at_least` earlier base runs of every task (no drift: `cache.pool` stops at
    the first drifted batch): the PR pays for its head arm only. Recorded in the manifest
    (`pooled_only`), so a resume finds the same plan."""
    if control is None:
        return exp
    exp = replace(exp, pooled=control(exp))
    m = exp.manifest
    if at_least is None or exp.pooled is None or BASE not in {c.name for c in m.conditions}:
        return exp
    runs = Counter(r.cell.task for r in exp.pooled.results if r.score is not None)
    if any(runs[t] < at_least for t in m.tasks):
        return exp
    order = [c for c in m.order if c.condition != BASE]
    return replace(exp, manifest=m.model_copy(update={"order": order, "pooled_only": [BASE]}))


def own_sources(repo: Repo, loaded: Sequence[LoadedTask], source_sha: str) -> dict[str, str]:
    """Change task id -> the commit it names as its own source (`gold.validation.source`),
    resolved, when that is not the experiment's source. Such a task carries tests written
    for that commit; on any other code they may pass before the agent starts, or the
    reference may not apply."""
    sources: dict[str, str] = {}
    for lt in loaded:
        validation = lt.task.gold.validation
        if lt.task.kind != "change" or validation is None or validation.source is None:
            continue
        try:
            sha = repo.resolve(validation.source)
        except ConfigError:
            raise TaskError(
                f"task {lt.task.id!r} ({lt.path}): gold.validation.source {validation.source!r} is not "
                f"a commit of {repo.root}",
                hint="fetch the history that holds it (actions/checkout with fetch-depth: 0), or fix "
                "the field",
            ) from None
        if sha != source_sha:
            sources[lt.task.id] = sha
    return sources


def strip_inside(root: Path, directory: Path) -> list[str]:
    """A --tasks directory inside the repository holds gold answers: strip it too."""
    try:
        rel = directory.resolve().relative_to(root.resolve())
    except ValueError:
        return []
    return [f"/{rel.as_posix()}/**"] if rel.parts else []


def _check_same_experiment(store: ResultStore, manifest: Manifest) -> None:
    """Resuming into a workdir that holds another experiment would mix incomparable runs. One
    that holds no result of it (a run refused after planning: a missing agent script, a
    failed selftest; or stopped before its first run ended) has nothing to mix, and is
    planned anew. A different agent command is named by its command lines, not the hashes
    that are its version."""
    previous = store.read_manifest()
    if previous is None or previous.identity() == manifest.identity() or not store.results(previous.repo):
        return
    old, new = previous.comparable(), manifest.comparable()
    found = differences(old, new)
    commands = previous.agent_command, manifest.agent_command
    if None not in commands and commands[0] != commands[1]:
        found = [f"agent command: {commands[0]!r} -> {commands[1]!r}"] + [
            d for d in found if not d.startswith("agent.version")
        ]
    raise ConfigError(
        f"workdir {store.workdir} holds a different experiment (differs in: {', '.join(found)})",
        hint="use a new --workdir, or delete the old one to start over",
    )


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Each field that differs, by dotted path, with both values when they are short
    (`bounds.timeout_s: 600.0 -> 300.0`), so a refused resume says what changed."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(old.keys() | new.keys(), key=str)
        return [d for k in keys for d in differences(old.get(k), new.get(k), f"{where}.{k}" if where else k)]
    if old == new:
        return []
    shown = f"{old!r} -> {new!r}"
    return [f"{where}: {shown}" if len(shown) <= 80 else where]
