"""The Action's settings: every input and `GITHUB_*` variable, parsed into one pydantic object.

The runner hands a container action each input as an `INPUT_<NAME>` variable it sets
itself, spelled as the runner spells it (`input_variable`: upper-cased, spaces as `_`,
hyphens kept, so `api-key` is `INPUT_API-KEY`), and `ActionSettings.from_env` reads
exactly those plus the runner's `GITHUB_*` variables. How to run the matrix (agent,
sandbox, limits, key, verdict) is `options`, the same `RunOptions` the CLI builds from its
flags: both hand it to `evaluation.evaluate`. Anything wrong becomes one `ConfigError`
that names the input (`repeats`, `fail-on`, ...) as the workflow author wrote it, never a
pydantic dump.

(design.md puts action settings in config.py; they live here so the project config,
which is read from the base commit, and the workflow's inputs stay apart.)

Secrets (`github-token`, `api-key`) are `SecretStr`: their repr is `**********`, so a
settings object can be logged or put in an error without leaking them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from docdelta.errors import ConfigError
from docdelta.evaluation import RunOptions
from docdelta.experiment.shard import GITHUB_MAX_JOBS
from docdelta.results.grades import JudgeProvider
from docdelta.scorecard.models import GatePolicy
from docdelta.tasks.models import PassThreshold
from docdelta.validate import (
    ACTION_MAX_REPEATS,
    DEFAULT_MAX_PARALLEL,
    DEFAULT_MAX_REPEATS,
    MAX_RUNS_WITHOUT_CONFIRMATION,
    POOL_SKIP_BASE_FROM,
    AblationUnit,
)
from docdelta.vocabulary import BASE, DEFAULT_CONDITIONS, HEAD

DEFAULT_CHECK_NAME = "docdelta"
DEFAULT_APPROVE_LABEL = "docdelta:approved"

_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})


class StoreSpec(BaseModel):
    """Where base-arm results are kept across PRs: nowhere, a directory, or a data branch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["none", "directory", "branch"] = "none"
    location: str = ""

    @classmethod
    def parse(cls, text: str) -> StoreSpec:
        """`none`, `dir:PATH` or `branch:NAME` (the `results-store` input)."""
        text = text.strip()
        if text in ("", "none"):
            return cls()
        kind, sep, location = text.partition(":")
        kinds = {"dir": "directory", "directory": "directory", "branch": "branch"}
        if not sep or kind not in kinds or not location.strip():
            raise ValueError(f"expected 'none', 'dir:PATH' or 'branch:NAME', got {text!r}")
        location = location.strip()
        if kinds[kind] == "branch" and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}", location):
            raise ValueError(f"branch name {location!r} must be letters, digits, '.', '_', '/', '-'")
        return cls(kind=kinds[kind], location=location)


class GitHubEnv(BaseModel):
    """The runner's own variables (always set inside GitHub Actions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str = Field(pattern=r"^[^/\s]+/[^/\s]+$")
    event_name: str = Field(min_length=1)
    event_path: Path
    workspace: Path
    sha: str = ""
    api_url: str = "https://api.github.com"
    server_url: str = "https://github.com"
    run_id: str = ""

    @property
    def run_url(self) -> str:
        """The workflow run's page: where the job summary (the full report) is."""
        base = f"{self.server_url.rstrip('/')}/{self.repository}"
        return f"{base}/actions/runs/{self.run_id}" if self.run_id else f"{base}/actions"


