"""The task file's model: the question or change request, its gold, checks and validation."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

import re2
from pydantic import BeforeValidator, Field, field_validator, model_validator

from docdelta.vocabulary import Frozen


def _parse_line_range(value: Any) -> Any:
    """Accept `12`, `"12"`, `"12-14"`, `[12, 14]` or `{start, end}` in task and answer files."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {"start": value, "end": value}
    if isinstance(value, str):
        m = re.fullmatch(r"\s*L?(\d+)\s*(?:[-:]\s*L?(\d+))?\s*", value)
        if not m:
            raise ValueError(f"expected a line number or range like '12' or '12-14', got {value!r}")
        start = int(m.group(1))
        return {"start": start, "end": int(m.group(2) or start)}
    if isinstance(value, list | tuple) and len(value) == 2:
        return {"start": value[0], "end": value[1]}
    return value


class LineRange(Frozen):
    """An inclusive, 1-based range of lines."""

    start: int = Field(ge=1)
    end: int = Field(ge=1)

    @field_validator("end")
    @classmethod
    def _ordered(cls, end: int, info: Any) -> int:
        start = info.data.get("start")
        if start is not None and end < start:
            raise ValueError(f"line range ends ({end}) before it starts ({start})")
        return end

    def overlaps(self, other: LineRange) -> bool:
        return self.start <= other.end and other.start <= self.end

    def __str__(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"


Lines = Annotated[LineRange, BeforeValidator(_parse_line_range)]


class GoldQuote(Frozen):
    """A quote in a file: it stands wherever the quote is in a condition's copy of the file."""

    path: str
    quote: str = Field(min_length=1)
    lines: Lines | None = Field(
        default=None, description="where the quote stood when the task was written: a hint, never scored"
    )


class GoldCitation(GoldQuote):
    """Where the gold answer stands: a quote in a file, located in each condition's files
    (`docdelta.tasks.quotes`); `any_of` lists other quotes that serve as well (a rule stated in
    AGENTS.md and in CONTRIBUTING.md)."""

    any_of: list[GoldQuote] = Field(default=[], description="alternatives: citing any one of them counts")

    def choices(self) -> list[GoldQuote]:
        return [GoldQuote(path=self.path, quote=self.quote, lines=self.lines), *self.any_of]


class RunnerKind(StrEnum):
    """The test runners docdelta recognises in a validation command (see grading/runners.py)."""

    pytest = "pytest"
    vitest = "vitest"
    jest = "jest"
    go_test = "go test"
    gotestsum = "gotestsum"
    cargo_test = "cargo test"
    nextest = "cargo nextest"
    declared = "declared report"
    """Any other command: it writes the JUnit file named by `gold.validation.report`."""


class Validation(Frozen):
    """How a change task is graded: hidden tests run after the agent, in a fresh sandbox.

    Hidden files live in the task folder (`<tasks dir>/<task id>/hidden/<path>`) or,
    failing that, in the source commit; either way they must be stripped from the
    agent's checkout. `command` is split into words (shlex) and run without a shell
    and without network. A command that starts a runner docdelta knows (pytest, vitest,
    jest, go test, gotestsum, cargo test, cargo nextest; through `uv run`, `poetry run`,
    `python -m`, `pnpm exec`, ...) gets that runner's report flags added (see
    grading/runners.py); any other command must declare the JUnit `report` it writes,
    because an exit code alone is no evidence that a test ran.
    """

    hidden: list[str] = Field(min_length=1, description="repository paths of the hidden test files")
    command: str = Field(min_length=1, description="e.g. 'uv run --frozen pytest -q tests/test_x.py'")
    exit_code: int = Field(default=0, description="exit code of a passing run")
    timeout_s: float = Field(default=300.0, gt=0)
    report: str | None = Field(
        default=None,
        description="JUnit XML path the command writes (workspace-relative); recognised runners: automatic",
    )
    reference: str = Field(
        default="reference.patch", description="reference solution, a unified diff in the task folder"
    )
    protect: list[str] = Field(
        default=[], description="extra globs of test/build files whose agent edits are never applied"
    )
    source: str | None = Field(
        default=None, description="commit the hidden tests were written for (tasks drafted from a commit)"
    )


class HardChecks(Frozen):
    """Deterministic checks on the agent's diff; globs are gitignore-like (`instructions.globs`)."""

    require_changed: list[str] = Field(default=[], description="globs; each must match a changed path")
    forbid_changed: list[str] = Field(default=[], description="globs no changed path may match")
    expect_added: list[str] = Field(default=[], description="snippets that must appear in added lines")
    forbid_added: list[str] = Field(default=[], description="snippets no added line may contain")
    min_files: int | None = Field(default=None, ge=0)
    max_files: int | None = Field(default=None, ge=0)
    max_lines: int | None = Field(default=None, ge=0, description="added + removed lines")


class MistakeRule(Frozen):
    """A "never do X" rule: a regex over added lines and/or the commands the agent ran."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    pattern: str = Field(min_length=1, description="RE2 regex, searched (not matched) per line")
    scope: Literal["added", "commands", "both"] = "both"
    paths: list[str] = Field(default=[], description="globs limiting which files' added lines count")
    description: str = ""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        mistake_regex(pattern)
        return pattern


def mistake_regex(pattern: str) -> re2._Regexp[str]:
    """A mistake rule's pattern, compiled with RE2: it matches in linear time, so a pattern
    that would backtrack catastrophically in Python's `re` (`(a+)+$`) cannot hang grading.
    RE2 has no backreferences or lookaround; a pattern that uses them is refused here, at
    task load, with RE2's reason."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(
            f"invalid regex {pattern!r}: {reason} (mistake patterns use RE2 syntax: no lookaround "
            "or backreferences)"
        ) from None


