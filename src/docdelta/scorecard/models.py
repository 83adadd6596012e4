"""The scorecard's vocabulary: the `Summary` every surface shows, its deltas, verdict and power."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field

from docdelta.instructions.models import ChangedFile, InstructionFlag, NearMiss
from docdelta.results.grades import GradingFailure
from docdelta.results.models import AgentInfo, RunResult
from docdelta.tasks.models import PassThreshold
from docdelta.vocabulary import SCHEMA_VERSION, Frozen

VerdictKind = Literal["improved", "regressed", "no_change", "inconclusive"]


class Certainty(StrEnum):
    """The one vocabulary of certainty every shown delta carries, read off the decision rule
    that set the verdict (`decision.decide`): a hypothesis it rejected is `significant`; a
    delta inside the configured noise band is `noise_band` (the rule never calls it a change,
    whatever its p); anything else is `not_significant`. So no mark can contradict the verdict."""

    significant = "significant"
    not_significant = "not significant"
    noise_band = "within noise band"


"""improved/regressed: significant and beyond the noise band; no_change: the whole
interval lies inside the band; inconclusive: the interval spans the band and an effect."""


GatePolicy = Literal["regression", "no-improvement", "never"]


class Quartiles(Frozen):
    """Min, quartiles and max of one metric over the graded runs of an arm."""

    low: float
    q1: float
    q3: float
    high: float


class ConditionStats(Frozen):
    """One arm (all runs of one condition), for one task or pooled over tasks.

    `runs` counts graded runs only; `infra_error` runs never lower a mean and are
    counted in `infra_errors` instead. `mean_score` is the mean of per-task means,
    so a task with more surviving runs does not weigh more in the pooled figure.
    """

    condition: str
    runs: int
    infra_errors: int = 0
    mean_score: float | None = None
    score_min: float | None = None
    score_max: float | None = None
    runs_at_1: int = 0
    median_tokens: float | None = Field(default=None, description="tokens in + out, runs that reported both")
    median_cost_usd: float | None = None
    total_cost_usd: float | None = None
    median_turns: float | None = None
    median_duration_s: float | None = None
    statuses: dict[str, int] = {}
    pass_rate: float | None = Field(default=None, description="share of graded runs at 1.0")
    pass_all: float | None = Field(
        default=None, description="pass^k with k = runs: 1.0 when every repeat passed, else 0.0"
    )
    spreads: dict[str, Quartiles] = Field(
        default={}, description="metric (tokens, cost_usd, turns, duration_s) -> quartiles"
    )


class Delta(Frozen):
    """treatment - control of mean scores; None when either arm has no graded run."""

    treatment: str
    control: str
    value: float | None = None
    noise: bool | None = Field(default=None, description="True when |value| <= the noise band")
    p_value: float | None = Field(
        default=None,
        description="per task: the Holm-adjusted sequential p the task's decision (head vs base, or "
        "head vs none) used, in the direction of the delta; Fisher's exact test on passes without one",
    )
    flip: bool | None = Field(
        default=None,
        description="per task: the pass/fail majority differs between the arms and (head vs base) the "
        "task's change is significant, so a flip is never noise sold as a finding",
    )
    aa_noise: bool | None = Field(
        default=None,
        description="head vs base: True when |value| <= the A/A noise band (a task's own band per task, "
        "the stratified band overall); words only, the verdict never reads it",
    )
    certainty: Certainty | None = Field(
        default=None,
        description="the mark the decision rule gives this delta (None without a decision, e.g. refused)",
    )


class JudgedTally(Frozen):
    """The judge's rulings on one task's arm: key points made and rules respected, of all ruled."""

    hits: int
    rulings: int = Field(ge=1)
    runs: int = Field(description="graded runs that carry at least one ruling")


class ArmPass(Frozen):
    """One arm of one task against the task's pass threshold."""

    passes: int
    runs: int
    value: float | None = Field(description="pass^k (k = 1: the pass rate); None with fewer than k runs")
    met: bool | None = Field(description="value >= the threshold's fraction; None when there is no value")


class ThresholdSummary(Frozen):
    """A task's pass threshold per arm, and whether it fails the check: the head arm missed it
    and the base arm did not (a miss base already had is not this PR's doing)."""

    threshold: PassThreshold
    arms: dict[str, ArmPass]
    blocks: bool


class TaskSummary(Frozen):
    task: str
    conditions: dict[str, ConditionStats]
    head_vs_base: Delta
    head_vs_none: Delta
    judged: dict[str, JudgedTally] = Field(
        default={}, description="condition -> the judge's hits; empty when no run of the task was judged"
    )
    decision: TaskDecisionSummary | None = Field(
        default=None, description="head vs base: this task's call; None when an arm has no graded run"
    )
    threshold: ThresholdSummary | None = Field(default=None, description="when the task has a pass threshold")


