"""The GitHub Action: event -> activity -> matrix -> comment, check and outputs.

`main()` is thin glue: it masks the secrets, parses the settings and the event, and
builds the one real GitHub client; `action()` receives them and does the work, so the
tests drive it against the fake GitHub server with the same code the image runs.

The event decides the activity in one place (`choose`):
* a pull request (`pull_request`, `pull_request_target`, or `workflow_run` of one) is
  evaluated: no instruction file changed -> a `neutral` check and no comment; a fork
  without a maintainer's approval -> `action_required` and no agent run; otherwise the
  matrix runs and the sticky comment, the check (the gate's conclusion), the job
  summary and the outputs are published;
* a push to the default branch (or a manual dispatch) refreshes the base-arm results
  in the results store, so later PRs on that base reuse them;
* with the `ablate` input, any event ablates that instruction file on its commit
  (`ablation.ablate`, as `docdelta ablate`): the table goes to the job summary and the
  `ablation` output, and nothing is posted (an ablation is no gate on a commit).

Trust: tasks and project config always come from the base commit. A fork's code never
runs on the runner: its instruction files are read as data through the API and laid on
the base commit (`overlay_commit`), so a fork PR is judged on the base's code with the
fork's instructions. Approval is a label applied by a user with write access; a new
push removes it, so every revision is read by a maintainer before it meets the key.

Failures never surface as a traceback or a secret: every error becomes one log line
and a check whose text says what went wrong and what to do, with secrets redacted.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TextIO

import certifi
from pydantic import ValidationError

from docdelta.action.activity import Activity
from docdelta.action.settings import DEFAULT_CHECK_NAME, SECRET_INPUTS, ActionSettings, Output, input_variable
from docdelta.action.suggest_loop import (
    Proven,
    Published,
    ReviewTarget,
    audit_section,
    prove_suggestion,
    publish_suggestion,
)
from docdelta.agents import agent_upstream
from docdelta.config import ProjectConfig, load_project_config, matcher
from docdelta.errors import (
    ConfigError,
    DocdeltaError,
    DraftRefused,
    ExitCode,
    InfraError,
    SandboxError,
    SelftestFailed,
)
from docdelta.evaluation import Deps, evaluate
from docdelta.experiment.plan import ExperimentRequest, PlanTooLarge
from docdelta.experiment.shard import merge_workdirs, plan_matrix
from docdelta.git import Repo, overlay_commit
from docdelta.github.actions import ActionsRuntime
from docdelta.github.annotations import added_lines, diff_hunks, line_annotations
from docdelta.github.comment import marker, render_comment, suggestion_marker
from docdelta.github.events import EventContext, load_event
from docdelta.github.port import Annotation, CheckReport, Conclusion, GitHubPort, PrFile
from docdelta.github.pygithub import ApiError, PyGithubPort
from docdelta.github.wording import action_words
from docdelta.improve.ablation import AblationRequest, ablate
from docdelta.improve.ablation import render as render_ablation
from docdelta.improve.suggest import Suggestion
from docdelta.improve.suggest_model import REFUSED, ModelDraft, draft_for, upstream_of
from docdelta.instructions.detect import InstructionMatcher, instruction_files
from docdelta.instructions.models import ChangedFile, Detection, FileStatus
from docdelta.redaction import redact
from docdelta.report import render_comment_markdown, render_markdown
from docdelta.report.html import render_html
from docdelta.report.render import fmt_verdict, inline
from docdelta.results.backends import ArmStore, open_store, token_auth
from docdelta.results.layout import ABLATION_FILE, MANIFEST_FILE
from docdelta.results.models import Cell, Manifest, RunResult
from docdelta.results.store import ResultStore
from docdelta.scorecard import stats, thresholds
from docdelta.scorecard.history import HISTORY_DIR, History, comment_section, content_digest, record_of
from docdelta.scorecard.models import Summary
from docdelta.scorecard.workdir import scorecard
from docdelta.tasks.load import load_tasks
from docdelta.tasks.models import Task
from docdelta.vocabulary import BASE, HEAD, PATCHED, Frozen, sha256_hex

PR_EVENTS = ("pull_request", "pull_request_target")
EVALUATED_ACTIONS = ("opened", "synchronize", "reopened", "ready_for_review", "labeled")
NO_CHANGE_TITLE = "no agent instruction files changed"


# ------------------------------------------------------------------- results
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


class PrHandoff(Frozen):
    """pr.json, written by the untrusted `pull_request` job for the trusted `workflow_run` job.

    It is validated here and must name the same head commit GitHub reports for the run,
    so an artifact cannot point the trusted job at another commit.
    """

    number: int
    base_sha: str
    head_sha: str


def _redactor(secrets: list[str]) -> Callable[[str], str]:
    return partial(redact, secrets=secrets, mark="***")


# ------------------------------------------------------------------- choose
def choose(event: EventContext, settings: ActionSettings) -> tuple[Activity, str]:
    """(activity, why): `evaluate`, `refresh`, `skip`, or `ablate` on any event when the `ablate`
    input is set. The one place events are told apart."""
    if settings.ablate is not None:
        return Activity.ablate, f"ablation of {settings.ablate} (input 'ablate') on {event.event}"
    if event.event in PR_EVENTS or (event.event == "workflow_run" and event.pr_number is not None):
        if event.action in ("labeled", "unlabeled") and event.label != settings.approve_label:
            return (
                Activity.skip,
                f"label {event.label!r} is not the approval label {settings.approve_label!r}",
            )
        if event.event in PR_EVENTS and event.action not in EVALUATED_ACTIONS:
            return Activity.skip, f"nothing to do when a pull request is {event.action}"
        return Activity.evaluate, f"pull request #{event.pr_number}"
    if event.event == "workflow_run":
        return Activity.skip, "the workflow run belongs to no pull request (pass `pr-handoff` for fork PRs)"
    if event.event == "push":
        if event.default_branch and event.head_ref == f"refs/heads/{event.default_branch}":
            return Activity.refresh, f"push to the default branch {event.default_branch}"
        return Activity.skip, f"push to {event.head_ref}, not the default branch: nothing to refresh"
    if event.event == "workflow_dispatch":
        return Activity.refresh, f"manual run on {event.head_ref}"
    return Activity.skip, f"event {event.event} is not handled"


def apply_handoff(event: EventContext, path: Path) -> EventContext:
    """Fill a `workflow_run` event's PR from the untrusted job's pr.json, after checking it."""
    try:
        handoff = PrHandoff.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read the PR handoff {path}: {exc.strerror}", hint=_HANDOFF_HINT) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top level)"
        raise ConfigError(f"PR handoff {path}: {where}: {first['msg']}", hint=_HANDOFF_HINT) from None
    if handoff.head_sha != event.head_sha:
        raise ConfigError(
            f"PR handoff {path} names head {handoff.head_sha[:12]}, but the workflow run is for "
            f"{event.head_sha[:12]}",
            hint="the artifact must come from the run that triggered this workflow_run",
        )
    return event.model_copy(update={"pr_number": handoff.number, "base_sha": handoff.base_sha})


_HANDOFF_HINT = "upload pr.json ({number, base_sha, head_sha}) from the pull_request job, as in the example"


# -------------------------------------------------------------------- action
@dataclass
class _Context:
    settings: ActionSettings
    event: EventContext
    port: GitHubPort
    runtime: ActionsRuntime
    redact: Callable[[str], str]
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


def action(
    settings: ActionSettings,
    event: EventContext,
    port: GitHubPort,
    runtime: ActionsRuntime,
) -> ActionResult:
    """Do what the event asks, publish the result, set the outputs. Never raises a DocdeltaError."""
    ctx = _Context(settings, event, port, runtime, _redactor(settings.secrets()))
    result = ActionResult(activity=Activity.error)
    try:
        if event.event == "workflow_dispatch" and settings.github.sha:
            ctx.event = event.model_copy(update={"head_sha": settings.github.sha})  # the payload has no sha
        if settings.pr_handoff is not None and event.event == "workflow_run":
            ctx.event = apply_handoff(event, settings.pr_handoff)
        activity, why = choose(ctx.event, settings)
        ctx.say(f"docdelta: {activity}: {why}")
        if activity is Activity.evaluate:
            result = _receipt_check(ctx) if settings.receipt else _evaluate(ctx)
        elif activity in (Activity.refresh, Activity.ablate):
            result = _on_commit(ctx, activity)
        else:
            result = ActionResult(activity=Activity.skip, title=why)
    except ApiError as exc:
        result = _read_only_fork(ctx) if _fork_token(ctx.event, exc) else _fail(ctx, exc)
    except DocdeltaError as exc:
        result = _fail(ctx, exc)
    except Exception as exc:  # a bug: still no traceback in the PR, and a check that says so
        result = _fail(
            ctx,
            InfraError(
                f"internal error ({type(exc).__name__}: {exc})",
                hint="this is a docdelta bug; please report it with the workflow log",
            ),
        )
    result.outputs.setdefault(Output.activity, result.activity.value)
    result.outputs.setdefault(Output.conclusion, result.conclusion.value if result.conclusion else "")
    for name, value in result.outputs.items():
        runtime.set_output(name, ctx.redact(value))
    return result


FORK_SAFE_WORKFLOW = "examples/workflows/docdelta-fork-safe.yml"


def _fork_token(event: EventContext, exc: ApiError) -> bool:
    """A fork's `pull_request` run holds a read-only token: a 403 there is GitHub's rule, not a failure."""
    return event.event == "pull_request" and event.is_fork and exc.status == 403


def _read_only_fork(ctx: _Context) -> ActionResult:
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


def _fail(ctx: _Context, exc: DocdeltaError) -> ActionResult:
    """One log line, and a check that explains: our machinery failing is `neutral` (it says
    nothing about the PR), anything the workflow or repository must fix is `failure`."""
    text = ctx.redact(action_words(str(exc)))
    ctx.runtime.annotate("error", text, title="docdelta")
    conclusion = Conclusion.neutral if isinstance(exc, InfraError | SandboxError) else Conclusion.failure
    message = action_words(exc.message)
    first = ctx.redact(message).splitlines()[0] if message else type(exc).__name__
    title = f"docdelta could not run: {first}"
    hint = f"\n\n**What to do:** {ctx.redact(action_words(exc.hint))}" if exc.hint else ""
    if ctx.settings.ablate is not None:  # an ablation is no gate: it posts no check, failed or not
        ctx.runtime.append_summary(f"**docdelta could not run the ablation:** {text}\n")
        return ActionResult(Activity.error, conclusion, title, {Output.error: first})
    try:
        ctx.publish(conclusion, title, f"{ctx.redact(message)}{hint}")
    except DocdeltaError as publish_exc:
        ctx.say(f"docdelta: could not publish the check either: {publish_exc}")
    return ActionResult(Activity.error, conclusion, title, {Output.error: first})


# ------------------------------------------------------------------ evaluate
def detection_from_files(files: list[PrFile], match: InstructionMatcher, base: str, head: str) -> Detection:
    """The PR's changed instruction files from the API's file list (no checkout of head needed)."""
    changed = [
        ChangedFile(path=f.path, status=f.status, old_path=f.old_path, families=match.families(f.path))
        for f in files
        if match.matches(f.path) or (f.old_path is not None and match.matches(f.old_path))
    ]
    return Detection(base=base, head=head, changed=changed)


@dataclass(frozen=True)
class _PrChange:
    """What an evaluation and a receipt check both start from: the PR's checkout, number and
    base commit (fetched if need be), the files its API lists, and the instruction files
    among them, matched by the base's `.docdelta.yml`."""

    repo: Repo
    number: int
    base_sha: str
    files: list[PrFile]
    detection: Detection