def _execute_switch(value: Any) -> Any:
    """`execute: true` turns execution on with its defaults; `false` leaves it off."""
    if value is True:
        return {}
    if value is False:
        return None
    return value


class CommandExecution(Frozen):
    """gold.execute: run the commands the answer proposes, each in a fresh offline sandbox of
    the run's sealed checkout (docdelta.grading.execute), so a command that looks right but
    does not exist in the project (a stale test path, a wrong make target or flag) is a miss."""

    timeout_s: float = Field(default=60.0, gt=0, le=600, description="per command; then it is killed")
    max_commands: int = Field(default=5, ge=1, le=20, description="proposals run per answer, in order")
    exit_code: int = Field(default=0, description="exit code of a command that works")


class Gold(Frozen):
    docs: list[str] = Field(default=[], description="instruction files the answer depends on")
    files: list[str | list[str]] = Field(
        default=[], description="repository paths a correct answer names; a list: any one of them"
    )
    commands: list[str | list[str]] = Field(
        default=[], description="commands a correct answer gives; a list: any one of them"
    )
    guardrails: list[str] = Field(
        default=[], description="commands or snippets a correct answer must NOT recommend"
    )
    points: list[str] = Field(default=[], description="key points; scored only by the judge")
    verdict: str | None = Field(default=None, description="expected short verdict, e.g. 'yes' or 'no'")
    validation: Validation | None = Field(default=None, description="change tasks: the hidden tests")
    checks: HardChecks = Field(default_factory=HardChecks)
    mistakes: list[MistakeRule] = []
    execute: Annotated[CommandExecution | None, BeforeValidator(_execute_switch)] = Field(
        default=None,
        description="answer tasks with gold commands: run the proposed commands (`true`, or limits)",
    )


