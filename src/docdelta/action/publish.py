"""What the Action posts and sets: the check, the sticky comment, the outputs, and every failure.

Failures never surface as a traceback or a secret: every error becomes one log line and a
check whose text says what went wrong and what to do, with secrets redacted (`fail`; with
inputs too wrong to parse, `bad_settings`). An ablation is no gate, so its failure goes to
the job summary instead. A fork's `pull_request` run, whose token may post nothing, says
so in a warning (`read_only_fork`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from docdelta.action.activity import Activity
from docdelta.action.settings import DEFAULT_CHECK_NAME, SECRET_INPUTS, ActionSettings, Output, input_variable
from docdelta.errors import DocdeltaError, ExitCode, InfraError, SandboxError, SelftestFailed
from docdelta.github.actions import ActionsRuntime
from docdelta.github.comment import marker, render_comment
from docdelta.github.events import EventContext
from docdelta.github.port import Annotation, CheckReport, Conclusion, GitHubPort
from docdelta.github.wording import action_words
from docdelta.redaction import redact
from docdelta.results.backends import ArmStore
from docdelta.results.models import Cell, Manifest, RunResult
from docdelta.scorecard.models import Summary
from docdelta.scorecard.workdir import score_workdir


@dataclass
class ActionResult:
    """What the run concluded; `outputs` are also written to `$GITHUB_OUTPUT`."""

    activity: Activity
    conclusion: Conclusion | None = None
    title: str = ""
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> ExitCode:
        """The step fails only when docdelta itself could not do its job; a failed gate is
        the check's business (a required check blocks the merge, the job stays green)."""
        return ExitCode.BAD_INPUT if self.activity is Activity.error else ExitCode.OK


@dataclass(frozen=True)
class JobResults:
    """What this job scored, whichever way it got there: its own runs (one job, or one shard
    of a job matrix), a job matrix's merged shards (the aggregate job), or none when a
    failed selftest stopped the evaluation. The evaluation's plan is `manifest`'s."""

    summary: Summary
    notes: list[str]
    stopped: str | None
    cost_usd: float
    results: list[RunResult]
    cell_dir: Callable[[Cell], Path]
    """Where each run's files are, for the HTML report's links."""
    manifest: Manifest
    tasks_dir: Path | None
    """The exported task files (None in a job matrix's aggregate job, which only merges)."""
    results_dir: Path
    history: str = ""
    """The comment's history section (`history.comment_section`); empty without history."""


def redactor(secrets: list[str]) -> Callable[[str], str]:
    return partial(redact, secrets=secrets, mark="***")


@dataclass
class ActionContext:
    """One run's settings, event and clients, built once by `main.action`, with how it speaks:
    the log, warnings once each, and the check, all redacted."""

    settings: ActionSettings
    event: EventContext
    port: GitHubPort
    runtime: ActionsRuntime
    redact: Callable[[str], str]
    results_store: Callable[[], ArmStore | None]
    """The `results-store` backend, built on first use and then kept (`main.action`)."""
    warned: set[str] = field(default_factory=set)

    def warn_once(self, message: str) -> None:
        """A warning annotation, once per run however many publishes hit the same cause."""
        if message not in self.warned:
            self.warned.add(message)
            self.runtime.annotate("warning", self.redact(message), title="docdelta")

    def say(self, message: str) -> None:
        self.runtime.stream.write(self.redact(message) + "\n")
        self.runtime.stream.flush()

    def publish(
        self, conclusion: Conclusion | None, title: str, summary: str, annotations: Sequence[Annotation] = ()
    ) -> str:
        ref = self.port.publish_check(
            CheckReport(
                name=self.settings.check_name,
                head_sha=self.event.head_sha,
                conclusion=conclusion,
                title=self.redact(title)[:200],
                summary=self.redact(summary),
                details_url=self.settings.github.run_url,
                annotations=tuple(
                    a.model_copy(update={"message": self.redact(a.message)}) for a in annotations
                ),
            )
        )
        if ref.note:
            self.warn_once(ref.note)
        return ref.url or ""


def set_outputs(ctx: ActionContext, result: ActionResult) -> None:
    """Every run sets `activity` and `conclusion`, and whatever its activity added."""
    result.outputs.setdefault(Output.activity, result.activity.value)
    result.outputs.setdefault(Output.conclusion, result.conclusion.value if result.conclusion else "")
    for name, value in result.outputs.items():
        ctx.runtime.set_output(name, ctx.redact(value))


def score_outputs(summary: Summary, cost: float, settings: ActionSettings) -> dict[str, str]:
    """The scorecard's numbers as outputs, for a later step to branch on."""

    def num(value: float | None) -> str:
        return "" if value is None else f"{value:.4f}"

    return {
        Output.verdict: summary.verdict.kind if summary.verdict else "none",
        Output.head_vs_base: num(summary.head_vs_base.value),
        Output.head_vs_none: num(summary.head_vs_none.value),
        Output.cost_usd: f"{cost:.4f}",
        Output.results_path: str(settings.results_path),
    }


def post_comment(
    ctx: ActionContext, body: str, relinked: Callable[[str], str] | None, outputs: dict[str, str]
) -> str:
    """Post the scorecard comment; with a review comment to post (`relinked`: it, linking back
    to the scorecard's url, then the scorecard's body linking to it), edit it once more. The
    body as it stands on the PR."""
    settings, number = ctx.settings, ctx.event.pr_number
    assert number is not None
    comment = render_comment(settings.config_id, body, full_report_url=settings.github.run_url)
    ref = ctx.port.upsert_comment(number, marker(settings.config_id), comment)
    outputs[Output.comment_url] = ref.url
    ctx.say(f"docdelta: comment {'posted' if ref.created else 'updated'}: {ref.url}")
    if relinked is not None and (final := relinked(ref.url)) != body:
        comment = render_comment(settings.config_id, final, full_report_url=settings.github.run_url)
        ctx.port.edit_comment(number, ref.id, comment)
        return final
    return body