def _pr_change(ctx: _Context, prefix: str, hint: str) -> _PrChange:
    """The event's `_PrChange`; an event without a PR and base is a `ConfigError` (`prefix`
    names the input that asked for it)."""
    event = ctx.event
    if event.pr_number is None or not event.base_sha:
        raise ConfigError(f"{prefix}the {event.event} event names no pull request and base commit", hint=hint)
    repo = Repo(ctx.settings.github.workspace)
    base_sha = _local(repo, event.base_sha, BASE)
    match = matcher(load_project_config(repo, base_sha))
    files = ctx.port.pr_files(event.pr_number, base_sha, event.head_sha)
    detection = detection_from_files(files, match, base_sha, event.head_sha)
    return _PrChange(repo, event.pr_number, base_sha, files, detection)


def _evaluate(ctx: _Context) -> ActionResult:
    event, settings = ctx.event, ctx.settings
    change = _pr_change(
        ctx, "", "run docdelta on pull_request / pull_request_target, or pass `pr-handoff` on workflow_run"
    )
    repo, number, base_sha, files = change.repo, change.number, change.base_sha, change.files
    detection = change.detection
    head_sha = event.head_sha
    if detection.empty:
        url = ctx.publish(
            Conclusion.neutral,
            NO_CHANGE_TITLE,
            "This pull request changes no agent instruction file (AGENTS.md, CLAUDE.md, Cursor or "
            "Copilot rules, ...), so there is nothing for docdelta to evaluate.",
        )
        ctx.say(f"docdelta: {NO_CHANGE_TITLE}")
        outputs: dict[str, str] = {Output.verdict: "skipped", Output.check_url: url}
        if settings.plan:  # `evaluate: false`: the matrix's run and aggregate jobs are skipped
            outputs[Output.plan] = plan_matrix(0, max_parallel=settings.max_parallel).model_dump_json()
        return ActionResult(Activity.no_change, Conclusion.neutral, NO_CHANGE_TITLE, outputs)

    if event.is_fork:
        approval = _fork_approval(ctx, number)
        if approval is None:
            return ActionResult(
                Activity.awaiting_approval, Conclusion.action_required, _WAITING, {Output.verdict: "pending"}
            )
        head = _fork_head(ctx, repo, base_sha, detection)
        provenance = (
            f"Instruction files of fork `{event.head_repo or 'deleted fork'}` were read as data at "
            f"`{head_sha[:12]}` and laid on the base commit; evaluation approved by @{approval}."
        )
    else:
        approver = _actor_approval(ctx, number)
        if approver is None:
            return ActionResult(
                Activity.awaiting_approval,
                Conclusion.action_required,
                _ACTOR_WAITING,
                {Output.verdict: "pending"},
            )
        head = _local(repo, head_sha, HEAD)
        provenance = (
            ""
            if approver == event.sender
            else f"Evaluation of @{event.sender}'s event approved by @{approver}."
        )
    if settings.plan:
        return _plan(ctx, repo, base_sha)
    if settings.options.shard is None:  # a shard's in-progress check is the plan job's
        ctx.publish(None, _EVALUATING, f"Running the matrix on {head_sha[:12]}.")
    return _run_and_report(ctx, repo, base_sha, head, provenance, files)


