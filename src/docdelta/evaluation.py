"""One composition root: `docdelta run`, `docdelta demo` and the Action all call `evaluate`.

The CLI parses its flags (cli.py) and the Action its inputs (settings.py) into the same
`RunOptions`; `evaluate` then builds the real agent, sandbox provider, gateway keys,
limits, progress and store, prepares the experiment, reuses a cached arm when a results
cache is given, runs the matrix and computes the scorecard. Nothing else differs between
the entry points, so what the Action runs is exactly what the CLI runs (a test holds the
two to the same manifest and results).

The model API keys are resolved once per evaluation (`run_keys`, by `wiring.resolve_keys`)
into one `Keys`, which the gateway and redaction both take: the CLI's come from the process
environment, the Action's `api-key` input goes to the upstream its `provider` input (or the
agent) names, and nothing else ever sees it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from docdelta.agents.base import Agent
from docdelta.config import ArmSpec, ProjectConfig, SandboxConfig, load_project_config
from docdelta.errors import ConfigError, DocdeltaError, InfraError, SelftestFailed
from docdelta.experiment.arms import ARMS_FLAG, Arm, check_arms, host_overlay, overlay_dir, repo_overlay
from docdelta.experiment.forecast import forecast
from docdelta.experiment.plan import Experiment, ExperimentRequest, prepare
from docdelta.experiment.progress import LineProgress, Preceded, Progress, progress_for
from docdelta.experiment.reuse import Reuse, pool, restore, save
from docdelta.experiment.rounds import run_matrix
from docdelta.experiment.runner import Column, MatrixReport, RateLimitPolicy, RunLimits, Runner
from docdelta.experiment.shard import Shard
from docdelta.gateway.config import GatewayConfig
from docdelta.git import Repo
from docdelta.instructions.models import Detection
from docdelta.keys import Keys
from docdelta.results.backends import ArmStore
from docdelta.results.layout import ON_BASE, POWER_CACHE
from docdelta.results.models import RunBounds
from docdelta.results.store import ResultStore
from docdelta.sandbox.base import SandboxProvider
from docdelta.scorecard.models import Summary
from docdelta.scorecard.power import cached_drop, power_line
from docdelta.scorecard.summarize import design_of
from docdelta.scorecard.workdir import scorecard, write_pooled
from docdelta.text import quoted
from docdelta.vocabulary import BASE, CONFIG_PATH, DEFAULT_NOISE_BAND, HEAD
from docdelta.wiring import (
    AgentChoice,
    BuiltSandbox,
    SandboxChoice,
    build_agent,
    build_provider,
    resolve_keys,
)

SandboxName = Literal["local", "docker", "none"]
ProgressStyle = Literal["auto", "lines"]
"""auto: a redrawn bar on a terminal outside CI, plain lines otherwise; lines: always lines."""


class RunOptions(BaseModel):
    """How to run the matrix: agent, sandbox, limits, the gateway's key, progress, verdict.

    One object for every entry point; the CLI builds it from flags, the Action from inputs,
    and each names its own spelling of a field in errors (`--max-turns`, `max-turns`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    """No NaN or infinity: every comparison with NaN is False, so it would switch a limit off."""

    agent: str = Field(default="fake", min_length=1)
    agent_cmd: str | None = None
    model: str | None = None
    sandbox: SandboxName = "local"
    allow_network: bool = Field(
        default=False, description="local sandbox: runs that ask for network get the host network (recorded)"
    )
    extra_ca: Path | None = Field(default=None, description="PEM bundle trusted by images (and the Action)")
    timeout_s: float = Field(default=600.0, gt=0)
    max_turns: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(
        default=None, ge=1, description="built-in openai agent: output tokens per turn (None: its default)"
    )
    cap_usd: float | None = Field(default=None, gt=0)
    reserve_usd: float = Field(default=0.0, ge=0)
    infra_retries: int = Field(default=2, ge=0)
    rate_limit: RateLimitPolicy = "stop"
    api_key: SecretStr | None = Field(default=None, description="None: keys from the environment")
    provider: str | None = Field(default=None, description="api_key's gateway upstream; default: the agent's")
    jobs: int = Field(default=1, ge=1, description="cells run at once, each in its own sandbox")
    stop_failed_alike: bool = Field(
        default=False,
        description="stop after a first round whose every run failed with one error (the CLI: the user"
        " is there to fix the command); the Action lets the matrix finish into the broken scorecard its"
        " check and comment document",
    )
    shard: Shard | None = Field(default=None, description="run only this slice of the plan (`I/N`)")
    progress: ProgressStyle = "auto"
    noise_band: float | None = Field(
        default=None, ge=0, lt=1, description="None: `.docdelta.yml`'s noise_band, else DEFAULT_NOISE_BAND"
    )
    alpha: float = Field(default=0.05, gt=0, lt=1)

    @field_validator("extra_ca")
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a readable file")
        return value

    @field_validator("shard", mode="before")
    @classmethod
    def _shard(cls, value: object) -> object:
        return Shard.parse(value) if isinstance(value, str) else value

    @classmethod
    def parse(cls, values: Mapping[str, Any], spelling: Callable[[str], str]) -> RunOptions:
        """Validate `values`; a bad one is a ConfigError naming the field as the user wrote it."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise options_error(exc, spelling) from None

    def limits(self) -> RunLimits:
        return RunLimits(
            timeout_s=self.timeout_s,
            max_turns=self.max_turns,
            cap_usd=self.cap_usd,
            reserve_usd=self.reserve_usd,
            infra_retries=self.infra_retries,
            rate_limit=self.rate_limit,
            jobs=self.jobs,
            stop_failed_alike=self.stop_failed_alike,
        )


def options_error(exc: ValidationError, spelling: Callable[[str], str]) -> ConfigError:
    first = exc.errors()[0]
    name = spelling(str(first["loc"][0])) if first["loc"] else "(options)"
    value = "(secret)" if first["loc"] and first["loc"][0] == "api_key" else repr(first.get("input"))
    return ConfigError(f"{name} = {value}: {first['msg'].lower()}", hint=f"fix {name}")


@dataclass(frozen=True)
class Deps:
    """What the entry point hands in: the repository, where results go, the environment,
    the progress stream, and (Action) the cross-PR results cache."""

    repo: Repo
    workdir: Path
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    cache: ArmStore | None = None
    save_cache: bool = False
    """Trusted runs only (push to the default branch, a results directory): store the base arm."""
    image_base: str | None = None
    """The sandbox's base image where `.docdelta.yml` names no `docker.base` (the Action: one
    a GitHub runner can pull); None keeps the config's default."""
    job_summary: Callable[[str], object] | None = None
    """Where the forecast goes as markdown before the matrix starts (the Action's job summary)."""
    config: ProjectConfig | None = None
    """`docdelta run --config FILE`: the project config instead of the base commit's (a past PR's
    base predates the `.docdelta.yml` it needs). The Action never sets it: there the config
    comes from the trusted base, never from anything the PR could steer."""