class ActionSettings(BaseModel):
    """Everything the Action was asked to do, validated before anything runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    github_token: SecretStr
    options: RunOptions
    tasks: str | None = Field(default=None, description="task directory in the repo; default: project config")
    conditions: tuple[str, ...] = DEFAULT_CONDITIONS
    repeats: Annotated[int, Field(ge=1, le=ACTION_MAX_REPEATS)] | Literal["auto"] = Field(
        default="auto", description="runs per arm and task, or auto: rounds until decided, up to max_repeats"
    )
    max_repeats: int = Field(default=DEFAULT_MAX_REPEATS, ge=2, le=ACTION_MAX_REPEATS)
    seed: int = 0
    source: str = Field(default=HEAD, min_length=1, description="source commit: head, base or a SHA")
    patch: Path | None = Field(default=None, description="diff applied to head's instruction files (patched)")
    fail_on: GatePolicy = "regression"
    pass_threshold: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="share of a task's head runs that must pass, for tasks that set none",
    )
    pass_k: int = Field(default=1, ge=1, description="with pass_threshold: judge pass^k, not the pass rate")
    comment: bool = True
    allowed_actors: tuple[str, ...] = Field(
        default=(),
        description="logins besides writers whose events may start an evaluation; '*': anyone",
    )
    check_name: str = Field(default=DEFAULT_CHECK_NAME, min_length=1, max_length=100)
    report_url: str | None = Field(
        default=None,
        pattern=r"^https?://\S+$",
        description="where the workflow publishes report.html; the comment's task rows link into it",
    )
    approve_label: str = Field(default=DEFAULT_APPROVE_LABEL, min_length=1, max_length=50)
    results_store: StoreSpec = StoreSpec()
    skip_base_from: int = Field(
        default=POOL_SKIP_BASE_FROM,
        ge=1,
        description="run no base arm once the results store pools this many earlier base runs per task",
    )
    results_path: Path
    pr_handoff: Path | None = Field(default=None, description="pr.json from the pull_request job")
    merge: Path | None = Field(
        default=None, description="directory of downloaded shard results: merge and post, run nothing"
    )
    max_runs: int = Field(
        default=MAX_RUNS_WITHOUT_CONFIRMATION, ge=1, description="refuse a plan of more runs than this"
    )
    plan: bool = Field(
        default=False, description="the plan job of a matrix: write the job matrix to the `plan` output"
    )
    max_parallel: int = Field(
        default=DEFAULT_MAX_PARALLEL, ge=1, le=GITHUB_MAX_JOBS, description="jobs of the matrix at once"
    )
    suggest: bool = Field(
        default=False,
        description="draft a fix for what head missed, run it as head,patched (more runs) and offer it "
        "in the comment with its measured effect, only if it raised a task",
    )
    suggest_model: str | None = Field(
        default=None,
        description="with suggest: the model asked (once, through a loopback gateway that holds the key) "
        "for a draft of its own, which is then the one proven and offered; refused or failed: the "
        "deterministic draft is, and the section says so",
    )
    suggest_provider: JudgeProvider = Field(default="openai", description="suggest-model's API")
    suggest_base_url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="suggest-model's API URL (default: .docdelta.yml's upstream, else the provider's)",
    )
    audit: bool = Field(default=False, description="the task audit's findings, folded in the comment")
    ablate: str | None = Field(
        default=None,
        description="instruction file (repository path) to ablate instead of evaluating: `docdelta ablate`",
    )
    ablate_unit: AblationUnit = AblationUnit.heading
    receipt: bool = Field(
        default=False,
        description="run no agent: pass only if each changed instruction file's head content has a "
        "passing evaluation (a receipt) in the results store",
    )
    github: GitHubEnv

    @field_validator("conditions")
    @classmethod
    def _known_conditions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if BASE not in value or HEAD not in value:
            raise ValueError("must include base and head (the PR is judged head vs base)")
        if len(set(value)) != len(value):
            raise ValueError("lists a condition twice")
        return value

    @field_validator("ablate")
    @classmethod
    def _repository_path(cls, value: str | None) -> str | None:
        """A path as instruction files are keyed (`AGENTS.md`, `docs/CLAUDE.md`): inside the repository."""
        if value is None:
            return None
        path = PurePosixPath(value.replace("\\", "/"))
        if path.is_absolute() or ".." in path.parts:
            raise ValueError("must be a relative path inside the repository, without ..")
        return path.as_posix()

    @field_validator("patch")
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a readable file")
        return value

    @property
    def default_threshold(self) -> PassThreshold | None:
        """The `pass-threshold` / `pass-k` inputs as the bar of tasks that set none."""
        if self.pass_threshold is None:
            return None
        return PassThreshold(fraction=self.pass_threshold, k=self.pass_k)

    @property
    def config_id(self) -> str:
        """The sticky comment's marker id: the check name as a slug, so each config has its own."""
        name = re.sub(r"\s*/\s*", "/", self.check_name.strip())
        slug = re.sub(r"[^A-Za-z0-9._/]+", "-", name).strip("-/") or DEFAULT_CHECK_NAME
        return re.sub(r"-{2,}", "-", slug)[:100]

    def secrets(self) -> list[str]:
        """Every secret value, for masking in the log and redacting from anything we post."""
        values = [self.github_token.get_secret_value()]
        if self.options.api_key is not None:
            values.append(self.options.api_key.get_secret_value())
        return [v for v in values if v]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ActionSettings:
        """Parse `INPUT_*` (as the runner sets them) and `GITHUB_*`; a bad value names its input."""
        env = os.environ if env is None else env
        raw = {name: env.get(input_variable(name), "").strip() for name in INPUTS}
        workspace = Path(env.get("GITHUB_WORKSPACE") or Path.cwd())
        try:
            github = GitHubEnv(
                repository=env.get("GITHUB_REPOSITORY", ""),
                event_name=env.get("GITHUB_EVENT_NAME", ""),
                event_path=Path(env.get("GITHUB_EVENT_PATH", "")),
                workspace=workspace,
                sha=env.get("GITHUB_SHA", ""),
                api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
                server_url=env.get("GITHUB_SERVER_URL") or "https://github.com",
                run_id=env.get("GITHUB_RUN_ID", ""),
            )
        except ValidationError as exc:
            field = str(exc.errors()[0]["loc"][0])
            raise ConfigError(
                f"environment variable GITHUB_{field.upper()} is missing or invalid",
                hint="run docdelta's action inside GitHub Actions (the runner sets GITHUB_* variables)",
            ) from None
        options: dict[str, Any] = {"sandbox": "docker"}  # the Action's default
        values: dict[str, Any] = {"github": github, "options": options}
        for name, text in raw.items():
            if text:
                target, _, option = INPUTS[name].partition(".")
                (options if option else values)[option or target] = _convert(name, text, workspace)
        values.setdefault("results_path", workspace / ".docdelta-results")
        needed = ("github-token",) if raw["receipt"].lower() in _TRUE else ("github-token", "agent")
        for name in needed:  # a receipt check runs no agent
            if not raw[name]:
                raise ConfigError(f"input '{name}' is empty", hint=_EMPTY_HINTS[name])
        if raw["suggest-model"] and not values.get("suggest"):
            raise ConfigError(
                f"input 'suggest-model' = {raw['suggest-model']!r} is set, but 'suggest' is not true",
                hint="set `suggest: true` too (the draft is proven by a head,patched run: more runs)",
            )
        if raw["sandbox"] == "none":
            raise ConfigError(
                "input 'sandbox' = 'none': the Action never runs an agent unsandboxed: it would run as "
                "the Action's own user, which can read the API key and the GitHub token from /proc",
                hint="use `sandbox: docker` (the default) or `sandbox: local`",
            )
        if raw["pass-k"] and not raw["pass-threshold"]:
            raise ConfigError(
                f"input 'pass-k' = {raw['pass-k']!r} is set, but 'pass-threshold' is not",
                hint="set `pass-threshold:` too (e.g. 0.8: pass^k must reach 80 %)",
            )
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"][:2] if first["loc"][0] == "options")
            field = field or (str(first["loc"][0]) if first["loc"] else "")
            name = next((k for k, v in INPUTS.items() if v == field), field)
            shown = "(secret)" if name in SECRET_INPUTS else repr(raw.get(name, ""))
            raise ConfigError(
                f"input '{name}' = {shown}: {first['msg'].lower()}",
                hint=f"fix `{name}` in the workflow's `with:` block; see the inputs in action.yml",
            ) from None