class AANoise(Frozen):
    """What identical docs produce at this experiment's size: the band |head - base| stays
    within in `quantile` of simulated A/A experiments drawn from the observed per-task scores."""

    band: float
    quantile: float
    simulations: int
    tasks: int
    repeats: int


class MissedItem(Frozen):
    """A gold item the agent missed, counted over the graded runs of one condition."""

    task: str
    kind: str
    expected: str
    count: int
    runs: int
    note: str = ""


class Confounds(Frozen):
    isolation: dict[str, int] = Field(default={}, description="isolation value -> runs")
    weak_isolation: list[str] = Field(default=[], description="isolation values seen that are not full")

    def isolation_confound(self) -> bool:
        """Some runs were not fully isolated, or runs were isolated differently: full and
        uniform isolation is the normal case, which the header states and Confounds omits."""
        return bool(self.weak_isolation) or len(self.isolation) > 1

    near_misses: list[NearMiss] = []
    unscored_points: int = Field(default=0, description="distinct (task, key point) pairs left to the judge")
    missing_conditions: list[str] = []
    missing_runs: int = Field(default=0, description="planned cells with no result at all")
    instruction_flags: list[InstructionFlag] = Field(
        default=[], description="the injected-instruction audit's findings, per condition and file"
    )
    unread_changes: list[str] = Field(
        default=[],
        description="changed instruction files the agent under test does not read natively "
        "(e.g. AGENTS.md for Claude Code): their edit cannot change its behaviour",
    )
    code_changes: int = Field(
        default=0,
        description="files other than instruction files changed between base and head: every "
        "condition runs on the source commit's code, so the other side's docs meet code they were "
        "not written for",
    )
    source: Literal["base", "head", "other"] = Field(default="head", description="which commit's code ran")
    task_sources: dict[str, str] = Field(
        default={}, description="task id -> the commit whose code its runs got instead (its own source)"
    )
    unguarded: list[str] = Field(
        default=[],
        description="change tasks whose hidden tests passed in a run graded without docdelta's pytest "
        "guard: only the runner's own report says they passed",
    )
    skipped: dict[str, str] = Field(
        default={}, description="task id -> the gold quote that stands in no condition (the task was not run)"
    )


class ArmUse(Frozen):
    """How many graded runs of one arm used a reference (ran, read or named it)."""

    used: int
    runs: int


class ChangedLine(Frozen):
    """One added or removed line of the docs diff (head vs base instruction files)."""

    file: str
    line: int = Field(ge=1, description="line number in the head file (added) or the base file (removed)")
    change: Literal["added", "removed"]
    text: str = Field(description="the changed line, stripped")


class InstructionRef(Frozen):
    """A command or path named by added or removed lines of the docs diff, and per arm how
    many runs used it: did the edit change behaviour? One per reference, with every line
    that names it: a run's use of it is one fact, however many lines say it, so it is one
    row and one test (counted once in the Holm correction over the references)."""

    kind: Literal["command", "path"]
    ref: str = Field(description="the command or path as the lines name it")
    lines: list[ChangedLine] = Field(
        min_length=1, description="the changed lines that name it, in diff order"
    )
    arms: dict[str, ArmUse] = Field(default={}, description="condition -> runs that used it")
    p_value: float | None = Field(default=None, description="Fisher exact test of using runs, head vs base")


class TriggerArm(Frozen):
    """One arm's runs of the trigger tasks of one file and expectation: how many loaded it."""

    loaded: int
    runs: int = Field(description="graded runs with evidence of whether the file was loaded")
    no_evidence: int = Field(default=0, description="runs no gateway or parsed tool call could speak for")

    @property
    def rate(self) -> float | None:
        return self.loaded / self.runs if self.runs else None


class TriggerRate(Frozen):
    """Was an on-demand file picked up when it should be (`should_load`), or when it should not
    (near misses), per arm, and how head's rate differs from base's, with the statistics of
    scores: the mean over tasks of the per-task difference, its stratified bootstrap interval,
    and a Fisher exact test of the pooled counts."""

    file: str
    should_load: bool
    tasks: int = Field(description="trigger tasks (prompts) behind the rates, holdout tasks included")
    arms: dict[str, TriggerArm] = Field(description="condition -> loaded runs of its graded runs")
    delta: float | None = Field(default=None, description="head - base trigger rate, mean over tasks")
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float = Field(default=0.95, description="of the interval")
    p_value: float | None = Field(default=None, description="Fisher exact test of loaded runs, head vs base")


class PoolBatch(Frozen):
    """One complete base arm of an earlier PR, as its pool lists it."""

    digest: str = Field(description="the cached arm entry (cache.ArmKey digest)")
    source_commit: str
    finished_at: datetime
    runs: int


