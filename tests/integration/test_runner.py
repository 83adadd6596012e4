"""Run control in the matrix runner: rate limits stop or wait (with injected sleeps),
a stopped matrix resumes, infrastructure errors are retried and never graded, and too
many of them refuse the verdict. Real git, sealed checkouts, the local sandbox and the
store; only the agent is a test double that ends each run with a chosen status."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest
from gitrepo import GitRepo
from toolchain import MAKE_CHECK_TASK

from docdelta.agents.base import Agent, AgentContext, Invocation, parse_answer
from docdelta.agents.models import AgentMetrics, AgentOutcome, RunStatus
from docdelta.config import ProjectConfig
from docdelta.errors import ConfigError, InfraError
from docdelta.experiment.plan import Experiment, ExperimentRequest, PlanTooLarge, prepare
from docdelta.experiment.progress import LineProgress
from docdelta.experiment.runner import RATE_LIMIT_LOG, MatrixReport, RunLimits, Runner, with_gateway_telemetry
from docdelta.gateway.models import ModelCall
from docdelta.git import Repo
from docdelta.report import render_markdown
from docdelta.results.store import ResultStore
from docdelta.sandbox import get_provider
from docdelta.sandbox.base import ExecResult, Sandbox, SandboxProvider, SandboxSpec
from docdelta.scorecard import stats
from docdelta.scorecard.summarize import summarize

ANSWER = '{"answer": "run make check", "commands": ["make check"]}'

Step = RunStatus | InfraError


class StatusAgent(Agent):
    """Runs a real command in the sandbox, then ends the run with the next scripted step
    (a status, or an InfraError raised as the sandbox would)."""

    name: ClassVar[str] = "status"

    def __init__(self, steps: Sequence[Step], costs: Sequence[float | None] = ()) -> None:
        self.steps = list(steps)
        self.costs = list(costs)
        self.current = RunStatus.ok
        self.api_retries: list[int | None] = []

    @property
    def version(self) -> str:
        return "1"

    def invocation(self, prompt: str, sandbox: Sandbox, ctx: AgentContext) -> Invocation:
        self.api_retries.append(ctx.api_retries)
        step = self.steps.pop(0)
        if isinstance(step, InfraError):
            raise step
        self.current = step
        return Invocation(argv=["python3", "-c", f"print({ANSWER!r})"])

    def parse(self, result: ExecResult, sandbox: Sandbox, ctx: AgentContext) -> AgentOutcome:
        answer, _ = parse_answer(result.stdout.decode())
        error = "429 rate_limit_error from the model API" if self.current is RunStatus.rate_limited else None
        cost = self.costs.pop(0) if self.costs else None
        return AgentOutcome(
            agent=self.name,
            agent_version="1",
            status=self.current,
            answer=answer,
            error=error,
            metrics=AgentMetrics(cost_usd=cost),
        )


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Repo, ExperimentRequest, ResultStore]:
    git = GitRepo.init(tmp_path / "proj")
    git.commit(
        {
            "README.md": "# proj\n",
            "AGENTS.md": "# Agents\nbe nice\n",
            ".docdelta/tasks/t.yaml": MAKE_CHECK_TASK,
        }
    )
    git.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    request = ExperimentRequest(
        base="HEAD~1",
        head="HEAD",
        tasks_dir=git.path / ".docdelta/tasks",
        conditions=("base", "head"),
        repeats=1,
    )
    return Repo(git.path), request, ResultStore(tmp_path / "work")


def run(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
    steps: Sequence[Step],
    costs: Sequence[float | None] = (),
    **limits: object,
) -> tuple[MatrixReport, Experiment, list[float], StatusAgent]:
    repo, request, store = setup
    agent = StatusAgent(steps, costs)
    exp = prepare(repo, request, config=ProjectConfig(), store=store, agent=agent, sandbox="local")
    assert exp is not None
    slept: list[float] = []
    provider = get_provider("local", allow_network=True)
    runner = Runner(
        store,
        provider,
        SandboxSpec(),
        agent,
        RunLimits(timeout_s=30, **limits),  # type: ignore[arg-type]
        LineProgress(out=io.StringIO()),
        sleep=slept.append,
    )
    try:
        report = runner.run(exp)
    finally:
        provider.close()
    assert agent.steps == [], "every scripted step was used"
    return report, exp, slept, agent


def history(store: ResultStore, exp: Experiment) -> list[str]:
    """Files in the cell directories other than complete results."""
    return sorted(p.name for p in store.runs_dir(exp.repo_name).rglob("*.json") if p.name != "result.json")


def test_a_rate_limit_stops_the_matrix_without_waiting_and_a_rerun_resumes(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    store = setup[2]
    report, exp, slept, agent = run(setup, [RunStatus.ok, RunStatus.rate_limited])
    assert agent.api_retries == [0, 0], "stop mode turns the agent's own back-off off"
    assert report.stopped is not None and report.stopped.startswith("rate limited at ")
    assert "429 rate_limit_error" in report.stopped and "--rate-limit wait" in report.stopped
    assert (report.ran, slept) == (1, [])
    assert [r.status for r in store.results(exp.repo_name)] == [RunStatus.ok], "never saved as a result"
    assert history(store, exp) == ["rate_limited-1.json"]
    assert not (store.workdir / RATE_LIMIT_LOG).exists()

    again, _, _, _ = run(setup, [RunStatus.ok])
    assert (again.stopped, again.ran, again.reused) == (None, 1, 1)
    assert [r.status for r in store.results(exp.repo_name)] == [RunStatus.ok, RunStatus.ok]


def test_wait_retries_after_5_15_and_45_minutes_logging_each_wait(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    store = setup[2]
    steps = [RunStatus.rate_limited] * 3 + [RunStatus.ok, RunStatus.ok]
    report, exp, slept, agent = run(setup, steps, rate_limit="wait")
    assert (report.stopped, report.ran, slept) == (None, 2, [300.0, 900.0, 2700.0])
    assert set(agent.api_retries) == {None}, "wait mode leaves the agent's own back-off on"
    log = (store.workdir / RATE_LIMIT_LOG).read_text().splitlines()
    assert [line.split(" ", 1)[1].split(": ", 1)[1] for line in log] == [
        "rate limited; waiting 300s before retry 1 of 3",
        "rate limited; waiting 900s before retry 2 of 3",
        "rate limited; waiting 2700s before retry 3 of 3",
    ]
    assert history(store, exp) == ["rate_limited-1.json", "rate_limited-2.json", "rate_limited-3.json"]
    assert all(r.status is RunStatus.ok for r in store.results(exp.repo_name))


def test_wait_gives_up_after_the_last_wait_and_stops(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    store = setup[2]
    report, _, slept, _ = run(setup, [RunStatus.rate_limited] * 4, rate_limit="wait")
    assert slept == [300.0, 900.0, 2700.0]
    assert report.stopped is not None and "after waits of 300s, 900s, 2700s" in report.stopped
    assert (report.ran, store.results(setup[0].name)) == (0, [])
    assert "still rate limited after waits" in (store.workdir / RATE_LIMIT_LOG).read_text()


def test_infra_errors_are_retried_then_recorded_ungraded_and_refuse_the_verdict(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    store = setup[2]
    boom = InfraError("the gateway did not start")
    report, exp, _, _ = run(setup, [boom, RunStatus.ok, boom, boom], infra_retries=1)
    assert report.stopped is None
    by_status = {r.status: r for r in report.results}
    recovered = by_status[RunStatus.ok]
    assert recovered.attempt == 2 and recovered.score is not None and recovered.score.value == 1.0
    failed = by_status[RunStatus.infra_error]
    assert (failed.attempt, failed.score, failed.outcome.error) == (2, None, "the gateway did not start")

    summary = summarize(exp.manifest, exp.detection, store.results(exp.repo_name))
    assert summary.verdict is None and summary.verdict_refused is not None
    assert "50% of runs are infra errors" in summary.verdict_refused
    assert "**Verdict: refused** — 50% of runs are infra errors" in render_markdown(summary)
    decision = stats.gate(summary.verdict, "regression", refused=summary.verdict_refused)
    assert decision.conclusion == "neutral" and decision.reason.startswith("verdict refused: 50%")


def call(status: int, error: str | None = None) -> ModelCall:
    return ModelCall(
        upstream="anthropic", method="POST", path="/v1/messages", status=status, latency_s=0.1, error=error
    )


@pytest.mark.parametrize(
    ("agent_status", "calls", "over_budget", "expected"),
    [
        (RunStatus.agent_error, [call(200), call(429)], False, RunStatus.rate_limited),
        (RunStatus.timeout, [call(429)], False, RunStatus.rate_limited),
        (RunStatus.ok, [call(429), call(200)], False, RunStatus.ok),  # the agent's own back-off worked
        (RunStatus.ok, [call(429)], False, RunStatus.ok),
        (RunStatus.agent_error, [call(200), call(402, "budget")], True, RunStatus.budget),
        (RunStatus.no_answer, [call(200)], False, RunStatus.no_answer),
    ],
)
def test_gateway_telemetry_classifies_rate_limits_and_budget(
    agent_status: RunStatus, calls: list[ModelCall], over_budget: bool, expected: RunStatus
) -> None:
    outcome = AgentOutcome(agent="a", agent_version="1", status=agent_status)
    assert with_gateway_telemetry(outcome, calls, over_budget).status is expected


def test_a_timeout_scores_zero_even_when_it_printed_the_right_answer(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    report, _, _, _ = run(setup, [RunStatus.timeout, RunStatus.ok])
    by_status = {r.status: r for r in report.results}
    timed_out, ok = by_status[RunStatus.timeout], by_status[RunStatus.ok]
    assert timed_out.outcome.answer is not None and timed_out.outcome.answer.commands == ["make check"]
    assert timed_out.score is not None and timed_out.score.value == 0.0
    assert [(i.hit, i.note) for i in timed_out.score.items] == [(False, "the run timed out")]
    assert ok.score is not None and ok.score.value == 1.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -5.0])
def test_a_cost_that_is_not_an_amount_never_disables_the_cap(
    setup: tuple[Repo, ExperimentRequest, ResultStore], bad: float
) -> None:
    """NaN compares False with everything and a negative cost would buy runs back."""
    report, _, _, _ = run(setup, [RunStatus.ok], costs=[bad], cap_usd=1.0)
    assert report.ran == 1
    assert report.stopped is not None and "not an amount >= 0" in report.stopped


def test_a_plan_over_the_bound_is_refused_unless_confirmed(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    repo, request, store = setup
    agent = StatusAgent([])
    big = replace(request, repeats=501, max_runs=1000)  # 1 task x 2 conditions x 501
    with pytest.raises(PlanTooLarge, match="the plan is 1,002 runs") as refused:
        prepare(repo, big, config=ProjectConfig(), store=store, agent=agent, sandbox="local")
    assert refused.value.planned == 1002 and "--yes" in refused.value.hint
    assert store.read_manifest() is None, "nothing is prepared for a refused plan"
    confirmed = replace(big, max_runs=None)
    assert prepare(repo, confirmed, config=ProjectConfig(), store=store, agent=agent, sandbox="local")


def test_a_condition_named_twice_is_refused(setup: tuple[Repo, ExperimentRequest, ResultStore]) -> None:
    repo, request, store = setup
    twice = replace(request, conditions=("base", "head", "base"))
    with pytest.raises(ConfigError, match="condition base is listed more than once"):
        prepare(repo, twice, config=ProjectConfig(), store=store, agent=StatusAgent([]), sandbox="local")


def test_jobs_count_the_reserve_of_every_run_in_flight_against_the_cap(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    # Two cells, two workers, $1 reserved per run, a $1.50 cap: the first run may start,
    # a second beside it could spend $2 in all, so it never starts while the first runs.
    report, _, _, _ = run(setup, [RunStatus.ok], costs=[0.25], cap_usd=1.5, reserve_usd=1.0, jobs=2)
    assert report.ran == 1
    assert report.stopped == "spend cap reached: $0.00 spent + $1.00 reserve + 1 in flight > $1.50 cap"


class SplitProvider(SandboxProvider):
    """The local provider, its sandboxes reporting a split of their making as Docker's do,
    with one name `PhaseTimings` does not know."""

    name: ClassVar[str] = "split"

    def __init__(self) -> None:
        self.inner = get_provider("local", allow_network=True)

    def create(self, checkout: Path, spec: SandboxSpec) -> Sandbox:
        sandbox = self.inner.create(checkout, spec)
        sandbox.phases = {"create": 0.25, "copy": 0.5, "start": 0.125, "warm-up": 9.0}
        return sandbox

    def close(self) -> None:
        self.inner.close()


def test_each_result_records_where_its_time_went(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    repo, request, store = setup
    agent = StatusAgent([RunStatus.ok, RunStatus.ok])
    exp = prepare(repo, request, config=ProjectConfig(), store=store, agent=agent, sandbox="local")
    assert exp is not None
    provider = SplitProvider()
    runner = Runner(store, provider, SandboxSpec(), agent, RunLimits(), LineProgress(out=io.StringIO()))
    try:
        runner.run(exp)
    finally:
        provider.close()
    for result in store.results(exp.repo_name):
        timings = result.timings
        assert timings is not None
        assert (timings.create_s, timings.copy_s, timings.start_s) == (0.25, 0.5, 0.125)
        measured = [timings.sandbox_s, timings.agent_s, timings.teardown_s, timings.grading_s]
        assert all(t is not None and t > 0 for t in measured), timings
        span = (result.finished_at - result.started_at).total_seconds()
        assert sum(t for t in measured if t is not None) <= span


def test_a_result_written_before_timings_were_kept_still_loads(
    setup: tuple[Repo, ExperimentRequest, ResultStore],
) -> None:
    report, exp, _, _ = run(setup, [RunStatus.ok, RunStatus.ok])
    store = setup[2]
    cell = report.results[0].cell
    path = store.cell_dir(exp.repo_name, cell) / "result.json"
    old = {k: v for k, v in json.loads(path.read_text()).items() if k != "timings"}
    path.write_text(json.dumps(old))
    loaded = store.load(exp.repo_name, cell)
    assert loaded is not None and loaded.timings is None and loaded.status is RunStatus.ok