@dataclass(frozen=True)
class Evaluation:
    """What a matrix run produced, for the CLI to print and the Action to publish."""

    store: ResultStore
    experiment: Experiment
    report: MatrixReport
    summary: Summary
    reused: Reuse | None = None
    saved: bool = False

    @property
    def cost_usd(self) -> float:
        return sum(r.outcome.metrics.cost_usd or 0.0 for r in self.report.results)


def run_keys(options: RunOptions, agent: Agent, gateway: GatewayConfig, environ: Mapping[str, str]) -> Keys:
    """The run's keys: the `api_key` option, when given, for the upstream `provider` (else the
    agent) names, if the agent calls a model API at all; else each upstream's from `environ`."""
    given = options.api_key if agent.network == "gateway" else None
    return resolve_keys(
        gateway.upstreams, environ, given, options.provider or agent.upstream, asker=f"the {agent.name} agent"
    )


def run_bounds(options: RunOptions, agent: Agent, gateway: GatewayConfig) -> RunBounds:
    """What bounds each run, recorded in the manifest and the cache key."""
    reserve = options.reserve_usd or None
    bounds = RunBounds(
        timeout_s=options.timeout_s, turn_cap=agent.turn_cap(options.max_turns), run_budget_usd=reserve
    )
    if agent.network != "gateway":
        return bounds
    budget = gateway.for_run(reserve, {}).budget
    return bounds.model_copy(
        update={
            "gateway_budget": budget.model_dump(),
            "upstreams": {u.name: u.base_url for u in gateway.upstreams},
        }
    )


