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
from fakegithub import FakeGitHub
from gitrepo import GitRepo
from toolchain import sandbox_config

pytestmark = pytest.mark.timeout(600)

HIDDEN_TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
REFERENCE = """\
diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
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

AGENT = f"{sys.executable} -c " + shlex.quote(
    "import json, pathlib\n"
    "if 'a + b' in pathlib.Path('AGENTS.md').read_text():\n"
    "    pathlib.Path('calc/ops.py').write_text('def add(a, b):\\n    return a + b\\n')\n"
    "print(json.dumps({'answer': 'done'}))\n"
)
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
    head = repo.commit(head_files)
    fake.add_pull(1, base, head, [(p, "modified" if c is not None else "removed") for p, c in head_files.items()])
    return pr_event(tmp_path, 1, base, head)


def _evaluate(tmp_path: Path, fake: FakeGitHub, event: Path) -> tuple[str, str, str]:
    """The Action at its defaults (`source: head`, `fail-on: regression`) but for the agent,
    the local sandbox and a fixed design: (conclusion, comment, log)."""
    result, log = act(
        tmp_path, tmp_path / "ws", fake, "pull_request", event, "none",
        agent="command", agent_command=AGENT, conditions="base,head", repeats="6",
    )  # fmt: skip
    assert result.conclusion is not None, log
    (comment,) = [c["body"] for c in fake.comments]
    return result.conclusion.value, comment, log


def test_a_docs_regression_alone_fails_the_check(tmp_path: Path, fake: FakeGitHub) -> None:
    conclusion, comment, log = _evaluate(tmp_path, fake, _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS}))
    assert conclusion == "failure", log
    assert "decided on base's code" not in comment


def test_breaking_the_prs_own_code_too_does_not_turn_the_regression_neutral(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    event = _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS, **SABOTAGE})
    conclusion, comment, log = _evaluate(tmp_path, fake, event)
    assert conclusion == "failure", log
    assert "decided on base's code" in comment, comment
    assert "conftest: refusing to run in CI" in comment  # why the PR's own code gave no verdict


def test_a_harness_that_fails_on_bases_code_too_stays_neutral(tmp_path: Path, fake: FakeGitHub) -> None:
    """No uv in the sandbox: the hidden tests cannot run on either commit's code. That is
    docdelta's (or the task's) failure, not the PR's, so it blocks no PR."""
    event = _pr(tmp_path, fake, {"AGENTS.md": BAD_DOCS, **SABOTAGE}, command="uv run --frozen pytest -q")
    conclusion, comment, log = _evaluate(tmp_path, fake, event)
    assert conclusion == "neutral", log
    assert "uv: No such file or directory" in comment
