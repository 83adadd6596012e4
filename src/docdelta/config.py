"""Project config (`.docdelta.yml`) and the YAML-to-model loader that names lines.

The config is read from a commit of the repository, and callers pass the trusted
base ref, never a PR head: a pull request must not be able to change what is
stripped from checkouts or which files count as instructions for its own run.

Later sections (`docker:`, `github:`, ...) are added as new fields with defaults;
`extra="forbid"` keeps a misspelt section an error instead of silently ignored.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from docdelta.errors import ConfigError, DocdeltaError
from docdelta.gateway.config import GatewayConfig
from docdelta.git import Repo
from docdelta.instructions.detect import InstructionMatcher
from docdelta.instructions.globs import check_glob
from docdelta.sandbox.base import (
    DEFAULT_MEMORY_MB,
    DEFAULT_PIDS,
    DEFAULT_WORKSPACE_MB,
    DockerImageConfig,
    NetworkMode,
    SandboxSpec,
)
from docdelta.text import closest
from docdelta.vocabulary import CONFIG_PATH, PROJECT_URL, Frozen

if TYPE_CHECKING:
    import yaml

DEFAULT_TASKS_DIR = ".docdelta/tasks"
CONFIG_DOCS = f"{PROJECT_URL}/docs/configuration.md"
"""Every config field, for an error's hint: each error line already names its own field and
line, so a list of the top-level fields would say nothing about `gateway.prices.x.input`."""

M = TypeVar("M", bound=BaseModel)


# ------------------------------------------------------------- model loading
def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """1-based line along a pydantic error location: a mapping entry's key line (where a
    user looks for `field:`), a sequence item's own line."""
    import yaml  # noqa: PLC0415  (imported by `_load_model`, which alone calls this)

    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        found: tuple[yaml.Node, yaml.Node] | None = None
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if getattr(k, "value", None) == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            found = (node.value[part], node.value[part])
        if found is None:
            break
        line, node = found[0].start_mark.line + 1, found[1]
    return line


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "(top level)"


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str] | None:
    """The field names the model expects at `loc` (an error's location without its last part),
    following nested models, lists and mappings; None where the type cannot be followed."""
    kind: Any = model
    for part in loc:
        kind = _step(kind, part)
        if kind is None:
            return None
    found = _model_of(kind)
    return None if found is None else [f.alias or name for name, f in found.model_fields.items()]


def _model_of(kind: Any) -> type[BaseModel] | None:
    """The model a field's type holds: itself, or the one model of an optional or annotated type."""
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return kind
    models = [m for m in map(_model_of, get_args(kind)) if m is not None] if get_origin(kind) else []
    return models[0] if len(models) == 1 else None


def _step(kind: Any, part: int | str) -> Any:
    model = _model_of(kind)
    if model is not None:
        field = next((f for name, f in model.model_fields.items() if part in (name, f.alias)), None)
        return None if field is None else field.annotation
    origin, args = get_origin(kind), get_args(kind)
    if origin in (list, tuple, set, frozenset) and isinstance(part, int) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _describe(err: Any, model: type[BaseModel]) -> str:
    if err["type"] == "extra_forbidden":
        loc = tuple(err["loc"])
        fields = _fields_at(model, loc[:-1])
        if not fields:
            return "unknown field (misspelt?)"
        near = closest(str(loc[-1]), fields)
        return (
            f"unknown field; did you mean {near!r}?"
            if near
            else f"unknown field; the fields here: {', '.join(fields)}"
        )
    if err["type"] == "missing":
        return "required field is missing"
    return str(err["msg"])


MAX_INPUT_CHARS = 1_000_000
"""A task or config file is a page or two of YAML; a megabyte is generous, and keeps a file
of millions of keys from taking gigabytes to parse."""


def load_model(
    text: str, model: type[M], *, source: str, error: type[DocdeltaError], hint: str, is_json: bool = False
) -> M:
    """Parse YAML (or JSON) text into `model`; errors name `source`, the field and the line.

    YAML node marks map each pydantic error location back to the line a user has to
    edit. An empty document is an empty mapping, so defaults and "missing" errors apply.
    Size and nesting are bounded: a hostile file (from a PR) must give a clear error, not
    gigabytes of memory or a RecursionError.
    """
    if len(text) > MAX_INPUT_CHARS:
        raise error(
            f"{source} is {len(text):,} characters, over the {MAX_INPUT_CHARS:,} a task or config "
            "file may have",
            hint=hint,
        )
    try:
        return _load_model(text, model, source=source, error=error, hint=hint, is_json=is_json)
    except RecursionError:
        raise error(f"{source}: nested too deeply to be a task or config file", hint=hint) from None