def _power_line(store: ResultStore, exp: Experiment, alpha: float, band: float, *, shown: bool) -> str | None:
    """The plan's power line (`power.cached_drop`, which the scorecard reads back), or None when
    it is not `shown`: an ablation has no head against base for it to speak of."""
    tasks, design = len(exp.manifest.tasks), design_of(exp.manifest)
    drop = cached_drop(store.workdir / POWER_CACHE, tasks, design, alpha=alpha, band=band)
    return f"docdelta: {power_line(drop, tasks, design)}" if shown else None


def _warm_the_end() -> None:
    """Import what every entry point's end renders with (the report and its template engine)
    while the cells run, so the end of the run does not wait for it."""
    import docdelta.report  # noqa: F401, PLC0415 - the point is the import


def _progress(options: RunOptions, deps: Deps) -> Progress:
    if options.progress == "lines":
        return LineProgress(out=deps.stream)
    return progress_for(deps.stream, ci=bool(deps.environ.get("CI")))


def arm_choice(spec: ArmSpec, options: RunOptions) -> AgentChoice:
    """An arm's agent: its own fields, else the run's (`--agent-cmd`, `--model` and the output
    cap carry over only to an arm of the same agent)."""
    same = spec.agent is None or spec.agent == options.agent
    return AgentChoice(
        spec.agent or options.agent,
        cmd=spec.agent_cmd or (options.agent_cmd if same else None),
        model=spec.model or (options.model if same else None),
        max_output_tokens=options.max_output_tokens if same else None,
    )


def declared_arms(
    request: ExperimentRequest, options: RunOptions, config: ProjectConfig, repo: Repo, base_sha: str
) -> list[Arm]:
    """The arms this evaluation runs: `--arms`, else (when asked) `.docdelta.yml`'s, checked,
    with their agents built and overlays read. A bad arm is a ConfigError naming its source,
    the arm and the field."""
    if request.arms:
        specs, where = list(request.arms), ARMS_FLAG
    elif request.config_arms and not request.refresh:
        specs, where = config.arms, CONFIG_PATH
    else:
        return []
    check_arms(specs, request.conditions, where)
    if request.adaptive and not {BASE, HEAD} <= set(request.conditions):
        raise ConfigError(
            "--repeats auto stops each task once head vs base is decided, and this plan of arms has "
            "no head and base",
            hint="give a fixed --repeats N, or add --conditions base,head",
        )
    arms = []
    for spec in specs:
        try:
            agent = build_agent(arm_choice(spec, options))
        except DocdeltaError as exc:
            raise ConfigError(f"{where}: arm {spec.name!r}: {exc.message}", hint=exc.hint) from None
        if where == ARMS_FLAG:
            arms.append(Arm(spec, agent, host_overlay(spec, where)))
        else:
            files = repo_overlay(spec, repo, base_sha, where)
            arms.append(Arm(spec, agent, files, source_dir=overlay_dir(spec, where)))
    return arms