def _receipt_check(ctx: _Context) -> ActionResult:
    """`receipt: true`: no agent runs. The check passes only if every instruction file the PR
    changes has, at head, a receipt in the results store: an evaluation of exactly these bytes
    that passed `fail-on`. The bytes come from the checkout, or through the API for a fork's
    head (data only, never run)."""
    settings = ctx.settings
    change = _pr_change(
        ctx, "input 'receipt': ", "run the receipt check on pull_request / pull_request_target"
    )
    repo, detection = change.repo, change.detection
    if detection.empty:
        url = ctx.publish(Conclusion.neutral, NO_CHANGE_TITLE, "No instruction file changed: none to check.")
        return ActionResult(Activity.no_change, Conclusion.neutral, NO_CHANGE_TITLE, {Output.check_url: url})
    if settings.results_store.kind == "none":
        raise ConfigError(
            "input 'receipt': the receipts are kept in the results store, but `results-store` is none",
            hint="set `results-store: branch:docdelta-results` here and in the evaluating workflow",
        )
    try:
        lines, missing = _receipts(ctx, repo, _history(ctx, _results_store(ctx, repo)), detection)
    except InfraError as exc:  # a required check: an unreadable store must not pass as neutral
        raise ConfigError(f"input 'receipt': {exc.message}", hint=exc.hint) from None
    if missing:
        conclusion, title = Conclusion.failure, f"no passing evaluation of {', '.join(missing)} as merged"
    else:
        conclusion, title = Conclusion.success, "every changed instruction file has a passing evaluation"
    summary = (
        f"A receipt is an evaluation of an instruction file's exact content that passed "
        f"`fail-on: {settings.fail_on}` (kept in `{settings.results_store.kind}:"
        f"{settings.results_store.location}`).\n\n" + "\n".join(lines)
    )
    url = ctx.publish(conclusion, title, summary)
    ctx.say(f"docdelta: receipt: {conclusion.value}: {title}")
    return ActionResult(Activity.receipt, conclusion, title, {Output.check_url: url})


def _receipts(
    ctx: _Context, repo: Repo, history: History, detection: Detection
) -> tuple[list[str], list[str]]:
    """(a line per changed instruction file, the paths whose head content has no passing
    receipt); a deleted file needs none."""
    settings = ctx.settings
    lines: list[str] = []
    missing: list[str] = []
    for f in detection.changed:
        if f.status is FileStatus.deleted:
            lines.append(f"- `{f.path}`: deleted by this pull request; no content to hold a receipt")
            continue
        digest = content_digest(_head_bytes(ctx, repo, f.path))
        receipt = history.receipt(digest)
        passing = receipt.passing(settings.fail_on) if receipt else []
        if passing:
            last = passing[-1]
            where = f"PR #{last.pr}" if last.pr is not None else f"head `{last.head_sha[:12]}`"
            lines.append(
                f"- `{f.path}` (`{digest[:12]}`): passed in {where} on {last.recorded_at:%Y-%m-%d %H:%M} "
                f"— {last.gate(settings.fail_on).reason}"
            )
            continue
        missing.append(f.path)
        tried = len(receipt.evaluations) if receipt else 0
        why = f"{tried} evaluation(s) of this content, none passing" if tried else "never evaluated"
        lines.append(f"- `{f.path}` (`{digest[:12]}`): **no receipt** ({why})")
    return lines, missing


def _head_bytes(ctx: _Context, repo: Repo, path: str) -> bytes:
    """`path` at the PR's head: from the checkout when it holds the commit, else the API."""
    sha = ctx.event.head_sha
    try:
        commit = repo.resolve(sha)
    except ConfigError:  # a fork's head is not in the base checkout
        data = ctx.port.read_file(path, sha)
    else:
        entry = next((e for e in repo.tree(commit, [path]) if e.path == path), None)
        data = repo.read_blob(entry.oid) if entry is not None else None
    if data is None:
        raise ConfigError(
            f"{path} is missing at the PR's head {sha[:12]}",
            hint="the head commit was probably force-pushed away; the run for the new head checks it",
        )
    return data


def _plan(ctx: _Context, repo: Repo, base_sha: str) -> ActionResult:
    """The plan job of a matrix workflow: the job matrix of this evaluation, from the same
    docdelta (the action's version) and the same inputs as its run jobs; nothing runs. The
    check goes in progress here, once, and the aggregate job completes it."""
    settings = ctx.settings
    if settings.repeats == "auto":
        raise ConfigError(
            "input 'plan': a matrix runs a fixed plan, but `repeats` is auto",
            hint="set `repeats:` to a number in the plan job and in every run job",
        )
    config = load_project_config(repo, base_sha)
    tasks_path = (settings.tasks or config.tasks).strip("/")
    with tempfile.TemporaryDirectory(prefix="docdelta-plan-") as tmp:
        tasks = load_tasks(_export_tasks(repo, base_sha, tasks_path, Path(tmp)))
    columns = len(settings.conditions) + len(config.arms)  # `.docdelta.yml`'s arms run in every PR
    cells = len(tasks) * columns * settings.repeats
    if cells > settings.max_runs:
        raise ConfigError(
            f"input 'plan': the plan is {cells:,} runs ({len(tasks)} tasks x {columns} "
            f"conditions and arms x {settings.repeats} repeats), more than max-runs {settings.max_runs:,}",
            hint="lower `repeats` or `conditions`, or raise `max-runs` in every job of the workflow",
        )
    plan = plan_matrix(cells, max_parallel=settings.max_parallel)
    title = f"{cells} runs in {plan.jobs} jobs of up to {plan.cells_per_job}"
    ctx.publish(None, _EVALUATING, f"Running {title} on {ctx.event.head_sha[:12]}.")
    ctx.say(f"docdelta: plan: {title}")
    return ActionResult(Activity.plan, None, title, {Output.plan: plan.model_dump_json()})


