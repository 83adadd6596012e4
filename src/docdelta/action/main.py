"""The GitHub Action's entry (`docdelta action`): settings and event in, one activity, its result out.

`main()` is thin glue: it masks the secrets, parses the event and the settings, and builds
the one real GitHub client; `action()` receives them, builds the run's other client (the
results store, through `docdelta.wiring`, on first use) and routes the event to its activity
(`activity.choose`), one module each: `evaluate` (a PR: comment, check, outputs), `receipt`,
`refresh`, `ablate`; `publish` posts what they conclude and every failure. The tests drive
`action()` against the fake GitHub server with the same code the image runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TextIO

import certifi

from docdelta.action.ablate import ablate_commit
from docdelta.action.activity import Activity, apply_handoff, choose, read_only_fork_token, trusted_actor
from docdelta.action.evaluate import evaluate_pr
from docdelta.action.publish import (
    ActionContext,
    ActionResult,
    bad_settings,
    fail,
    read_only_fork,
    redactor,
    set_outputs,
)
from docdelta.action.receipt import check_pr_receipts
from docdelta.action.refresh import refresh_base_arm
from docdelta.action.settings import SECRET_INPUTS, ActionSettings, Output, input_variable
from docdelta.errors import ConfigError, DocdeltaError, InfraError
from docdelta.git import Repo
from docdelta.github.actions import ActionsRuntime
from docdelta.github.events import EventContext, load_event
from docdelta.github.port import GitHubPort
from docdelta.github.pygithub import ApiError, PyGithubPort
from docdelta.wiring import build_results_store


def action(
    settings: ActionSettings,
    event: EventContext,
    port: GitHubPort,
    runtime: ActionsRuntime,
) -> ActionResult:
    """Do what the event asks, publish the result, set the outputs. Never raises a DocdeltaError."""
    store = cache(
        lambda: build_results_store(
            settings.results_store.kind,
            settings.results_store.location,
            Repo(settings.github.workspace).root,
            server_url=settings.github.server_url,
            token=settings.github_token.get_secret_value(),
        )
    )
    ctx = ActionContext(settings, event, port, runtime, redactor(settings.secrets()), store)
    try:
        result = _route(ctx)
    except ApiError as exc:
        result = read_only_fork(ctx) if read_only_fork_token(ctx.event, exc) else fail(ctx, exc)
    except DocdeltaError as exc:
        result = fail(ctx, exc)
    except Exception as exc:  # a bug: still no traceback in the PR, and a check that says so
        result = fail(
            ctx,
            InfraError(
                f"internal error ({type(exc).__name__}: {exc})",
                hint="this is a docdelta bug; please report it with the workflow log",
            ),
        )
    set_outputs(ctx, result)
    return result


def _route(ctx: ActionContext) -> ActionResult:
    """The event's activity (`activity.choose`), once the event names its commit and PR."""
    event, settings = ctx.event, ctx.settings
    if event.event == "workflow_dispatch" and settings.github.sha:
        ctx.event = event.model_copy(update={"head_sha": settings.github.sha})  # the payload has no sha
    if settings.pr_handoff is not None and event.event == "workflow_run":
        ctx.event = apply_handoff(event, settings.pr_handoff)
    activity, why = choose(ctx.event, settings)
    ctx.say(f"docdelta: {activity}: {why}")
    if activity is Activity.evaluate:
        return evaluate_pr(ctx)
    if activity is Activity.receipt:
        return check_pr_receipts(ctx)
    if activity in (Activity.refresh, Activity.ablate):
        # No PR, so no approval label: the event's actor must be trusted.
        if not trusted_actor(settings, ctx.event, ctx.port):
            why = f"@{ctx.event.sender} has no write access and is not in `allowed-actors`: no agent runs"
            ctx.say(f"docdelta: skip: {why}")
            return ActionResult(Activity.skip, title=why, outputs={Output.error: why})
        return refresh_base_arm(ctx) if activity is Activity.refresh else ablate_commit(ctx)
    return ActionResult(activity=Activity.skip, title=why)


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
        return bad_settings(exc, env, event, port, runtime)
    if settings.options.extra_ca is not None:
        _trust_extra_ca(settings.options.extra_ca, settings.results_path)
    return action(settings, event, port, runtime).exit_code