def _column(
    arm: Arm,
    agent: Agent,
    provider: SandboxProvider,
    options: RunOptions,
    provider_for: Callable[[Agent], BuiltSandbox],
    sandbox: SandboxConfig,
) -> tuple[Column, Arm]:
    """An arm's agent in the run's sandbox provider, or in one of its own under Docker when it
    is another agent or model: a container's image holds one agent CLI and its gateway pins
    one model. The arm comes back with what its own provider learned of its model server."""
    spec = sandbox.spec(arm.agent.network)
    if options.sandbox != "docker" or (arm.agent.name, arm.agent.model) == (agent.name, agent.model):
        return Column(arm.agent, provider, spec), arm
    own = provider_for(arm.agent)
    return Column(arm.agent, own.provider, spec), replace(arm, server=own.server)


def evaluate(request: ExperimentRequest, options: RunOptions, deps: Deps) -> Evaluation | None:
    """Build the real agent, sandbox and store, prepare, reuse a cached base arm, run,
    save, and score. None when no instruction file changed between the refs.

    On the PR's own code (`source: head`), the PR's code can make every arm fail or score
    alike (a `conftest.py` that stops every hidden test): no verdict, a neutral check, and a
    PR that regressed its instruction files would have moved its own gate. So when that
    evaluation gives no verdict (broken, saturated, or a selftest that failed or could not
    run: a reference patch the PR's code no longer takes) and the PR changes
    files other than instruction files, it is decided on base's code instead (`on_base`),
    which the PR's code cannot touch; when base's code gives no verdict either, the harness
    or the tasks failed, not the PR, and the first evaluation stands."""
    if options.shard is not None:  # the job matrix's plan counted every arm (`plan_size`): run them all
        request = replace(request, skip_base_from=None)
    store = ResultStore(deps.workdir)
    try:
        with store.lock():  # one run per workdir: a second would run the same cells again
            done = _evaluate(request, options, deps, store)
    except (SelftestFailed, InfraError) as exc:  # a selftest the PR's code failed, or could not run
        detection = store.read_detection()
        decided = None
        if detection is not None and _may_decide_on_base(request, options, detection):
            decided = on_base(request, options, deps, quoted(exc.message))
        if decided is None:
            raise
        return decided
    if done is None or done.report.stopped:
        return done
    if not _may_decide_on_base(request, options, done.experiment.detection):
        return done
    why = done.summary.broken or done.summary.saturated
    return (on_base(request, options, deps, why) if why else None) or done


def _may_decide_on_base(request: ExperimentRequest, options: RunOptions, detection: Detection) -> bool:
    """Whether a no-verdict evaluation may be decided again on base's code: it ran on the PR's
    code, whole (a shard's part is decided by the merge), as a PR's evaluation (not an
    ablation or a refresh), and the PR changes more than its instruction files."""
    return (
        request.source == HEAD
        and options.shard is None
        and request.require_change
        and not request.refresh
        and bool(detection.other_changed)
    )


def on_base(request: ExperimentRequest, options: RunOptions, deps: Deps, why: str) -> Evaluation | None:
    """The evaluation on base's code (`source: base`, in the workdir's ON_BASE), when it gives
    a verdict, its summary saying `why` the PR's own code gave none; else None."""
    print(f"docdelta: no verdict on the PR's code ({why}); deciding on base's code", file=deps.stream)
    try:
        done = evaluate(replace(request, source=BASE), options, replace(deps, workdir=deps.workdir / ON_BASE))
    except (SelftestFailed, InfraError):  # on base's code too: not the PR's doing
        return None
    if done is None or done.report.stopped or done.summary.verdict_refused:
        return None
    return replace(done, summary=done.summary.model_copy(update={"decided_on_base": why}))


