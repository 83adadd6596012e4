"""External-controller mode: `docdelta prepare` writes trials for an agent docdelta does not
drive (an IDE agent, a hosted agent); `docdelta check TRIAL` grades one afterwards.

`prepare` plans the experiment exactly as `docdelta run` does (same manifest, seeded order,
sealed checkouts, citation checks) and writes one directory per cell under
`<workdir>/trials/<id>/`: `prompt.md`, a private copy of the condition's sealed checkout
(`checkout/`) and `trial.json` saying where the controller writes what it observed
(`answer.txt`: the agent's final text, ending with the answer JSON; `status.json`: status,
exit code, seconds). The id is a hash: nothing in a trial names its task's gold or its
condition, so the controller is as blind as a sandboxed run. The mapping of ids to cells,
the manifest and the tasks with their gold stay outside every trial directory.

`check` reads the two files, grades the answer against the gold in `--tasks` (checked
against the manifest's hash of each task file) and the trusted sealed checkout (never the
trial's copy, which the agent may have edited), and saves an ordinary `RunResult`, so
`docdelta report` and every statistic treat it like any run. Its isolation is recorded as
`external`: the scorecard lists it as a confound. Change tasks (hidden tests on the
agent's edits) and tasks whose proposed commands are run (gold.execute) are not supported
here yet and are refused at `prepare`.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import BaseModel, Field, ValidationError

from docdelta.agents.base import Agent, AgentContext, Invocation, parse_answer
from docdelta.agents.models import AgentMetrics, AgentOutcome, RunStatus
from docdelta.agents.prompt import build_prompt
from docdelta.config import load_project_config
from docdelta.errors import ConfigError
from docdelta.experiment.plan import ExperimentRequest, cell_seed, prepare
from docdelta.experiment.runner import timed_out
from docdelta.git import Repo
from docdelta.grading.answer import score_answer
from docdelta.results.layout import ANSWER_FILE, PROMPT_FILE, STATUS_FILE, TRIAL_FILE, TRIALS_INDEX
from docdelta.results.models import Cell, RunResult
from docdelta.results.store import ResultStore, checkout_dir
from docdelta.sandbox.base import ExecResult, Sandbox
from docdelta.tasks.load import load_tasks
from docdelta.vocabulary import Frozen, sha256_hex

TRIALS_DIR = "trials"
ISOLATION = "external"
M = TypeVar("M", bound=BaseModel)


class ExternalAgent(Agent):
    """The agent's identity for the manifest; docdelta never executes it."""

    name: ClassVar[str] = "external"

    def __init__(self, label: str, version: str, model: str | None) -> None:
        self._label, self._version, self._model = label, version, model

    @property
    def version(self) -> str:
        return f"{self._label} {self._version}".strip()

    @property
    def model(self) -> str | None:
        return self._model

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        raise ConfigError("the external agent is driven outside docdelta", hint="use `docdelta check TRIAL`")

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        raise ConfigError("the external agent is driven outside docdelta", hint="use `docdelta check TRIAL`")


class Trial(Frozen):
    """trial.json: what a controller reads; no task, gold or condition in it."""

    trial: str
    prompt: str = PROMPT_FILE
    checkout: str = "checkout"
    answer: str = Field(default=ANSWER_FILE, description="write the agent's final text here")
    status: str = Field(default=STATUS_FILE, description='write {"status", "exit_code", "seconds"} here')
    statuses: list[str] = Field(default=[s.value for s in RunStatus if s is not RunStatus.infra_error])


class TrialStatus(Frozen):
    status: RunStatus
    exit_code: int | None = None
    seconds: float = Field(default=0.0, ge=0)


class TrialEntry(Frozen):
    cell: Cell
    tree_sha256: str = Field(description="of the sealed checkout the trial's copy was made from")


class TrialsIndex(Frozen):
    """trials.json in the workdir (outside every trial): trial id -> its cell."""

    trials: dict[str, TrialEntry]


def trial_id(manifest_identity: str, cell: Cell) -> str:
    return sha256_hex(f"{manifest_identity}/{cell.key}".encode())[:16]


