"""A pull request cannot move its own gate by breaking its code (`source: head`, the default).

Every condition runs on the PR's code, so a PR that regresses AGENTS.md *and* ships a
`conftest.py` that stops every hidden test from running makes every arm fail alike: on its
own code the evaluation is broken (or saturated at 0) and would reach no verdict, a
`neutral` check, which a required check lets pass. The Action drives this in-process with
real PyGithub against the fake GitHub server, a real command agent in the local sandbox and
real pytest grading: the same regression is a `failure` with or without the broken code,
decided on base's code when the PR's own code gives no verdict. A harness that fails on
base's code too (an outage, not the PR) stays `neutral`: the gate never cries wolf.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from actionrun import act, pr_event
from clirun import run_args
from fakegithub import FakeGitHub
from gitrepo import GitRepo
from samples import CALC_HIDDEN_TEST as HIDDEN_TEST
from samples import CALC_REFERENCE as REFERENCE
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.git import overlay_commit
from docdelta.results.layout import ON_BASE
from docdelta.scorecard.models import Summary

pytestmark = pytest.mark.timeout(600)

TASK = """\
id: fix-add
kind: change
prompt: add() returns wrong results. Fix it.
gold:
  validation:
    hidden: [tests/test_ops.py]
    command: {python} -m pytest -q -p no:cacheprovider tests/test_ops.py
reviewed: true
"""
GOOD_DOCS = "# Agents\nadd() must return a + b.\n"
BAD_DOCS = "# Agents\nBe careful.\n"
SABOTAGE = {"conftest.py": "raise SystemExit('conftest: refusing to run in CI')\n"}
"""The PR's code: every pytest session ends at collection, in every arm alike."""


def _agent(fix: str) -> str:
    """A command agent that rewrites add() to return `fix` when the checkout's AGENTS.md says
    `a + b`, and does nothing otherwise."""
    script = (
        "import json, pathlib\n"
        "if 'a + b' in pathlib.Path('AGENTS.md').read_text():\n"
        f"    pathlib.Path('calc/ops.py').write_text('def add(a, b):\\n    return {fix}\\n')\n"
        "print(json.dumps({'answer': 'done'}))\n"
    )
    return f"{sys.executable} -c {shlex.quote(script)}"


AGENT = _agent("a + b")
"""Fixes add() only when the checkout's AGENTS.md says how: base's docs do, the PR's do not."""


def _pr(tmp_path: Path, fake: FakeGitHub, head_files: dict[str, str | None], command: str = "") -> Path:
    """A workspace whose last commit (the PR's head, PR #1) applies `head_files` to a base
    with the good AGENTS.md; the PR event's path."""
    repo = GitRepo.init(tmp_path / "ws")
    task = TASK.format(python=shlex.quote(sys.executable))
    if command:
        task = task.replace(f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider", command)
    base = repo.commit(
        {
            ".docdelta.yml": sandbox_config(),
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "AGENTS.md": GOOD_DOCS,
            ".docdelta/tasks/fix-add.yaml": task,
            ".docdelta/tasks/fix-add/hidden/tests/test_ops.py": HIDDEN_TEST,
            ".docdelta/tasks/fix-add/reference.patch": REFERENCE,
        }
    )
    # Plumbing, as a PR's author may have made it: no attribute of the PR's own applies here.
    changes = {path: None if content is None else content.encode() for path, content in head_files.items()}
    head = overlay_commit(repo.path, base, changes, "the PR")
    repo.git("reset", "-q", "--soft", head)
    fake.add_pull(
        1, base, head, [(p, "modified" if c is not None else "removed") for p, c in head_files.items()]
    )
    return pr_event(tmp_path, 1, base, head)


def _evaluate(tmp_path: Path, fake: FakeGitHub, event: Path) -> tuple[str, str, str]:
    """The Action at its defaults (`source: head`, `fail-on: regression`) but for the agent,
    the local sandbox and a fixed design: (conclusion, comment, log)."""
    result, log = act(
        tmp_path, tmp_path / "ws", fake, "pull_request", event, "none",
        agent="command", agent_command=AGENT, conditions="base,head", repeats="6",
    )  # fmt: skip
    assert result.conclusion is not None, log
    comment = "\n".join(c["body"] for c in fake.comments)  # none when the run raised
    return result.conclusion.value, comment, log


def test_a_docs_regression_alone_fails_the_check(tmp_path: Path, fake: FakeGitHub) -> None:
    conclusion, comment, log = _evaluate(tmp_path, fake, _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS}))
    assert conclusion == "failure", log
    assert "Decided on base's code" not in comment


def test_breaking_the_prs_own_code_too_does_not_turn_the_regression_neutral(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    event = _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS, **SABOTAGE})
    conclusion, comment, log = _evaluate(tmp_path, fake, event)
    assert conclusion == "failure", log
    lead = comment.split("> ⚠ **Decided on base's code.** ", 1)[1].split("\n", 1)[0]
    assert "conftest: refusing to run in CI" in lead, comment  # why the PR's own code gave none
    assert "the PR changes 1 file besides its instruction files" in lead
    (check,) = fake.check_runs
    assert check["conclusion"] == "failure"
    assert check["output"]["title"].endswith("(decided on base's code: the PR's own code gave no verdict)")