def _evaluate(
    request: ExperimentRequest, options: RunOptions, deps: Deps, store: ResultStore
) -> Evaluation | None:
    repo = deps.repo
    base_sha = repo.resolve(request.base)
    config = (deps.config or load_project_config(repo, base_sha)).with_image_base(deps.image_base)
    agent = build_agent(
        AgentChoice(
            options.agent,
            cmd=options.agent_cmd,
            model=options.model,
            max_output_tokens=options.max_output_tokens,
        )
    )
    arms = declared_arms(request, options, config, repo, base_sha)
    band = next((b for b in (options.noise_band, config.noise_band) if b is not None), DEFAULT_NOISE_BAND)
    request = replace(request, noise_band=band)
    # One set of keys for every provider: the Action's one api-key goes to the upstream the
    # run's agent (or `provider`) names, never to another upstream an arm's agent speaks to.
    keys = run_keys(options, agent, config.gateway, deps.environ)
    cache = deps.cache
    reused = None
    providers: list[SandboxProvider] = []

    def provider_for(arm_agent: Agent) -> BuiltSandbox:
        built = build_provider(
            SandboxChoice(options.sandbox, allow_network=options.allow_network, extra_ca=options.extra_ca),
            repo=repo,
            private={"workdir": store.workdir, "tasks directory": request.tasks_dir},
            config=config,
            agent=arm_agent,
            keys=keys,
            jobs=options.jobs,
        )
        providers.append(built.provider)
        return built

    built = provider_for(agent)
    provider = built.provider
    stack = ExitStack()
    try:  # nothing between the provider's birth and this: its close must run on every path
        placed = [_column(a, agent, provider, options, provider_for, config.sandbox) for a in arms]
        columns, arms = {a.spec.name: c for c, a in placed}, [a for _, a in placed]
        exp = prepare(
            repo,
            request,
            config=config,
            store=store,
            agent=agent,
            sandbox=options.sandbox,
            image_digest=built.image_digest,
            server=built.server,
            bounds=run_bounds(options, agent, config.gateway),
            control=None if cache is None else lambda e: pool(cache, e, BASE),
            arms=arms,
        )
        if exp is None:
            return None
        if cache is not None:
            reused = restore(cache, exp, store, BASE)
        pooled = exp.pooled
        write_pooled(store, pooled)
        # The power line's simulation and the end's imports run beside the first cells: a
        # cell mostly waits on its agent, and neither is needed before a cell's line.
        beside = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="beside"))
        power = beside.submit(_power_line, store, exp, options.alpha, band, shown=request.require_change)
        beside.submit(_warm_the_end)
        runner = Runner(
            store,
            provider,
            config.sandbox.spec(agent.network),
            agent,
            options.limits(),
            Preceded(_progress(options, deps), power, deps.stream),
            columns=columns,
            secrets=keys.secrets(),
        )
        cells = exp.manifest.order if options.shard is None else options.shard.cells(exp.manifest.order)
        ahead = forecast(
            exp,
            store,
            cells,
            jobs=options.jobs,
            history=deps.cache,
            calls_model=any(a.network == "gateway" for a in [agent, *(arm.agent for arm in arms)]),
            cap_usd=options.cap_usd,
        )
        for line in ahead.lines():
            print(f"docdelta: forecast: {line}", file=deps.stream)
        if deps.job_summary is not None:
            deps.job_summary(ahead.markdown())
        if options.shard is None:
            report = run_matrix(runner, exp, alpha=options.alpha, band=band, pooled=pooled)
        elif exp.manifest.adaptive:
            raise ConfigError(
                "--repeats auto decides round by round from all runs, so it cannot be split into shards",
                hint="give --shard a fixed --repeats N",
            )
        else:
            report = runner.run(exp, options.shard.cells(exp.manifest.order))
        power.result()  # the scorecard reads the power it cached
    finally:
        stack.close()
        for each in providers:
            each.close()
    saved = deps.cache is not None and deps.save_cache and save(deps.cache, exp, report.results, BASE)
    summary = scorecard(store, exp.manifest, exp.detection, report.results, noise=band, alpha=options.alpha)
    return Evaluation(store, exp, report, summary, reused, saved)
