"""Grading records: scores, hidden-test results, hard checks, selftests, the judge's rulings
and calibration."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from docdelta.tasks.models import RunnerKind
from docdelta.vocabulary import SCHEMA_VERSION, Frozen


class ScoreItem(Frozen):
    kind: Literal[
        "command", "file", "citation", "verdict", "guardrail", "point", "rule", "tests", "check", "trigger"
    ]
    expected: str
    hit: bool | None = Field(description="None: not scored (e.g. key points before a judge exists)")
    note: str = ""
    attainable: bool = Field(
        default=True,
        description="False: the gold is not in this condition's files (a citation whose quote is absent)",
    )


class ExecutedCommand(Frozen):
    """One proposed command, run with `sh -c` in its own fresh offline sandbox."""

    command: str = Field(description="as proposed, without the backticks, quotes or `$ ` around it")
    exit_code: int | None = Field(description="None: killed (timeout, out of memory)")
    seconds: float
    timed_out: bool = False
    first_error: str | None = Field(
        default=None, description="the first line of its output that says what went wrong (redacted)"
    )
    output_tail: str = Field(default="", description="the end of its output, truncated and redacted")


class CommandsExecuted(Frozen):
    """What running an answer's proposed commands found (gold.execute)."""

    isolation: str = Field(description="the sandboxes' isolation, e.g. 'bwrap', 'docker-none'")
    commands: list[ExecutedCommand] = []
    refused: str | None = Field(
        default=None, description="why nothing was run (no sandbox to run it in); scored by matching only"
    )
    skipped: list[str] = Field(default=[], description="proposals beyond gold.execute.max_commands")


class Score(Frozen):
    value: float = Field(ge=0.0, le=1.0)
    items: list[ScoreItem]

    @property
    def missed(self) -> list[ScoreItem]:
        return [i for i in self.items if i.hit is False]


class TestCounts(Frozen):
    """Tests counted from parsed output (JUnit XML or pytest's summary line)."""

    __test__ = False  # not a pytest test class, despite the name

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped


class DroppedEdit(Frozen):
    """An agent edit left out of the grading checkout, and why."""

    path: str
    reason: str


TAIL_NOTE = "last lines of output:"
"""Starts the grading note that quotes the command's output (`HiddenTestResult.notes`' last)."""


class HiddenTestResult(Frozen):
    """The hidden tests' verdict on one run's edits.

    `status` is `pass` only when the exit code is the expected one AND parsed test
    output shows tests ran and passed; `infra_error` means the grader itself failed
    (never the agent's fault: the run is retried, not scored).
    """

    status: Literal["pass", "fail", "infra_error"]
    exit_code: int | None = None
    expected_exit_code: int = 0
    timed_out: bool = False
    counts: TestCounts | None = Field(default=None, description="from the JUnit report, if one was read")
    summary: TestCounts | None = Field(default=None, description="from pytest's summary line, if printed")
    applied: list[str] = Field(default=[], description="paths of agent edits applied")
    dropped: list[DroppedEdit] = []
    notes: list[str] = Field(default=[], description="why the status is what it is, for a maintainer")
    isolation: str = ""
    duration_s: float = 0.0
    output_tail: str = ""
    runner: RunnerKind | None = Field(default=None, description="the test runner the command started")
    guarded: bool = Field(
        default=False,
        description="docdelta's pytest guard checked the runner (pytest without a declared report); "
        "otherwise the runner's own report is all the evidence",
    )

    @property
    def no_test_ran(self) -> bool:
        """A failure with no evidence that any test ran (a command not found, a missing
        runner, no JUnit report): it says the environment could not run the tests, not how
        good the edits were, so it is a fault of the evaluation, never the agent's grade."""
        return self.status == "fail" and (self.counts is None or self.counts.total == 0)

    def reason_and_output(self) -> tuple[str, str]:
        """(the notes saying why, the command's quoted last lines): the grader ends a failure's
        notes with the output, which a scorecard folds away and a one-line message keeps."""
        reasons = [n for n in self.notes if not n.startswith(TAIL_NOTE)]
        quoted = next((n for n in self.notes if n.startswith(TAIL_NOTE)), "")
        return "; ".join(reasons), quoted.removeprefix(TAIL_NOTE).removeprefix("\n").strip()