class PoolDrift(Frozen):
    """The batch that ended a pool: its scores differ from the newer pooled runs."""

    batch: PoolBatch
    p_value: float
    delta: float = Field(description="stratified mean score, that batch minus the newer runs")
    alpha: float


class PooledControl(Frozen):
    """Earlier runs of the base arm used as extra control runs (`pooled.json` in the workdir)."""

    condition: str
    batches: list[PoolBatch]
    results: list[RunResult]
    drift: PoolDrift | None = None


class PoolSummary(Frozen):
    """What the comment says about the pooled base runs: how many, from which batches, and the
    drift that ended the pool (if one did)."""

    runs: int
    batches: list[PoolBatch]
    since: datetime
    drift: PoolDrift | None = None
    only: bool = False
    """The plan ran no base arm of its own: the pooled runs are the whole control."""


class ArmComparison(Frozen):
    """One arm against the arm or condition it is compared with (`vs`): per task and over
    tasks, with a stratified permutation test, and the factors in which the two differ."""

    arm: str
    vs: str
    differs_in: list[str] = Field(description="the ARM_FACTORS in which the two columns differ")
    described: dict[str, str] = Field(
        default={}, description="both columns -> what runs them: agent, model, condition and overlay"
    )
    tasks: dict[str, Delta] = Field(description="task -> arm - vs of mean scores (holdout tasks left out)")
    overall: Delta
    arm_runs: int
    vs_runs: int
    warning: str | None = Field(
        default=None, description="set when the two differ in more than one factor: no single cause"
    )


class Summary(Frozen):
    """The scorecard's numbers; rendered as markdown, JSON, a badge and (later) a PR comment."""

    schema_version: int = SCHEMA_VERSION
    repo: str
    base_sha: str
    head_sha: str
    source_sha: str
    agent: AgentInfo
    repeats: int
    noise_band: float
    conditions: list[str]
    changed: list[ChangedFile]
    tasks: list[TaskSummary] = Field(description="per task; holdout tasks are left out")
    holdout_tasks: int = Field(default=0, description="tasks counted in the aggregates but not shown")
    unreviewed: list[str] = Field(
        default=[], description="shown tasks whose gold is `reviewed: false`: the verdict rests on it"
    )
    unreviewed_holdout: int = Field(default=0, description="holdout tasks with unreviewed gold (not named)")
    overall: dict[str, ConditionStats]
    head_vs_base: Delta
    head_vs_none: Delta
    missed: dict[str, list[MissedItem]] = Field(description="condition -> most-missed items, most first")
    confounds: Confounds
    alpha: float = 0.05
    verdict: VerdictSummary | None = Field(default=None, description="head vs base")
    verdict_vs_none: VerdictSummary | None = Field(default=None, description="head vs none")
    power: PowerSummary | None = None
    pooled: PoolSummary | None = Field(
        default=None, description="earlier base runs pooled into the head-vs-base control"
    )
    usage: list[ShiftSummary] = Field(default=[], description="tokens and cost, head vs base")
    infra_error_rate: float | None = Field(default=None, description="infra_error runs / all runs")
    unmeasured: list[str] = Field(
        default=[],
        description="tasks whose runs had no scored item (key points only, no judge): no score, "
        "left out of every statistic",
    )
    verdict_refused: str | None = Field(
        default=None, description="why no verdict is given although arms have runs (too many infra errors)"
    )
    faults: dict[str, int] = Field(
        default={}, description="runs per status that is the harness's or agent command's failure"
    )
    broken: str | None = Field(
        default=None,
        description="set when so many runs are faults that the evaluation measured the failure; "
        "the scorecard leads with it and there is no verdict",
    )
    saturated: str | None = Field(
        default=None,
        description="set when every task scored 0 in every run of every condition (or 1, none "
        "included): no score could move, so the scorecard leads with it and there is no verdict",
    )
    decided_on_base: str | None = Field(
        default=None,
        description="set when the evaluation on the PR's own code (`source: head`) gave no verdict, "
        "the PR changes other files than instruction files, and this verdict is on base's code "
        "instead: why the PR's code gave none",
    )
    instruction_usage: list[InstructionRef] = Field(
        default=[], description="commands and paths named by changed instruction lines, and who used them"
    )
    grading_failures: list[GradingFailure] = Field(
        default=[], description="hidden-test gradings (selftest legs or runs) in which no test ran"
    )
    aa_noise: AANoise | None = Field(
        default=None, description="the A/A-derived noise band of head vs base; informative, not the verdict's"
    )
    arms: list[ArmComparison] = Field(
        default=[], description="each declared arm against the column it is compared with"
    )
    threshold_failures: list[str] = Field(
        default=[], description="shown tasks whose head arm missed its pass threshold where base met it"
    )
    triggers: list[TriggerRate] = Field(
        default=[], description="trigger tasks: per file, picked up when it should and when it should not"
    )

    @property
    def unreviewed_note(self) -> str:
        """What the scorecard's header and verdict line (and so the check summary, which is the
        comment) add when tasks ran with unreviewed gold (`--allow-unreviewed`): a verdict
        partly measured against drafts nobody checked. Holdout tasks are counted, never
        named. Empty when every task was reviewed."""
        count = len(self.unreviewed) + self.unreviewed_holdout
        if not count:
            return ""
        held = self.unreviewed_holdout
        named = [*self.unreviewed, *([f"{held} holdout task{'s' * (held != 1)}"] if held else [])]
        return f"the suite included {count} unreviewed task{'s' * (count != 1)} ({', '.join(named)})"