def test_a_harness_that_fails_on_bases_code_too_stays_neutral(tmp_path: Path, fake: FakeGitHub) -> None:
    """No uv in the sandbox: the hidden tests cannot run on either commit's code. That is
    docdelta's (or the task's) failure, not the PR's, so it blocks no PR."""
    event = _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS, **SABOTAGE}, command="uv run --frozen pytest -q")
    conclusion, comment, log = _evaluate(tmp_path, fake, event)
    assert conclusion == "neutral", log
    assert "uv: No such file or directory" in comment
    assert "Decided on base's code" not in comment


SELFTEST_PROOF = {
    "conftest.py": (
        "import pathlib\n"
        "code = pathlib.Path('calc/ops.py').read_text()\n"
        "if 'a - b' not in code and 'a + b' not in code:\n"
        "    raise SystemExit('conftest: refusing to run in CI')\n"
    )
}
"""The PR's code, made to pass the task's selftest (the untouched code and the reference
patch's run their tests) and to stop every agent's grading in every arm alike."""

COMMUTED_AGENT = _agent("b + a")
"""Fixes add() as `b + a`: right, but not the reference patch's bytes."""


def test_the_cli_decides_a_prs_runs_broken_alike_by_its_code_on_bases_code(
    tmp_path: Path, fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """`docdelta run` at its defaults (`--source head`): the PR's code passes the selftest and
    then stops every run's hidden tests alike (a broken evaluation); the regression is
    still the verdict, decided on base's code, and the scorecard says so."""
    _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS, **SELFTEST_PROOF})
    repo = GitRepo(tmp_path / "ws")
    workdir = tmp_path / "work"
    args = run_args(repo, workdir, COMMUTED_AGENT, "--conditions", "base,head", "--repeats", "6")
    assert main(args) == ExitCode.OK
    out, err = capsys.readouterr()
    assert out.startswith("## docdelta scorecard: regressed"), out[:400]
    lead = out.split("> ⚠ **Decided on base's code.** ", 1)[1].split("\n", 1)[0]
    assert "the evaluation is broken" not in out
    assert "6 of 12 runs" in lead and "failed for reasons of the harness" in lead, lead
    assert "deciding on base's code" in err
    assert main(["report", "--workdir", str(workdir / ON_BASE), "--format", "json"]) == ExitCode.OK
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert summary.source_sha == summary.base_sha
    assert summary.verdict is not None and summary.verdict.kind == "regressed"


def test_a_job_matrix_asks_for_a_maintainer_when_the_prs_code_gave_no_verdict(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    """The aggregate job of a job matrix runs no agent, so it cannot decide on base's code:
    its check is `action_required` (a required check does not accept it), never `neutral`."""
    event = _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS, **SELFTEST_PROOF})
    ws, shards = tmp_path / "ws", tmp_path / "shards"
    inputs = {"agent": "command", "agent_command": COMMUTED_AGENT, "conditions": "base,head", "repeats": "6"}
    where = str(shards / "1")
    shard, log = act(
        tmp_path, ws, fake, "pull_request", event, "none", shard="1/1", results_path=where, **inputs
    )
    assert shard.title == "shard 1/1 done", log
    merged, log = act(tmp_path, ws, fake, "pull_request", event, "none", merge=str(shards), **inputs)
    assert merged.conclusion is not None and merged.conclusion.value == "action_required", log
    (comment,) = [c["body"] for c in fake.comments]
    assert "**No verdict on the PR's own code**, which changes 1 file(s) besides" in comment
    assert "rerun this evaluation with `source: base`" in comment


ENCODING = {".gitattributes": "calc/*.py working-tree-encoding=UTF-16\n"}
"""The PR's code: git is told its Python files are UTF-16, so grading cannot stage them."""


def test_a_prs_gitattributes_that_breaks_grading_does_not_turn_the_regression_neutral(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    conclusion, comment, log = _evaluate(
        tmp_path, fake, _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS, **ENCODING})
    )
    assert conclusion == "failure", log
    assert "> ⚠ **Decided on base's code.** " in comment


REFERENCE_BREAKER = {
    "calc/ops.py": "def add(a, b):\n    return a - b  # the reference patch no longer applies\n"
}
"""The PR's code: the task's reference patch cannot be applied, so its selftest cannot run."""


def test_a_pr_whose_code_the_reference_patch_cannot_apply_to_does_not_turn_the_regression_neutral(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    event = _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS, **REFERENCE_BREAKER})
    conclusion, comment, log = _evaluate(tmp_path, fake, event)
    assert conclusion == "failure", log
    assert "> ⚠ **Decided on base's code.** " in comment