def prepare_trials(
    repo: Repo, request: ExperimentRequest, workdir: Path, agent: ExternalAgent
) -> dict[str, TrialEntry]:
    """Plan as `run` does and write one trial directory per cell."""
    config = load_project_config(repo, repo.resolve(request.base))
    store = ResultStore(workdir)
    with store.lock():
        exp = prepare(repo, request, config=config, store=store, agent=agent, sandbox=ISOLATION)
        if exp is None:
            raise ConfigError(
                "no agent instruction file changed between the refs: nothing to prepare",
                hint="check --base and --head",
            )
        change = sorted(t for t, lt in exp.tasks.items() if lt.task.kind == "change")
        if change:
            raise ConfigError(
                f"change tasks ({', '.join(change)}) need docdelta's own sandbox for their hidden tests",
                hint="pass --tasks with answer tasks only, or run them with `docdelta run`",
            )
        executed = sorted(t for t, lt in exp.tasks.items() if lt.task.gold.execute is not None)
        if executed:
            raise ConfigError(
                f"tasks with gold.execute ({', '.join(executed)}) need docdelta's own sandbox to run "
                "the proposed commands",
                hint="drop gold.execute from them for external trials, or run them with `docdelta run`",
            )
        identity = exp.manifest.identity()
        index: dict[str, TrialEntry] = {}
        for cell in exp.manifest.order:
            tid = trial_id(identity, cell)
            index[tid] = TrialEntry(cell=cell, tree_sha256=exp.checkouts[cell.condition].tree_sha256)
            dest = workdir / TRIALS_DIR / tid
            if (dest / TRIAL_FILE).is_file():
                continue  # prepared before (and maybe in progress): never overwritten
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            exp.checkouts[cell.condition].copy_to(dest / "checkout")
            (dest / PROMPT_FILE).write_text(build_prompt(exp.tasks[cell.task].task))
            (dest / TRIAL_FILE).write_text(Trial(trial=tid).model_dump_json(indent=2) + "\n")
        (workdir / TRIALS_INDEX).write_text(TrialsIndex(trials=index).model_dump_json(indent=2) + "\n")
    return index


def _read_json(path: Path, model: type[M], what: str) -> M:
    try:
        return model.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ConfigError(
            f"cannot read {what} {path}: {exc.strerror}", hint="check the trial directory"
        ) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top level)"
        raise ConfigError(
            f"{path}: {where}: {first['msg']}", hint=f"write {what} as trial.json describes"
        ) from None


def check_trial(trial_dir: Path, tasks_dir: Path) -> tuple[RunResult, bool]:
    """Grade one trial and save its result in the workdir that prepared it; (result, False)
    when it was graded before (a complete result is never rewritten)."""
    trial = _read_json(trial_dir / TRIAL_FILE, Trial, "the trial file")
    workdir = trial_dir.resolve().parent.parent
    store = ResultStore(workdir)
    manifest = store.read_manifest()
    index = _read_json(workdir / TRIALS_INDEX, TrialsIndex, "the trials index")
    entry = index.trials.get(trial.trial)
    if manifest is None or entry is None:
        raise ConfigError(f"{trial_dir} is not a trial of {workdir}", hint="pass a directory `prepare` wrote")
    cell = entry.cell
    earlier = store.load(manifest.repo, cell)
    if earlier is not None:
        return earlier, False
    loaded = {lt.task.id: lt for lt in load_tasks(tasks_dir)}.get(cell.task)
    if loaded is None or loaded.sha256 != manifest.tasks.get(cell.task):
        raise ConfigError(
            f"--tasks {tasks_dir} does not hold the task file this trial was prepared with",
            hint="pass the --tasks directory given to `docdelta prepare`, unchanged",
        )
    observed = _read_json(trial_dir / trial.status, TrialStatus, "the status file")
    if observed.status is RunStatus.infra_error:
        raise ConfigError(
            f"{trial_dir / trial.status}: status infra_error is docdelta's own, not a trial's",
            hint=f"use one of {', '.join(trial.statuses)}",
        )
    try:
        text = (trial_dir / trial.answer).read_text(errors="replace")
    except OSError:
        text = ""
    answer, why = parse_answer(text)
    status = RunStatus.no_answer if answer is None and observed.status is RunStatus.ok else observed.status
    spec = next(c for c in manifest.conditions if c.name == cell.condition)
    sealed = checkout_dir(workdir, spec.overlay_sha256)
    finished = datetime.now(UTC)
    score = score_answer(loaded.task, answer, sealed)
    outcome = AgentOutcome(
        agent=manifest.agent.name,
        agent_version=manifest.agent.version,
        model=manifest.agent.model,
        status=status,
        answer=answer,
        final_text=text,
        metrics=AgentMetrics(duration_s=observed.seconds),
        exit_code=observed.exit_code,
        error=why if answer is None else None,
    )
    result = RunResult(
        cell=cell,
        status=status,
        outcome=outcome,
        score=timed_out(score) if status is RunStatus.timeout else score,
        isolation=ISOLATION,
        seed=cell_seed(manifest.seed, cell),
        started_at=finished - timedelta(seconds=observed.seconds),
        finished_at=finished,
        task_sha256=loaded.sha256,
        overlay_sha256=spec.overlay_sha256,
        tree_sha256=entry.tree_sha256,
    )
    store.save(manifest.repo, result)
    return result, True