# ------------------------------------------------------------------ failures
FORK_SAFE_WORKFLOW = "examples/workflows/docdelta-fork-safe.yml"


def read_only_fork(ctx: ActionContext) -> ActionResult:
    """Say why nothing was posted and what to use instead; the job stays green."""
    why = (
        "this pull request comes from a fork: on `pull_request` GitHub gives it a read-only token, "
        "so docdelta can post no check or comment here. Evaluate fork PRs with the fork-safe "
        f"workflow (`pull_request_target` + an approval label, see {FORK_SAFE_WORKFLOW}), and run "
        "this one for same-repository PRs only: `if: github.event.pull_request.head.repo.full_name "
        "== github.repository`."
    )
    ctx.runtime.annotate("warning", why, title="docdelta")
    return ActionResult(
        Activity.skip, title="fork pull request: read-only token", outputs={Output.error: why}
    )


@dataclass(frozen=True)
class _Failure:
    """A failure in the Action's words, redacted: the log line, the message's first line (the
    `error` output and the check's title), and the check's text with what to do."""

    text: str
    first: str
    summary: str

    @classmethod
    def of(cls, exc: DocdeltaError, redact: Callable[[str], str]) -> _Failure:
        message = action_words(exc.message)
        first = redact(message).splitlines()[0] if message else type(exc).__name__
        hint = f"\n\n**What to do:** {redact(action_words(exc.hint))}" if exc.hint else ""
        return cls(redact(action_words(str(exc))), first, redact(message) + hint)

    @property
    def title(self) -> str:
        return f"docdelta could not run: {self.first}"

    @property
    def ablation_summary(self) -> str:
        """An ablation is no gate: its failure goes to the job summary, never a check."""
        return f"**docdelta could not run the ablation:** {self.text}\n"


def fail(ctx: ActionContext, exc: DocdeltaError) -> ActionResult:
    """One log line, and a check that explains: our machinery failing is `neutral` (it says
    nothing about the PR), anything the workflow or repository must fix is `failure`."""
    failure = _Failure.of(exc, ctx.redact)
    ctx.runtime.annotate("error", failure.text, title="docdelta")
    conclusion = Conclusion.neutral if isinstance(exc, InfraError | SandboxError) else Conclusion.failure
    if ctx.settings.ablate is not None:
        ctx.runtime.append_summary(failure.ablation_summary)
        return ActionResult(Activity.error, conclusion, failure.title, {Output.error: failure.first})
    try:
        ctx.publish(conclusion, failure.title, failure.summary)
    except DocdeltaError as publish_exc:
        ctx.say(f"docdelta: could not publish the check either: {publish_exc}")
    return ActionResult(Activity.error, conclusion, failure.title, {Output.error: failure.first})


def bad_settings(
    exc: DocdeltaError, env: Mapping[str, str], event: EventContext, port: GitHubPort, runtime: ActionsRuntime
) -> int:
    """The inputs are wrong: say which in the log and, when there is a commit, in a failed check
    (for an ablation, which is no gate, in the job summary instead, as `fail` does). There are
    no settings, so the secrets and the check's name are read from the raw inputs."""
    redact = redactor([env.get(input_variable(n), "").strip() for n in SECRET_INPUTS])
    failure = _Failure.of(exc, redact)
    runtime.annotate("error", failure.text, title="docdelta")
    name = env.get(input_variable("check-name"), "").strip() or DEFAULT_CHECK_NAME
    try:
        if env.get(input_variable("ablate"), "").strip():
            runtime.append_summary(failure.ablation_summary)
        else:
            ref = port.publish_check(
                CheckReport(
                    name=name,
                    head_sha=event.head_sha,
                    conclusion=Conclusion.failure,
                    title=failure.title[:200],
                    summary=failure.summary,
                )
            )
            if ref.note:
                runtime.annotate("warning", redact(ref.note), title="docdelta")
    except DocdeltaError as publish_exc:
        runtime.stream.write(f"docdelta: could not publish the check either: {redact(str(publish_exc))}\n")
    # The same outputs as any other failed run, so a later step can report or branch on them.
    failed = {
        Output.activity: Activity.error,
        Output.conclusion: Conclusion.failure,
        Output.error: failure.first,
    }
    for output, value in failed.items():
        runtime.set_output(output, value)
    return exc.exit_code


def selftest_failed(ctx: ActionContext, workdir: Path, exc: SelftestFailed) -> JobResults:
    """The scorecard of a run stopped by a failed selftest: no runs, no verdict, and the
    failed legs' output under *Grading failures* (the workdir keeps the reports), published
    as any evaluation's; `exc` itself when the selftest's tests ran and said the task is wrong."""
    scored = score_workdir(workdir, with_results=False)
    if scored is None:
        raise exc
    store, manifest, summary = scored.store, scored.manifest, scored.summary
    if not summary.grading_failures:  # a selftest whose tests ran and said the task is wrong
        raise exc
    ctx.say(f"docdelta: {exc.message.splitlines()[0]}")
    note = "**Selftest failed:** no agent ran; fix the environment or the task, then rerun."
    summary = summary.model_copy(update={"repo": ctx.settings.github.repository})
    return JobResults(
        summary, [note], None, 0.0, [], partial(store.cell_dir, manifest.repo), manifest, None, workdir
    )