INPUTS: dict[str, str] = {
    "github-token": "github_token",
    "agent": "options.agent",
    "agent-command": "options.agent_cmd",
    "model": "options.model",
    "api-key": "options.api_key",
    "provider": "options.provider",
    "tasks": "tasks",
    "conditions": "conditions",
    "repeats": "repeats",
    "max-repeats": "max_repeats",
    "seed": "seed",
    "source": "source",
    "patch": "patch",
    "cap-usd": "options.cap_usd",
    "reserve-usd": "options.reserve_usd",
    "max-turns": "options.max_turns",
    "max-output-tokens": "options.max_output_tokens",
    "infra-retries": "options.infra_retries",
    "rate-limit": "options.rate_limit",
    "fail-on": "fail_on",
    "pass-threshold": "pass_threshold",
    "pass-k": "pass_k",
    "noise-band": "options.noise_band",
    "alpha": "options.alpha",
    "comment": "comment",
    "allowed-actors": "allowed_actors",
    "check-name": "check_name",
    "report-url": "report_url",
    "approve-label": "approve_label",
    "ca-bundle": "options.extra_ca",
    "results-store": "results_store",
    "skip-base-from": "skip_base_from",
    "results-path": "results_path",
    "sandbox": "options.sandbox",
    "allow-network": "options.allow_network",
    "timeout": "options.timeout_s",
    "jobs": "options.jobs",
    "shard": "options.shard",
    "merge": "merge",
    "max-runs": "max_runs",
    "plan": "plan",
    "max-parallel": "max_parallel",
    "pr-handoff": "pr_handoff",
    "suggest": "suggest",
    "suggest-model": "suggest_model",
    "suggest-provider": "suggest_provider",
    "suggest-base-url": "suggest_base_url",
    "audit": "audit",
    "ablate": "ablate",
    "ablate-unit": "ablate_unit",
    "receipt": "receipt",
}
"""Action input name -> settings field (`options.<name>`: a `RunOptions` field); the runner
passes each as `input_variable(name)`. action.yml declares exactly these."""
SECRET_INPUTS = frozenset({"github-token", "api-key"})
_EMPTY_HINTS = {
    "github-token": "pass `github-token: ${{ secrets.GITHUB_TOKEN }}` (the default) or a token of your own",
    "agent": "set `agent:` in the workflow's `with:` block (fake, claude_code, codex, ...)",
}


