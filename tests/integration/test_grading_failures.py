"""Hidden-test gradings in which no test ran show their cause in the scorecard itself, through
`docdelta run` then `docdelta report`, with real commands failing for real in the local sandbox.

The cause is in the command's last lines (`No module named pytest`, `uv: No such file or
directory`), not in "no evidence that any test ran": the scorecard (the report's markdown and
the PR comment's) folds those lines under *Grading failures*, and such gradings never pass
and never produce a verdict (a failed selftest gives none; runs count among the faults)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo
from samples import CALC_HIDDEN_TEST as HIDDEN_TEST
from samples import CALC_REFERENCE as REFERENCE
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.github.comment import render_comment
from docdelta.report import render_markdown
from docdelta.report.render import render_comment_markdown
from docdelta.results.layout import ON_BASE
from docdelta.results.models import RunResult
from docdelta.results.store import ResultStore
from docdelta.scorecard.models import Summary
from docdelta.scorecard.summarize import NO_TEST_RAN
from docdelta.scorecard.workdir import scorecard

TASK = """\
id: fix-add
kind: change
prompt: add() returns wrong results. Fix it.
gold:
  validation:
    hidden: [tests/test_ops.py]
    command: {command}
reviewed: true
"""


def _project(tmp_path: Path, command: str) -> GitRepo:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(
        {
            ".docdelta.yml": sandbox_config(),
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "AGENTS.md": "# Agents\nBe careful.\n",
            ".docdelta/tasks/fix-add.yaml": TASK.format(command=command),
            ".docdelta/tasks/fix-add/hidden/tests/test_ops.py": HIDDEN_TEST,
            ".docdelta/tasks/fix-add/reference.patch": REFERENCE,
        }
    )
    repo.commit({"AGENTS.md": "# Agents\nArithmetic lives in calc/ops.py.\n"})
    return repo


def _run(repo: GitRepo, workdir: Path, agent: str) -> int:
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "command", "--agent-cmd", agent, "--repeats", "1",
    ]  # fmt: skip
    return main(args)


NOOP_AGENT = f"{sys.executable} -c {shlex.quote('print(chr(123) + chr(125))')}"


@pytest.mark.parametrize(
    ("command", "cause"),
    [
        # Debian's python3 has no pytest, and the sandbox shows no other.
        ("/usr/bin/python3 -m pytest -q tests/test_ops.py", "No module named pytest"),
        # No uv anywhere in the sandbox: the grader's launcher says so.
        ("uv run --frozen pytest -q", "uv: No such file or directory"),
    ],
    ids=["python-m-pytest-without-pytest", "uv-run-without-uv"],
)
def test_a_command_that_cannot_run_shows_its_cause_in_the_scorecard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, cause: str
) -> None:
    repo = _project(tmp_path, command)
    workdir = tmp_path / "work"
    assert _run(repo, workdir, NOOP_AGENT) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "failed its selftest" in err and cause in err  # the run stops, saying why
    assert not list(workdir.glob("runs/*/*/*/r1/result.json"))  # no agent ran on a broken grader

    assert main(["report", "--workdir", str(workdir)]) == 0
    report = capsys.readouterr().out
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert summary.verdict is None and summary.broken is not None
    assert "could not be graded" in summary.broken
    (failure,) = summary.grading_failures
    assert failure.task == "fix-add"
    assert "selftest: untouched checkout fails" in failure.where
    assert cause in failure.output
    assert "no evidence that any test ran" in failure.reason or "no test" in failure.reason

    store = ResultStore(workdir)
    manifest, detection = store.read_manifest(), store.read_detection()
    assert manifest is not None and detection is not None
    markdown = render_comment_markdown(scorecard(store, manifest, detection, []))
    comment = render_comment("docdelta", markdown, full_report_url="https://example.invalid/run")
    for text in (report, comment):
        assert "This evaluation is broken, so there is no verdict." in text
        folded = text.split("<details><summary>Grading failures: no hidden test ran in ", 1)[1]
        section = folded.split("</details>", 1)[0]
        assert cause in section, section  # the real cause line, inside the folded section
        assert "```text\n" in section


CRASH_AGENT = f"{sys.executable} -c " + shlex.quote(
    "import json, pathlib\n"
    "pathlib.Path('calc/__init__.py').write_text("
    "'import os\\nos.write(2, b\"calc: refusing to load in CI\\\\n\")\\nos._exit(0)\\n')\n"
    "print(json.dumps({'answer': 'done'}))\n"
)
"""An agent whose edit kills the test process at import with exit 0: no test runs, so no
JUnit report is written, whatever the exit code says."""


def test_runs_whose_tests_never_ran_score_zero_count_as_faults_and_show_their_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(
        tmp_path, f"{shlex.quote(sys.executable)} -m pytest -q -s tests/test_ops.py"
    )  # -s: fd 2 uncaptured
    workdir = tmp_path / "work"
    code = _run(repo, workdir, CRASH_AGENT)
    err = capsys.readouterr().err
    assert code != ExitCode.OK, err  # no verdict: never a green run
    results = [
        RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r1/result.json")
    ]
    assert len(results) == 3
    for r in results:
        assert r.score is not None and r.score.value == 0.0  # never a pass
        assert r.hidden_tests is not None and r.hidden_tests.no_test_ran

    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert summary.faults == {NO_TEST_RAN: 3}
    assert summary.decided_on_base is None and not (workdir / ON_BASE).exists()  # the PR changed no code
    assert summary.verdict is None and summary.broken is not None
    (failure,) = summary.grading_failures  # three runs failing alike: shown once
    assert sorted(failure.where) == ["base r1", "head r1", "none r1"]
    assert "no JUnit report was written" in failure.reason
    assert "calc: refusing to load in CI" in failure.output
    assert main(["report", "--workdir", str(workdir)]) == 0
    report = capsys.readouterr().out
    assert "Grading failures: no hidden test ran in 3 grading(s)" in report
    assert "calc: refusing to load in CI" in report
    assert render_markdown(summary) == report.removesuffix("\n")
    assert main(["report", "--workdir", str(workdir), "--format", "html"]) == 0
    html = capsys.readouterr().out
    section = html.split('<section id="grading-failures">', 1)[1].split("</section>", 1)[0]
    assert "<pre>calc: refusing to load in CI</pre>" in section