class PassThreshold(Frozen):
    """A task's own bar, beside the statistical verdict: pass^k of an arm's graded runs (the
    chance that k of them drawn at random all score 1.0; k = 1 is the pass rate) must reach
    `fraction`. Users gate on "passes in at least 80 % of runs" as well as on a mean difference."""

    fraction: float = Field(gt=0, le=1, description="the share pass^k must reach, e.g. 0.8")
    k: int = Field(default=1, ge=1, description="runs that must all pass; 1: the plain pass rate")


class Trigger(Frozen):
    """What a trigger task tests: is an on-demand instruction file (a skill, slash command,
    subagent, path-scoped rule) loaded for this prompt? A skill's description is in every
    prompt; only its body reaching the model counts as loaded (`grading.trigger`). One task per
    prompt: a near-miss negative (a prompt that sounds close but should not load the file) is a
    task with `should_load: false`."""

    file: str = Field(
        min_length=1, description="repository path of the on-demand file, e.g. .claude/skills/x/SKILL.md"
    )
    should_load: bool = Field(
        description="true: the prompt should load the file; false: a (near-miss) negative"
    )

    @field_validator("file")
    @classmethod
    def _relative(cls, file: str) -> str:
        parts = file.split("/")
        if file.startswith("/") or ".." in parts or "" in parts or "." in parts:
            raise ValueError(
                f"{file!r} is not a plain repository path (write it like .claude/skills/x/SKILL.md)"
            )
        return file


class Task(Frozen):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    prompt: str = Field(min_length=1)
    kind: Literal["answer", "change", "trigger"] = "answer"
    trigger: Trigger | None = Field(
        default=None, description="trigger tasks: the on-demand file and whether this prompt should load it"
    )
    gold: Gold = Field(default_factory=Gold)
    gold_citations: list[GoldCitation] = []
    reviewed: bool = False
    holdout: bool = Field(
        default=False,
        description="run and counted in the aggregate, but its own results are never shown, so the "
        "instructions are not tuned to the visible tasks",
    )
    pass_threshold: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="share of runs (of pass^k with pass_k) that must score 1.0 in the head arm, or the "
        "check fails when base reached it; overrides the pass-threshold input / --pass-threshold",
    )
    pass_k: int | None = Field(
        default=None,
        ge=1,
        description="with pass_threshold: gate on pass^k, the chance that k runs all pass, not the pass rate",
    )

    @property
    def threshold(self) -> PassThreshold | None:
        """The task's own bar, when it sets one."""
        if self.pass_threshold is None:
            return None
        return PassThreshold(fraction=self.pass_threshold, k=self.pass_k or 1)

    @model_validator(mode="after")
    def _k_needs_threshold(self) -> Task:
        if self.pass_k is not None and self.pass_threshold is None:
            raise ValueError("pass_k needs pass_threshold (the share of pass^k to reach, e.g. 0.8)")
        return self

    @model_validator(mode="after")
    def _change_needs_validation(self) -> Task:
        if self.kind == "change" and self.gold.validation is None:
            raise ValueError("a change task needs gold.validation (hidden tests and a command)")
        if self.gold.execute is not None and (self.kind != "answer" or not self.gold.commands):
            raise ValueError("gold.execute runs proposed commands: it needs an answer task with commands")
        return self

    @model_validator(mode="after")
    def _trigger_alone(self) -> Task:
        """A trigger task is graded on what was loaded alone: gold would be ignored, so it is refused."""
        if self.kind == "trigger" and self.trigger is None:
            raise ValueError("a trigger task needs `trigger: {file: <path>, should_load: true|false}`")
        if self.kind != "trigger" and self.trigger is not None:
            raise ValueError(f"`trigger` is only for `kind: trigger` tasks (this one is `kind: {self.kind}`)")
        if self.kind == "trigger" and self.gold != Gold():
            raise ValueError("a trigger task is graded on whether its file was loaded: remove `gold`")
        if self.kind == "trigger" and self.gold_citations:
            raise ValueError(
                "a trigger task is graded on whether its file was loaded: remove `gold_citations`"
            )
        return self