class GradingFailure(Frozen):
    """Hidden-test gradings in which no test ran, grouped by what they printed: the scorecard
    shows each in a folded section with the command's last lines, where the real cause
    (`No module named pytest`, `uv: No such file or directory`) is."""

    task: str
    where: list[str] = Field(description="`selftest: <leg>` or `<condition> r<repeat>`, per grading")
    reason: str = Field(description="the grader's notes, without the quoted output")
    output: str = Field(default="", description="the command's last lines of output")


class CheckResult(Frozen):
    name: str
    passed: bool
    note: str = ""


class MistakeHit(Frozen):
    """One mistake rule's hits in one run (count 0 rules are listed too, so absence is visible)."""

    rule: str
    count: int
    examples: list[str] = Field(default=[], description="first few offending lines or commands")


class ChecksResult(Frozen):
    checks: list[CheckResult]
    mistakes: list[MistakeHit]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def mistake_count(self) -> int:
        return sum(m.count for m in self.mistakes)


class SelftestLeg(Frozen):
    name: str
    passed: bool
    note: str = ""
    result: HiddenTestResult | None = None


class SelftestReport(Frozen):
    task: str
    legs: list[SelftestLeg]

    @property
    def passed(self) -> bool:
        return all(leg.passed for leg in self.legs)


class SelftestRecord(Frozen):
    """A change task's selftest, kept in the workdir; `key` hashes the task file, its hidden
    tests, its reference and the source tree, so any change makes it stale."""

    schema_version: int = SCHEMA_VERSION
    key: str
    report: SelftestReport


JudgeProvider = Literal["openai", "anthropic"]


class JudgeInfo(Frozen):
    """Which judge ruled: the API family it speaks and its model id."""

    provider: JudgeProvider
    model: str = Field(min_length=1)

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


class JudgeRuling(Frozen):
    """The judge's ruling on one criterion of one answer, after the quote was checked.

    A point is credited only when the judge says it is made AND its quote stands
    verbatim (whitespace-normalized) in the answer; a rule is broken only on the
    judge's word, but that word must also come with a quote. A ruling whose quote is
    missing or not in the answer is `supported=False` and never earns credit.
    """

    kind: Literal["point", "rule"]
    expected: str = Field(description="the key point or rule, as the task states it")
    met: bool = Field(description="the judge's claim: the point is made / the rule is respected")
    quote: str = ""
    supported: bool = Field(description="False: the quote the claim needs is not in the answer")
    hit: bool = Field(description="the scored outcome")
    reason: str = ""


class CalibrationRecord(Frozen):
    """How one judge did on one rubric's labeled fixtures, per class.

    `pass_accuracy`: share of pass-labeled (fixture, criterion) pairs the judge credited;
    `fail_accuracy`: share of fail-labeled pairs it did not. Both are needed: a judge
    that credits everything is perfect on the first and useless.
    """

    task: str
    judge: JudgeInfo
    rubric_sha256: str
    fixtures_sha256: str
    pass_accuracy: float = Field(ge=0.0, le=1.0)
    fail_accuracy: float = Field(ge=0.0, le=1.0)
    pass_labels: int = Field(ge=1)
    fail_labels: int = Field(ge=1)
    errors: list[str] = Field(default=[], description="fixture #, criterion and what the judge got wrong")
    calibrated_at: datetime


class CalibrationFile(Frozen):
    """`<calibration dir>/<task id>.json`: one record per judge that was calibrated on the task."""

    schema_version: int = SCHEMA_VERSION
    task: str
    records: list[CalibrationRecord] = []