_EVALUATING = "evaluating the instruction-file change"
_WAITING = "waiting for a maintainer to approve this fork's instruction files"


def _fork_approval(ctx: _Context, number: int) -> str | None:
    """The approving maintainer, or None after publishing `action_required`."""
    event, label = ctx.event, ctx.settings.approve_label
    if event.event == "pull_request":
        reason = (
            "Pull requests from forks get no secrets on `pull_request`, so the agent cannot run here. "
            "Use the fork-safe workflow (`pull_request_target` + an approval label), see https://github.com/docdelta/docdelta/blob/main/docs/action.md"
        )
    else:
        if event.action == "synchronize" and ctx.port.remove_label(number, label):
            ctx.say(f"docdelta: new commits on the fork: approval label {label!r} removed")
        approver = ctx.port.label_approver(number, label)
        if approver is not None:
            ctx.say(f"docdelta: fork evaluation approved by @{approver}")
            return approver
        reason = (
            f"This pull request comes from a fork, and its instruction files would be fed to an agent "
            f"that holds the model API key. A maintainer with write access should read the changed "
            f"instruction files and then apply the label `{label}`; the evaluation starts then. "
            "The label is removed again when new commits are pushed."
        )
    ctx.publish(Conclusion.action_required, _WAITING, reason)
    ctx.say(f"docdelta: {_WAITING}")
    return None


_ACTOR_WAITING = "waiting for a maintainer: the event's actor has no write access"


def _on_commit(ctx: _Context, activity: Activity) -> ActionResult:
    """`refresh` or `ablate`, when the event's actor is trusted (no approval label: no PR)."""
    if not trusted_actor(ctx):
        why = f"@{ctx.event.sender} has no write access and is not in `allowed-actors`: no agent runs"
        ctx.say(f"docdelta: skip: {why}")
        return ActionResult(Activity.skip, title=why, outputs={Output.error: why})
    return _refresh(ctx) if activity is Activity.refresh else _ablate(ctx)


def trusted_actor(ctx: _Context) -> bool:
    """Whether the event's sender may start a run that holds the key: write access (asked
    through the collaborator permission API), or named in `allowed-actors` (`*`: anyone).
    Anyone who can read a repository can open a pull request from one of its branches, and
    the runner hands its job the secrets."""
    allowed = ctx.settings.allowed_actors
    return "*" in allowed or ctx.event.sender in allowed or ctx.port.can_write(ctx.event.sender)


def _actor_approval(ctx: _Context, number: int) -> str | None:
    """Who let this same-repository pull request's evaluation run: its sender when trusted,
    else a maintainer's approve-label; None after publishing `action_required`."""
    if trusted_actor(ctx):
        return ctx.event.sender
    label = ctx.settings.approve_label
    approver = ctx.port.label_approver(number, label)
    if approver is not None:
        ctx.say(f"docdelta: evaluation approved by @{approver}")
        return approver
    sender = inline(ctx.event.sender)
    ctx.publish(
        Conclusion.action_required,
        _ACTOR_WAITING,
        f"@{sender} has no write access to this repository, and an evaluation runs agents that hold "
        f"the model API key. A maintainer with write access should read the changed instruction files "
        f"and then apply the label `{label}`, or list trusted actors (a bot) in the `allowed-actors` "
        "input.",
    )
    ctx.say(f"docdelta: {_ACTOR_WAITING} (@{ctx.event.sender})")
    return None


def _fork_head(ctx: _Context, repo: Repo, base_sha: str, detection: Detection) -> str:
    """Base commit + the fork's instruction files, read through the API as bytes."""
    changes: dict[str, bytes | None] = {}
    for f in detection.changed:
        if f.old_path:
            changes[f.old_path] = None
        if f.status is FileStatus.deleted:
            changes[f.path] = None
            continue
        data = ctx.port.read_file(f.path, ctx.event.head_sha)
        if data is None:
            raise ConfigError(
                f"{f.path} is missing at the PR's head {ctx.event.head_sha[:12]}",
                hint="the head commit was probably force-pushed away; the run for the new head evaluates it",
            )
        changes[f.path] = data
    return overlay_commit(repo.root, base_sha, changes, "docdelta: fork instruction files")


def _local(repo: Repo, sha: str, what: str) -> str:
    try:
        return repo.resolve(sha)
    except ConfigError:
        raise ConfigError(
            f"the {what} commit {sha[:12]} is not in the checkout",
            hint="use actions/checkout with `fetch-depth: 0`; if the PR was force-pushed, the run for "
            "the new head replaces this one",
        ) from None


# --------------------------------------------------------------------- matrix
@dataclass(frozen=True)
class _Matrix:
    summary: Summary
    notes: list[str]
    stopped: str | None
    cost_usd: float
    results: list[RunResult]
    cell_dir: Callable[[Cell], Path]
    """Where each run's files are, for the HTML report's links."""
    manifest: Manifest
    tasks_dir: Path | None
    """The exported task files (None in a matrix's aggregate job, which only merges)."""
    results_dir: Path
    history: str = ""
    """The comment's history section (`history.comment_section`); empty without history."""


def _merged_matrix(settings: ActionSettings, shards: Path, workdir: Path) -> _Matrix:
    """The aggregate job of a matrix workflow: merge every shard's results found under
    `shards` (the downloaded artifacts) and score the merged workdir; nothing runs."""
    found = sorted(m.parent for m in shards.rglob(MANIFEST_FILE))
    if not found:
        raise ConfigError(
            f"input 'merge': no shard results (manifest.json) under {shards}",
            hint="download every run job's results-path artifact into that directory",
        )
    merged = merge_workdirs(found, workdir)
    store = ResultStore(workdir)
    detection = store.read_detection()
    assert detection is not None  # merge_workdirs copied it from every shard
    results = store.results(merged.manifest.repo)
    # As for one job's run (`_run_matrix`): the scorecard names the repository, not the checkout.
    summary = scorecard(store, merged.manifest, detection, results).model_copy(
        update={"repo": settings.github.repository}
    )
    stopped = (
        f"{len(merged.missing)} planned runs have no result (a shard is missing)" if merged.missing else None
    )
    notes = [f"**Merged** {merged.shards} shards: {merged.complete} of {len(merged.manifest.order)} runs."]
    cost = sum(r.outcome.metrics.cost_usd or 0.0 for r in results)
    cell_dir = partial(store.cell_dir, merged.manifest.repo)
    return _Matrix(summary, notes, stopped, cost, results, cell_dir, merged.manifest, None, workdir)