class VerdictSummary(Frozen):
    """The call on treatment vs control (`docdelta.scorecard.decision`), with the numbers that justify it."""

    treatment: str
    control: str
    kind: VerdictKind
    subject: str = Field(
        default="overall",
        description="the hypothesis estimate, interval and p belong to: a task id or 'overall'",
    )
    estimate: float = Field(description="the subject's raw mean-score difference (overall: mean over tasks)")
    ci_low: float | None = Field(
        description="the subject's interval: contains the estimate, excludes 0 exactly when p <= alpha; "
        "None when an arm is too small"
    )
    ci_high: float | None
    confidence: float | None
    p_value: float | None = Field(
        description="the subject's own p: Holm-adjusted sequential p (a change, inconclusive), TOST p "
        "(no change); None where no test can reject"
    )
    threshold: float = Field(description="what p_value was compared with (alpha)")
    decided_by: list[str] = Field(default=[], description="task ids and/or 'overall' that decided")
    exact: bool = Field(description="True when every permutation test enumerated every arrangement")
    alpha: float
    band: float
    tasks: int
    design: str = Field(description="fixed N repeats, or auto with its looks")
    rounds: int = Field(description="repeats per arm the longest task ran")
    repeats_needed: int | None = Field(
        default=None, description="inconclusive: repeats per arm at which this spread would show no change"
    )
    reason: str


class TaskDecisionSummary(Frozen):
    """One task's own call, within the Holm family of all tasks and the overall mean."""

    kind: VerdictKind
    p_regressed: float = Field(description="Holm-adjusted sequential mid-p of head worse than base")
    p_improved: float
    rounds: int = Field(description="repeats per arm this task ran (adaptive designs stop tasks early)")
    treatment_runs: int
    control_runs: int = Field(description="including pooled runs of earlier batches")
    ci_low: float | None = None
    ci_high: float | None = None


class PowerSummary(Frozen):
    """What the design can see, from the power simulation the run cached (`power.json`)."""

    tasks: int
    design: str
    drop: float | None = Field(
        description="smallest drop of one task's success rate (from `rate`) caught in `target` of "
        "simulated PRs; None when even the largest simulated drop is missed more often"
    )
    rate: float
    target: float
    largest: float = Field(description="the largest drop simulated (what `drop` None was missed at)")
    text: str = Field(description="the same, in words, as printed before the first run")


class ShiftSummary(Frozen):
    """A usage metric compared with a rank test; shift = Hodges-Lehmann, treatment - control."""

    metric: str
    treatment: str
    control: str
    shift: float
    p_value: float
    n_treatment: int
    n_control: int


class SuiteRepoState(StrEnum):
    """How one repository of `docdelta run --repos` ended."""

    evaluated = "evaluated"
    """It has a verdict, and its tasks are part of the pooled one."""
    no_change = "no_change"
    """No instruction file differs between its base and head: nothing ran."""
    no_verdict = "no_verdict"
    """Its evaluation is broken or refused (`Summary.verdict_refused`): left out of the pool."""


class SuiteRepoSummary(Frozen):
    """One repository's row in the suite's summary: its own scorecard is in its workdir."""

    name: str
    workdir: str
    state: SuiteRepoState
    verdict: VerdictKind | None = None
    head_vs_base: float | None = Field(default=None, description="mean over its tasks of head - base")
    tasks: int = 0
    why: str | None = Field(default=None, description="no_verdict: the summary's reason")


class SuiteSummary(Frozen):
    """`docdelta run --repos`: each repository's verdict and the pooled one (`suite.json`)."""

    repos: list[SuiteRepoSummary]
    pooled: VerdictSummary | None = Field(
        description="head vs base over every task of every evaluated repository as one family "
        "(`summarize.pooled_verdict`); None when no repository has a verdict"
    )
    band: float = Field(description="the pooled verdict's noise band: the widest of the pooled repositories'")