def _load_model(
    text: str, model: type[M], *, source: str, error: type[DocdeltaError], hint: str, is_json: bool
) -> M:
    # PyYAML only here: `detect` on a repository without a .docdelta.yml never parses YAML.
    import yaml  # noqa: PLC0415

    node: yaml.Node | None
    try:
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise error(f"{source}:{exc.lineno}: invalid JSON: {exc.msg}", hint=hint) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise error(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}", hint=hint) from exc
    try:
        return model.model_validate({} if data is None else data)
    except ValidationError as exc:
        try:  # JSON is (nearly) YAML: its marks give JSON files line numbers too
            node = yaml.compose(text)
        except yaml.YAMLError:
            node = None
        lines = []
        for err in exc.errors():
            line = _line_of(node, tuple(err["loc"]))
            where = f"{source}:{line}" if line is not None else source
            lines.append(f"{where}: field '{_field(tuple(err['loc']))}': {_describe(err, model)}")
        raise error("\n".join(lines), hint=hint) from exc


# -------------------------------------------------------------------- config
Glob = Annotated[str, AfterValidator(check_glob)]
"""A gitignore glob (see `docdelta.instructions.globs`), checked item by item so an
error names its index."""


class InstructionsConfig(BaseModel):
    """Extend (`include`) or trim (`exclude`) the built-in instruction-file table."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    include: list[Glob] = []
    exclude: list[Glob] = []


class WorkspaceManager(StrEnum):
    """Package managers whose workspace docdelta installs once per lock and shows every checkout."""

    pnpm = "pnpm"


class WorkspaceConfig(BaseModel):
    """`sandbox.workspace`: install the workspace's dependencies once per lockfile hash, on the
    host (with network, from the trusted source commit, before any agent runs), and expose them
    in each checkout as `node_modules` directories of links into that read-only install, so a
    task's command is the project's own (`pnpm --filter pkg exec vitest run`), not a set-up script.
    The manager runs from `sandbox.env.PATH`: the toolchain the sandbox shows is the one used."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    manager: WorkspaceManager = Field(description="the workspace's package manager")
    filter: list[str] = Field(
        default=[], description="install only these packages (pnpm --filter selectors, e.g. `logfire...`)"
    )


class SandboxConfig(BaseModel):
    """The `sandbox:` section: toolchains the agent and the hidden tests may use, and the
    bounds of every run (memory, processes, disk; see `docdelta.sandbox.limits`).

    Every sandbox is an allowlist, so a project's virtualenv, uv cache or Node install
    is invisible unless named here; each path appears read-only at the same path inside
    (`~` is the home of the user running docdelta; for Docker, paths on the engine's
    host). The repository, the tasks directory and the workdir can never be named (see
    `check_exposure`): they hold the other conditions' instruction files and the gold."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    paths: list[str] = Field(default=[], description="host paths mounted read-only at the same path")
    env: dict[str, str] = Field(default={}, description="variables set in every exec, e.g. PATH")
    workspace: WorkspaceConfig | None = Field(
        default=None, description="a package-manager workspace installed once and shown in each checkout"
    )
    memory_mb: int = Field(default=DEFAULT_MEMORY_MB, ge=64, description="memory of one run (MiB)")
    pids: int = Field(default=DEFAULT_PIDS, ge=16, description="processes one run may have at once")
    workspace_mb: int = Field(
        default=DEFAULT_WORKSPACE_MB, ge=16, description="disk one run may write (MiB), and its largest file"
    )

    def spec(self, network: NetworkMode) -> SandboxSpec:
        """A run's sandbox request under these limits (a hit ends the run as `oom`,
        `pids_limit` or `disk_full`, never a pass)."""
        return SandboxSpec(
            network=network, memory_mb=self.memory_mb, pids=self.pids, workspace_mb=self.workspace_mb
        )

    @field_validator("paths")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith(("/", "~")):
                raise ValueError(f"must be an absolute path (or start with ~), got {path!r}")
        return value

    @field_validator("env")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name.isidentifier() or not name.isascii():
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    def host_paths(self) -> list[Path]:
        return [Path(p).expanduser().resolve() for p in self.paths]


def check_exposure(config: SandboxConfig, protected: dict[str, Path]) -> None:
    """Refuse a `sandbox.paths` entry that would show the agent one of `protected`
    (e.g. {"repository": ..., "tasks directory": ..., "workdir": ...}): the directory
    itself, a parent of it, or anything inside it."""
    for index, path in enumerate(config.host_paths()):
        for what, directory in protected.items():
            shown = directory.resolve()
            if path == shown or shown.is_relative_to(path) or path.is_relative_to(shown):
                raise ConfigError(
                    f"{CONFIG_PATH}: field 'sandbox.paths[{index}]' ({config.paths[index]}) would show "
                    f"the agent the {what} {shown}",
                    hint="name only toolchain directories outside the repository, the tasks directory "
                    "and the workdir (e.g. a virtualenv elsewhere, ~/.cache/uv, /opt/node)",
                )


class ProjectConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    tasks: str = DEFAULT_TASKS_DIR
    """Task directory, relative to the repository root."""
    instructions: InstructionsConfig = InstructionsConfig()
    strip: list[Glob] = []
    """Extra globs removed from every sealed checkout (hidden tests, private data)."""
    docker: DockerImageConfig = DockerImageConfig()
    gateway: GatewayConfig = GatewayConfig()
    """Which model APIs the gateway may reach, per-run budget, price table."""
    sandbox: SandboxConfig = SandboxConfig()
    """Read-only toolchain paths, environment and the bounds of each run (memory, processes,
    disk) for the agent and the hidden tests."""
    arms: list[ArmSpec] = []
    """Arms added to every evaluation's conditions (`docdelta run` without --arms, the Action's PRs)."""
    noise_band: float | None = Field(default=None, ge=0, lt=1)
    """Head - base differences within +- this are noise (None: `DEFAULT_NOISE_BAND`); the
    CLI's `--noise-band` and the Action's `noise-band` override it."""

    @field_validator("tasks")
    @classmethod
    def _relative(cls, value: str) -> str:
        parts = value.strip("/").split("/")
        if value.startswith("/") or ".." in parts or not value.strip("/"):
            raise ValueError(f"must be a path inside the repository, got {value!r}")
        return value.strip("/")

    def with_image_base(self, base: str | None) -> ProjectConfig:
        """This config with `base` as the sandbox's base image, unless `docker.base` was set."""
        if base is None or "base" in self.docker.model_fields_set:
            return self
        return self.model_copy(update={"docker": self.docker.model_copy(update={"base": base})})

    @property
    def checkout_strip(self) -> list[str]:
        """Everything docdelta's own: config, task files (with their gold), `strip` globs."""
        return [f"/{CONFIG_PATH}", "/.docdelta/**", f"/{self.tasks}/**", *self.strip]