class Output(StrEnum):
    """Every output the Action writes to `$GITHUB_OUTPUT`; action.yml declares exactly these."""

    activity = "activity"
    conclusion = "conclusion"
    error = "error"
    verdict = "verdict"
    head_vs_base = "head-vs-base"
    head_vs_none = "head-vs-none"
    cost_usd = "cost-usd"
    comment_url = "comment-url"
    check_url = "check-url"
    results_path = "results-path"
    plan = "plan"
    ablation = "ablation"


def input_variable(name: str) -> str:
    """The variable GitHub's runner (and act) sets for input `name` of a container action:
    `INPUT_` + the name upper-cased with spaces as `_`; hyphens stay (`INPUT_API-KEY`)."""
    return "INPUT_" + name.replace(" ", "_").upper()


def _convert(name: str, text: str, workspace: Path) -> Any:
    """The few inputs whose text form is not what pydantic parses."""
    if name in ("conditions", "allowed-actors"):
        return tuple(c.strip() for c in text.split(",") if c.strip())
    if name in ("comment", "allow-network", "plan", "suggest", "audit", "receipt"):
        lowered = text.lower()
        if lowered not in _TRUE | _FALSE:
            raise ConfigError(f"input '{name}' = {text!r} is not a boolean", hint="use true or false")
        return lowered in _TRUE
    if name == "results-store":
        try:
            return StoreSpec.parse(text)
        except ValueError as exc:
            raise ConfigError(
                f"input 'results-store': {exc}", hint="e.g. `branch:docdelta-results`"
            ) from None
    if name in ("results-path", "ca-bundle", "pr-handoff", "patch", "merge"):
        path = Path(text)
        return path if path.is_absolute() else workspace / path
    return text