def _export_tasks(repo: Repo, sha: str, path: str, dest: Path) -> Path:
    """The task files as committed at `sha` (the trusted base), never as a PR left them."""
    entries = [e for e in repo.tree(sha, [path]) if e.is_blob and not e.is_symlink]
    if not entries:
        raise ConfigError(
            f"no task files under {path}/ at {sha[:12]}",
            hint="commit reviewed task files on the base branch, or set the `tasks` input",
        )
    oids = {e.oid: [x for x in entries if x.oid == e.oid] for e in entries}
    for oid, data in repo.read_blobs(list(oids)):
        for e in oids[oid]:
            target = dest / Path(e.path).relative_to(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return dest


ACTION_SANDBOX_BASE = "python:3.11-bookworm"
"""The agent image's base in the Action when `.docdelta.yml` names no `docker.base`: an
image every GitHub runner can pull, with the python3 and git the sandbox needs. (The
CLI's default, docdelta-base, exists only where scripts/provision-docker.sh built it.)"""


def _run_matrix(
    ctx: _Context,
    repo: Repo,
    base_sha: str,
    head: str,
    conditions: tuple[str, ...],
    source: str,
    trusted: bool,
    refresh: bool = False,
    proof: Path | None = None,
) -> _Matrix:
    """Export the trusted tasks, then the composition root (`evaluation.evaluate`) with the
    settings' options, exactly as `docdelta run` calls it, plus the results cache.
    `proof`: the suggested patch's `head,patched` run (`suggest: true`), in a workdir of
    its own, neither recorded in the history nor saved to the results store."""
    settings = ctx.settings
    config = load_project_config(repo, base_sha)
    tasks_path = settings.tasks or config.tasks
    workdir = settings.results_path / f"{base_sha[:12]}-{head[:12]}{'-patched' if proof else ''}"
    cache = _results_store(ctx, repo)
    if settings.merge is not None:  # a matrix's aggregate job: where its evaluation finishes
        merged = _merged_matrix(settings, settings.merge, workdir / "results")
        if merged.stopped:
            return merged
        return replace(merged, history=_keep_history(ctx, cache, merged.manifest, merged.summary))
    shutil.rmtree(workdir / "tasks", ignore_errors=True)
    tasks_dir = _export_tasks(repo, base_sha, tasks_path.strip("/"), workdir / "tasks")
    adaptive = settings.repeats == "auto" and proof is None  # a proof has no base arm to decide on
    request = ExperimentRequest(
        base=base_sha,
        head=head,
        tasks_dir=tasks_dir,
        conditions=conditions,
        repeats=settings.max_repeats if settings.repeats == "auto" else settings.repeats,
        adaptive=adaptive,
        seed=settings.seed,
        source=source,
        patch=proof or settings.patch,
        max_runs=settings.max_runs,
        skip_base_from=None if refresh else settings.skip_base_from,
        refresh=refresh,
        config_arms=True,
        pass_threshold=settings.default_threshold,
    )
    deps = Deps(
        repo=repo,
        workdir=workdir / "results",
        cache=cache,
        save_cache=trusted and proof is None,
        image_base=ACTION_SANDBOX_BASE,
        job_summary=None if proof else ctx.runtime.append_summary,
    )
    try:
        done = evaluate(request, settings.options, deps)
    except SelftestFailed as exc:  # no agent ran: the scorecard says why, with the command's output
        return _selftest_matrix(ctx, deps.workdir, exc)
    if done is None:
        raise ConfigError(
            "the checkout shows no instruction-file change although GitHub lists one",
            hint="check that `.docdelta.yml` on the base branch does not exclude the changed files",
        )
    notes: list[str] = []
    if done.reused is not None:
        reuse = done.reused
        notes.append(
            f"**From cache:** the `{reuse.condition}` arm ({reuse.runs} runs) was reused from the results "
            f"store (key `{reuse.digest[:12]}`, run on `{reuse.source_commit[:12]}`); other arms ran now."
        )
        ctx.say(f"docdelta: {reuse.condition} arm reused from cache ({reuse.runs} runs)")
    if done.saved:
        ctx.say(f"docdelta: base arm saved to the results store ({settings.results_store.kind})")
    # The manifest's `repo` is the checkout's directory (`<repo>` of the result paths; on a
    # runner often just `workspace`); the scorecard names the repository as GitHub does.
    summary = done.summary.model_copy(update={"repo": settings.github.repository})
    manifest = done.experiment.manifest
    history = ""
    if not done.report.stopped and settings.options.shard is None and proof is None and not refresh:
        history = _keep_history(ctx, deps.cache, manifest, summary)
    cell_dir = partial(done.store.cell_dir, manifest.repo)
    results = list(done.report.results)
    return _Matrix(
        summary,
        notes,
        done.report.stopped,
        done.cost_usd,
        results,
        cell_dir,
        manifest,
        tasks_dir,
        deps.workdir,
        history,
    )


def _results_store(ctx: _Context, repo: Repo) -> ArmStore | None:
    """The `results-store` backend. The fork-safe workflow checks out with
    `persist-credentials: false`: on a private repository the results branch is then read
    with the workflow's token."""
    settings, auth = ctx.settings, None
    if settings.results_store.kind == "branch":
        auth = token_auth(repo.root, settings.github.server_url, settings.github_token.get_secret_value())
    return open_store(settings.results_store.kind, settings.results_store.location, repo.root, auth)


def _history(ctx: _Context, cache: ArmStore | None) -> History:
    """The history in the results store (the data branch included), else in the results path."""
    if cache is not None:
        return History(cache, HISTORY_DIR)
    return History.at(ctx.settings.results_path / HISTORY_DIR)


def _keep_history(ctx: _Context, cache: ArmStore | None, manifest: Manifest, summary: Summary) -> str:
    """Record the finished evaluation and its head files' receipts, then the comment's history
    section. A same-repository PR writes the data branch (its author may push anyway); a
    fork's run does not (the fork-safe workflow's token is read-only). A store that refuses
    the write (a token without `contents: write`) costs the record, never the evaluation: a
    warning says so."""
    history = _history(ctx, cache)
    record = record_of(manifest, summary, pr=ctx.event.pr_number)
    saved = False
    if ctx.event.is_fork and ctx.settings.results_store.kind == "branch":
        ctx.say(f"docdelta: {_FORK_UNRECORDED}")
    else:
        try:
            history.append(record)  # False when an earlier run recorded it: kept either way
            saved = True
        except InfraError as exc:
            why = ctx.redact(action_words(str(exc)))
            ctx.runtime.annotate("warning", f"this evaluation was not recorded in the history: {why}")
    head = next((c.files for c in manifest.conditions if c.name == HEAD), {})
    heads = [(f.path, head.get(f.path)) for f in summary.changed]
    return comment_section(history, heads, record, saved=saved, policy=ctx.settings.fail_on)


_FORK_UNRECORDED = (
    "a fork's evaluation is not recorded on the data branch (the fork-safe workflow's token may "
    "not write; its head gets no receipt there)"
)


def _selftest_matrix(ctx: _Context, workdir: Path, exc: SelftestFailed) -> _Matrix:
    """The scorecard of a run stopped by a failed selftest: no runs, no verdict, and the
    failed legs' output under *Grading failures* (the workdir keeps the reports)."""
    store = ResultStore(workdir)
    manifest, detection = store.read_manifest(), store.read_detection()
    if manifest is None or detection is None:
        raise exc
    summary = scorecard(store, manifest, detection, [])
    if not summary.grading_failures:  # a selftest whose tests ran and said the task is wrong
        raise exc
    ctx.say(f"docdelta: {exc.message.splitlines()[0]}")
    note = "**Selftest failed:** no agent ran; fix the environment or the task, then rerun."
    summary = summary.model_copy(update={"repo": ctx.settings.github.repository})
    return _Matrix(
        summary, [note], None, 0.0, [], partial(store.cell_dir, manifest.repo), manifest, None, workdir
    )


def _files_url(settings: ActionSettings, pr_number: int | None) -> str | None:
    """The PR's "Files changed" tab."""
    if pr_number is None:
        return None
    return f"{settings.github.server_url.rstrip('/')}/{settings.github.repository}/pull/{pr_number}/files"


def _diff_links(settings: ActionSettings, pr_number: int | None, summary: Summary) -> dict[str, str]:
    """Each changed instruction file's diff in the PR's "Files changed" tab (GitHub anchors a
    file's diff as `diff-` + the sha256 of its path)."""
    files = _files_url(settings, pr_number)
    if files is None:
        return {}
    return {f.path: f"{files}#diff-{sha256_hex(f.path.encode())}" for f in summary.changed}


REPORT_FILE = "report.html"
"""The HTML report's name in `results-path`, which the workflow uploads as an artifact."""


def _write_report(settings: ActionSettings, matrix: _Matrix) -> Path:
    """The HTML report (every run's transcript, answer and rulings) beside the results, its
    links to run files relative to it, so the uploaded artifact opens as one page."""
    path = settings.results_path / REPORT_FILE
    html = render_html(matrix.summary, matrix.results, cell_dir=matrix.cell_dir, link_root=path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path


def _run_and_report(
    ctx: _Context, repo: Repo, base_sha: str, head: str, provenance: str, files: list[PrFile]
) -> ActionResult:
    settings = ctx.settings
    trusted = settings.results_store.kind == "directory"  # a PR run never writes the shared branch
    matrix = _run_matrix(ctx, repo, base_sha, head, settings.conditions, settings.source, trusted)
    summary = matrix.summary
    if settings.options.shard is not None:
        # One job of a matrix: the aggregate job merges every shard and posts once.
        ctx.say(f"docdelta: shard {settings.options.shard} done; `docdelta merge` the shards' results")
        title = f"shard {settings.options.shard} done"
        return ActionResult(Activity.evaluate, None, title, {Output.results_path: str(settings.results_path)})
    decision = stats.gate(summary.verdict, settings.fail_on, refused=summary.verdict_refused)
    decision = thresholds.with_thresholds(decision, summary)
    conclusion = Conclusion(decision.conclusion)
    # the verdict's statistical reason is in the comment's statistics fold, not here; a
    # blocking pass threshold is not, so the Gate line names it
    gate = f"**Gate** (`fail-on: {settings.fail_on}`): {conclusion.value} — {fmt_verdict(summary.verdict)}"
    if blocked := thresholds.gate_reason(summary):
        gate += f"; {blocked}"
    notes = [gate, *matrix.notes]
    if provenance:
        notes.append(provenance)
    if matrix.stopped:
        notes.append(f"**Incomplete:** the matrix stopped early ({matrix.stopped}); re-run to resume.")
    links = _diff_links(settings, ctx.event.pr_number, summary)
    report = _write_report(settings, matrix)
    ctx.say(f"docdelta: HTML report written to {report}")
    body = render_comment_markdown(
        summary,
        diff_links=links,
        report_url=settings.report_url,
        artifacts_url=f"{settings.github.run_url}#artifacts",
        files_url=_files_url(settings, ctx.event.pr_number),
        max_runs=settings.max_runs,
    )
    body += "\n" + "\n\n".join(notes)
    if matrix.history:
        body += f"\n\n{matrix.history}"
    sections, extra_cost, suggested = _loop_sections(ctx, repo, base_sha, head, matrix, files)
    footer = (
        f"\n\n[Full report and logs]({settings.github.run_url}) · every transcript: `{REPORT_FILE}` in the "
        f"run's [artifacts]({settings.github.run_url}#artifacts)\n"
    )

    scorecard = body

    def composed(suggestion: str | None) -> str:  # all of it redacted: a grading failure quotes the tests
        return ctx.redact(scorecard + "".join(f"\n\n{s}" for s in [suggestion, *sections] if s) + footer)

    body = composed(suggested.section)
    outputs = _outputs(summary, matrix.cost_usd + extra_cost, settings)
    if settings.comment:
        review = suggested.review
        relinked = None if review is None else lambda url: composed(review(url))
        body = _post_comment(ctx, body, relinked, outputs)
    ctx.runtime.append_summary(body)
    kind = summary.verdict.kind if summary.verdict else "no verdict"
    delta = summary.head_vs_base.value
    title = f"{kind.replace('_', ' ')}: head - base {delta:+.2f}" if delta is not None else kind
    if summary.broken:
        failed = sum(summary.faults.values())
        title = f"no verdict: the evaluation is broken ({failed} runs failed for the harness's reasons)"
        if not matrix.results and summary.grading_failures:
            title = "no verdict: the hidden tests could not run (selftest failed; see Grading failures)"
    notes_on_lines = line_annotations(summary.instruction_usage, added_lines(files), alpha=summary.alpha)
    outputs[Output.check_url] = ctx.publish(conclusion, title, body, notes_on_lines)
    ctx.say(f"docdelta: {conclusion.value}: {decision.reason}")
    return ActionResult(Activity.evaluate, conclusion, title, outputs)


def _post_comment(
    ctx: _Context, body: str, relinked: Callable[[str], str] | None, outputs: dict[str, str]
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


def _loop_sections(
    ctx: _Context, repo: Repo, base_sha: str, head: str, matrix: _Matrix, files: list[PrFile]
) -> tuple[list[str], float, Published]:
    """The `audit` input's folded section, what the patched run cost, and the `suggest`
    input's section with its review comment still to post (docdelta.action.suggest_loop.Published)."""
    settings = ctx.settings
    if not (settings.suggest or settings.audit):
        return [], 0.0, Published(None)
    if matrix.tasks_dir is None or matrix.stopped or matrix.summary.broken:
        why = "a matrix's aggregate job" if matrix.tasks_dir is None else "an incomplete or broken run"
        ctx.say(f"docdelta: no suggest/audit section after {why}")
        if settings.suggest:  # it proved nothing: only an older head's review comment goes
            _publish(ctx, None, [], settled=False)
        return [], 0.0, Published(None)
    sections: list[str] = []
    spent: list[float] = []
    config = load_project_config(repo, base_sha)
    suggested = Published(None)
    if settings.suggest:
        suggested = _suggest_section(ctx, repo, (base_sha, head), config, matrix, files, spent)
    if settings.audit:
        tasks_path = settings.tasks or config.tasks
        sections.append(
            audit_section(
                repo,
                [base_sha, head],
                config,
                matrix.tasks_dir,
                tasks_path,
                [matrix.results_dir],
            )
        )
    return sections, sum(spent), suggested


def _ask_model(
    ctx: _Context,
    repo: Repo,
    matrix: _Matrix,
    config: ProjectConfig,
    spent: list[float],
    drafted: Suggestion,
    tasks: Mapping[str, Task],
) -> ModelDraft | str:
    """`suggest-model`'s draft of what `drafted` drafts, or what the comment says instead:
    never the reply itself, and a failed call's detail only in the log (redacted of the key)."""
    settings = ctx.settings
    model = settings.suggest_model or ""
    who = f"{settings.suggest_provider}/{model}"
    try:
        got = draft_for(
            drafted, repo, matrix.manifest, matrix.results, tasks,
            provider=settings.suggest_provider, model=model,
            environ=_draft_environ(settings, config), base_url=settings.suggest_base_url,
        )  # fmt: skip
    except DraftRefused as exc:  # our words, never the reply's
        ctx.say(f"docdelta: suggest: {exc.message}")
        return f"{who}'s reply was refused: {exc.message.removeprefix(REFUSED)}"
    except DocdeltaError as exc:
        ctx.say(f"docdelta: suggest: the model's draft failed: {exc}")
        return f"the call to {who} failed (the job's log says why)"
    spent.append(got.cost_usd or 0.0)
    ctx.say(f"docdelta: suggest: {who} drafted a patch ({got.added_lines} lines added); proving it")
    return got


def _draft_environ(settings: ActionSettings, config: ProjectConfig) -> Mapping[str, str]:
    """Where the draft's gateway reads its key: the `api-key` input when that key is for the
    draft's API (`provider`, else the agent's), never another API's; else the step's env."""
    options = settings.options
    key = options.api_key.get_secret_value().strip() if options.api_key is not None else ""
    if key and (options.provider or agent_upstream(options.agent)) == settings.suggest_provider:
        return {upstream_of(config.gateway, settings.suggest_provider).key_from: key}
    return os.environ


def _suggest_section(
    ctx: _Context,
    repo: Repo,
    refs: tuple[str, str],
    config: ProjectConfig,
    matrix: _Matrix,
    files: list[PrFile],
    spent: list[float],
) -> Published:
    """`suggest: true`: draft, prove with a `head,patched` run (its cost appended to `spent`),
    then the scorecard's section and the sticky review comment (docdelta.action.suggest_loop)."""
    settings = ctx.settings
    assert matrix.tasks_dir is not None
    base_sha, head = refs

    def prove(patch: Path) -> tuple[Manifest, list[RunResult]]:
        proof = _run_matrix(
            ctx, repo, base_sha, head, (HEAD, PATCHED), settings.source, trusted=False, proof=patch
        )
        spent.append(proof.cost_usd)
        if proof.stopped or proof.summary.broken:
            raise InfraError(f"the patched run did not finish: {proof.stopped or proof.summary.broken}")
        return proof.manifest, proof.results

    proven, settled = None, True
    try:
        ask = partial(_ask_model, ctx, repo, matrix, config, spent) if settings.suggest_model else None
        proven = prove_suggestion(
            repo, matrix.manifest, matrix.results, matrix.tasks_dir, settings.results_path, prove, ask
        )
    except DocdeltaError as exc:
        ctx.say(f"docdelta: suggest: no suggestion offered: {exc}")
        settled = False
    else:
        if proven is None:
            ctx.say("docdelta: suggest: head missed no gold item a patch could add: nothing to prove")
        else:
            ctx.say(f"docdelta: suggest: the patched run is in {settings.results_path}")
    return _publish(ctx, proven, files, settled)


def _publish(ctx: _Context, proven: Proven | None, files: list[PrFile], settled: bool) -> Published:
    """`publish_suggestion` on this PR's sticky review comment (none outside a PR)."""
    settings, number = ctx.settings, ctx.event.pr_number
    target = None
    if number is not None:
        mark = suggestion_marker(settings.config_id)
        target = ReviewTarget(ctx.port, number, ctx.event.head_sha, mark, post=settings.comment)
    return publish_suggestion(
        proven,
        diff_hunks(files),
        target,
        ctx.redact,
        say=lambda message: ctx.say(f"docdelta: {message}"),
        warn=lambda message: ctx.runtime.annotate("warning", ctx.redact(message), title="docdelta"),
        settled=settled,
    )


def _outputs(summary: Summary, cost: float, settings: ActionSettings) -> dict[str, str]:
    def num(value: float | None) -> str:
        return "" if value is None else f"{value:.4f}"

    return {
        Output.verdict: summary.verdict.kind if summary.verdict else "none",
        Output.head_vs_base: num(summary.head_vs_base.value),
        Output.head_vs_none: num(summary.head_vs_none.value),
        Output.cost_usd: f"{cost:.4f}",
        Output.results_path: str(settings.results_path),
    }


# ------------------------------------------------------------------- refresh
def _refresh(ctx: _Context) -> ActionResult:
    """Run only the base arm on this commit and store it for the PRs that will branch from it."""
    settings = ctx.settings
    if settings.results_store.kind == "none":
        return ActionResult(
            Activity.skip, title="results-store is none: there is nowhere to keep base results"
        )
    repo = Repo(settings.github.workspace)
    sha = _local(repo, settings.github.sha or ctx.event.head_sha, "pushed")
    docs = instruction_files(repo, sha, matcher(load_project_config(repo, sha)))
    paths = sorted({*docs.files, *docs.symlinks})
    if not paths:
        return ActionResult(
            Activity.skip, title=f"no instruction files at {sha[:12]}: no base arm to refresh"
        )
    # A stand-in head without any instruction file, so the experiment has a change to plan
    # around; only the base arm runs, and only its results are stored.
    bare = overlay_commit(repo.root, sha, dict.fromkeys(paths), "docdelta: no instruction files")
    matrix = _run_matrix(ctx, repo, sha, bare, (BASE,), BASE, trusted=True, refresh=True)
    body = render_markdown(matrix.summary) + "\n" + "\n\n".join(matrix.notes) + "\n"
    ctx.runtime.append_summary(body)
    return ActionResult(
        Activity.refresh,
        title=f"base arm refreshed on {sha[:12]}",
        outputs=_outputs(matrix.summary, matrix.cost_usd, settings),
    )


# -------------------------------------------------------------------- ablate
_TRUSTED_EVENTS = ("pull_request_target", "workflow_run")
"""Events whose job holds secrets for an untrusted PR: an ablation there is refused."""


def _ablate(ctx: _Context) -> ActionResult:
    """`docdelta ablate` on the event's commit with the job's agent, sandbox, tasks, repeats
    and seed: the same `ablation.ablate` the CLI calls. The per-section table goes to the job
    summary and the `ablation` output; no comment and no check (an ablation is no gate)."""
    settings = ctx.settings
    assert settings.ablate is not None  # `choose` picked ablate
    if settings.repeats == "auto":
        raise ConfigError(
            "input 'repeats': an ablation runs a fixed design, but `repeats` is auto",
            hint="set `repeats:` to a number: runs per side of each effect, as one at a time (e.g. 4)",
        )
    for name, value in (
        ("plan", settings.plan),
        ("shard", settings.options.shard),
        ("merge", settings.merge),
        ("receipt", settings.receipt),
    ):
        if value:
            raise ConfigError(
                f"input '{name}' cannot be combined with `ablate`: an ablation runs in one job and "
                "checks nothing",
                hint=f"remove `{name}` from the ablation step (or `ablate` from the matrix's steps)",
            )
    if ctx.event.event in _TRUSTED_EVENTS:
        raise ConfigError(
            f"input 'ablate' on {ctx.event.event}: the ablated commit's tasks and .docdelta.yml would "
            "run beside the key in a job that exists to keep a PR's files away from it",
            hint="ablate on workflow_dispatch or push (examples/workflows/docdelta-ablate.yml)",
        )
    repo = Repo(settings.github.workspace)
    sha = _local(repo, ctx.event.head_sha, "ablated")
    workdir = settings.results_path / f"ablate-{sha[:12]}"
    tasks_path = (settings.tasks or load_project_config(repo, sha).tasks).strip("/")
    shutil.rmtree(workdir / "tasks", ignore_errors=True)
    request = AblationRequest(
        ref=sha,
        file=settings.ablate,
        tasks_dir=_export_tasks(repo, sha, tasks_path, workdir / "tasks"),
        unit=settings.ablate_unit,
        repeats=settings.repeats,
        seed=settings.seed,
        max_runs=settings.max_runs,
        file_named="input 'ablate':",
    )
    deps = Deps(repo=repo, workdir=workdir / "results", image_base=ACTION_SANDBOX_BASE)
    try:
        report, done = ablate(request, settings.options, deps)
    except PlanTooLarge as exc:
        raise ConfigError(
            f"input 'max-runs': {exc.message}", hint="lower `repeats`, or raise `max-runs` to run it"
        ) from None
    if done.summary.broken:  # the runs measured the harness's failure: no effects are shown
        raise InfraError(
            f"no ablation: {done.summary.broken}", hint="the runs' transcripts are in results-path"
        )
    ran, reused = done.report.ran, done.report.reused
    lines = [
        render_ablation(report),
        "",
        f"Results: `{_in_workspace(settings, deps.workdir / ABLATION_FILE)}` ({ran} ran, {reused} reused).",
    ]
    if done.report.stopped:
        lines.append(f"**Stopped early:** {done.report.stopped}; the table holds the runs done so far.")
    ctx.runtime.append_summary(ctx.redact("\n".join(lines)))
    ctx.say(f"docdelta: ablation of {settings.ablate}: {ran} ran, {reused} reused")
    sections = f"{len(report.sections)} sections, {report.runs_done} runs"
    title = f"ablation of {settings.ablate} at {sha[:12]}: {sections}"
    outputs: dict[str, str] = {
        Output.ablation: report.model_dump_json(),
        Output.cost_usd: f"{done.cost_usd:.4f}",
        Output.results_path: str(settings.results_path),
    }
    return ActionResult(Activity.ablate, None, title, outputs)


def _in_workspace(settings: ActionSettings, path: Path) -> Path:
    """`path` as the workflow names it (relative to the checkout) when it is inside it."""
    return (
        path.relative_to(settings.github.workspace)
        if path.is_relative_to(settings.github.workspace)
        else path
    )


# ---------------------------------------------------------------------- main
def _trust_extra_ca(bundle: Path, results: Path) -> None:
    """Requests (PyGithub) and httpx read one CA file: write system/certifi roots + the extra one."""
    current = os.environ.get("REQUESTS_CA_BUNDLE") or certifi.where()
    combined = results / "ca-bundle.pem"
    combined.parent.mkdir(parents=True, exist_ok=True)
    combined.write_bytes(Path(current).read_bytes() + b"\n" + bundle.read_bytes())
    os.environ["REQUESTS_CA_BUNDLE"] = os.environ["SSL_CERT_FILE"] = str(combined)


def main(env: Mapping[str, str] | None = None, stream: TextIO | None = None) -> int:
    """The container's entry point (`docdelta action`): build the real clients, then `action()`."""
    env = os.environ if env is None else env
    runtime = ActionsRuntime.from_env(env, stream)
    for name in SECRET_INPUTS:
        secret = env.get(input_variable(name), "")
        if secret.strip():
            runtime.mask(secret.strip())
    try:
        event = load_event(env.get("GITHUB_EVENT_NAME", ""), Path(env.get("GITHUB_EVENT_PATH", "")))
        token = env.get(input_variable("github-token"), "").strip()
        port = PyGithubPort.from_actions_env(token, env)
    except DocdeltaError as exc:
        runtime.annotate("error", str(exc), title="docdelta")
        return exc.exit_code
    try:
        settings = ActionSettings.from_env(env)
    except ConfigError as exc:
        return _bad_settings(exc, env, event, port, runtime)
    if settings.options.extra_ca is not None:
        _trust_extra_ca(settings.options.extra_ca, settings.results_path)
    return action(settings, event, port, runtime).exit_code


def _bad_settings(
    exc: ConfigError, env: Mapping[str, str], event: EventContext, port: GitHubPort, runtime: ActionsRuntime
) -> int:
    """The inputs are wrong: say which in the log and, when there is a commit, in a failed check
    (for an ablation, which is no gate, in the job summary instead, as `_fail` does)."""
    secrets = [env.get(input_variable(n), "").strip() for n in SECRET_INPUTS]
    redact = _redactor(secrets)
    text = redact(action_words(str(exc)))
    runtime.annotate("error", text, title="docdelta")
    name = env.get(input_variable("check-name"), "").strip() or DEFAULT_CHECK_NAME
    hint = f"\n\n**What to do:** {redact(action_words(exc.hint))}" if exc.hint else ""
    message = action_words(exc.message)
    first = redact(message).splitlines()[0] if message else type(exc).__name__
    try:
        if env.get(input_variable("ablate"), "").strip():
            runtime.append_summary(f"**docdelta could not run the ablation:** {text}\n")
        else:
            ref = port.publish_check(
                CheckReport(
                    name=name,
                    head_sha=event.head_sha,
                    conclusion=Conclusion.failure,
                    title=f"docdelta could not run: {first}"[:200],
                    summary=redact(message) + hint,
                )
            )
            if ref.note:
                runtime.annotate("warning", redact(ref.note), title="docdelta")
    except DocdeltaError as publish_exc:
        runtime.stream.write(f"docdelta: could not publish the check either: {redact(str(publish_exc))}\n")
    # The same outputs as any other failed run, so a later step can report or branch on them.
    failed = {Output.activity: Activity.error, Output.conclusion: Conclusion.failure, Output.error: first}
    for output, value in failed.items():
        runtime.set_output(output, value)
    return exc.exit_code