def load_project_config(repo: Repo, sha: str) -> ProjectConfig:
    """`.docdelta.yml` at commit `sha` (pass the trusted base), or defaults if there is none."""
    entry = next((e for e in repo.tree(sha, [CONFIG_PATH]) if e.path == CONFIG_PATH), None)
    if entry is None:
        return ProjectConfig()
    source = f"{CONFIG_PATH} (at {sha[:12]})"
    hint = f"fix {CONFIG_PATH} on the base branch; every field: {CONFIG_DOCS}"
    if entry.is_symlink or not entry.is_blob:
        raise ConfigError(f"{source} must be a regular file", hint=hint)
    try:
        text = repo.read_blob(entry.oid).decode()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source} is not UTF-8 text", hint=hint) from exc
    return load_model(text, ProjectConfig, source=source, error=ConfigError, hint=hint)


def load_config_file(path: Path) -> ProjectConfig:
    """A project config given on the command line (`--config FILE`), in `.docdelta.yml`'s format."""
    hint = f"pass a YAML file in {CONFIG_PATH}'s format; every field: {CONFIG_DOCS}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file", hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: cannot read it as UTF-8 text ({exc})", hint=hint) from None
    return load_model(text, ProjectConfig, source=f"--config {path}", error=ConfigError, hint=hint)


def matcher(config: ProjectConfig) -> InstructionMatcher:
    return InstructionMatcher(config.instructions.include, config.instructions.exclude)


class ArmSpec(Frozen):
    """An arm as the user declares it (`--arms`, `.docdelta.yml` `arms:`): a condition run by
    an agent and model of its own, optionally with extra files (a skills folder, a docs export)
    laid over its checkout. Unset fields take the run's own (`--agent`, `--model`)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$", description="the arm's column in the scorecard")
    condition: str = Field(
        default="head", description="the condition it builds on: base, head, none, patched"
    )
    agent: str | None = Field(default=None, description="default: the run's --agent")
    agent_cmd: str | None = Field(default=None, description="the command agent's command line")
    model: str | None = Field(default=None, description="default: the run's --model")
    overlay: str | None = Field(
        default=None,
        description="a directory whose files are laid over the checkout as they are laid out in it "
        "(CLI: a host path; .docdelta.yml: a directory of the repository at the base ref)",
    )
    vs: str | None = Field(default=None, description="the arm or condition it is compared with")
