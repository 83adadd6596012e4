"""The Action's settings: every input and `GITHUB_*` variable, parsed into one pydantic object.

`action.yml` maps each input explicitly to an `INPUT_<NAME>` variable (underscores, so
a shell can read them too), and `ActionSettings.from_env` reads exactly those plus the
runner's `GITHUB_*` variables. Anything wrong becomes one `ConfigError` that names the
input (`repeats`, `fail-on`, ...) as the workflow author wrote it, never a pydantic dump.

(design.md puts action settings in config.py; they live here so the project config,
which is read from the base commit, and the workflow's inputs stay apart.)

Secrets (`github-token`, `api-key`) are `SecretStr`: their repr is `**********`, so a
settings object can be logged or put in an error without leaking them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from docdelta.errors import ConfigError
from docdelta.models import GatePolicy

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
    agent: str = Field(min_length=1)
    agent_command: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    tasks: str | None = Field(default=None, description="task directory in the repo; default: project config")
    conditions: tuple[str, ...] = ("base", "head", "none")
    repeats: int = Field(default=3, ge=1, le=100)
    seed: int = 0
    cap_usd: float | None = Field(default=None, gt=0)
    fail_on: GatePolicy = "regression"
    noise_band: float = Field(default=0.05, ge=0, lt=1)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    comment: bool = True
    check_name: str = Field(default=DEFAULT_CHECK_NAME, min_length=1, max_length=100)
    approve_label: str = Field(default=DEFAULT_APPROVE_LABEL, min_length=1, max_length=50)
    ca_bundle: Path | None = None
    results_store: StoreSpec = StoreSpec()
    results_path: Path
    sandbox: str = "docker"
    allow_network: bool = Field(
        default=False, description="local sandbox: runs that ask for network get the host network (recorded)"
    )
    timeout_s: float = Field(default=600.0, gt=0)
    pr_handoff: Path | None = Field(default=None, description="pr.json from the pull_request job")
    github: GitHubEnv

    @field_validator("conditions")
    @classmethod
    def _known_conditions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if "base" not in value or "head" not in value:
            raise ValueError("must include base and head (the PR is judged head vs base)")
        if len(set(value)) != len(value):
            raise ValueError("lists a condition twice")
        return value

    @field_validator("ca_bundle")
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a readable file")
        return value

    @property
    def config_id(self) -> str:
        """The sticky comment's marker id: the check name as a slug, so each config has its own."""
        name = re.sub(r"\s*/\s*", "/", self.check_name.strip())
        slug = re.sub(r"[^A-Za-z0-9._/]+", "-", name).strip("-/") or DEFAULT_CHECK_NAME
        return re.sub(r"-{2,}", "-", slug)[:100]

    def secrets(self) -> list[str]:
        """Every secret value, for masking in the log and redacting from anything we post."""
        values = [self.github_token.get_secret_value()]
        if self.api_key is not None:
            values.append(self.api_key.get_secret_value())
        return [v for v in values if v]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ActionSettings:
        """Parse `INPUT_*` (as action.yml maps them) and `GITHUB_*`; a bad value names its input."""
        env = os.environ if env is None else env
        raw = {name: env.get(f"INPUT_{name.upper().replace('-', '_')}", "").strip() for name in INPUTS}
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
        values: dict[str, Any] = {"github": github}
        for name, text in raw.items():
            if text:
                values[INPUTS[name]] = _convert(name, text, workspace)
        values.setdefault("results_path", workspace / ".docdelta-results")
        if "github_token" not in values:
            raise ConfigError(
                "input 'github-token' is empty",
                hint="pass `github-token: ${{ secrets.GITHUB_TOKEN }}` (the default) or a token of your own",
            )
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            name = next((k for k, v in INPUTS.items() if v == field), field)
            shown = "(secret)" if name in SECRET_INPUTS else repr(raw.get(name, ""))
            raise ConfigError(
                f"input '{name}' = {shown}: {first['msg'].lower()}",
                hint=f"fix `{name}` in the workflow's `with:` block; see the inputs in action.yml",
            ) from None


INPUTS: dict[str, str] = {
    "github-token": "github_token",
    "agent": "agent",
    "agent-command": "agent_command",
    "model": "model",
    "api-key": "api_key",
    "tasks": "tasks",
    "conditions": "conditions",
    "repeats": "repeats",
    "seed": "seed",
    "cap-usd": "cap_usd",
    "fail-on": "fail_on",
    "noise-band": "noise_band",
    "alpha": "alpha",
    "comment": "comment",
    "check-name": "check_name",
    "approve-label": "approve_label",
    "ca-bundle": "ca_bundle",
    "results-store": "results_store",
    "results-path": "results_path",
    "sandbox": "sandbox",
    "allow-network": "allow_network",
    "timeout": "timeout_s",
    "pr-handoff": "pr_handoff",
}
"""Action input name -> settings field; the variable is `INPUT_` + the name upper-cased, `-` as `_`."""
SECRET_INPUTS = frozenset({"github-token", "api-key"})


def _convert(name: str, text: str, workspace: Path) -> Any:
    """The few inputs whose text form is not what pydantic parses."""
    if name == "conditions":
        return tuple(c.strip() for c in text.split(",") if c.strip())
    if name in ("comment", "allow-network"):
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
    if name in ("results-path", "ca-bundle", "pr-handoff"):
        path = Path(text)
        return path if path.is_absolute() else workspace / path
    return text
