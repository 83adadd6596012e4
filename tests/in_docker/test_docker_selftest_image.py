"""`docdelta selftest --sandbox docker --agent NAME` grades in the image a run of that agent
grades in: the environment image plus the agent's npm layer. Before, selftest always used the
bare environment image, so a task whose tests pass in a run's image could fail its selftest
(or the other way round).

The hidden test checks for the agent's CLI in the image (where the agent layer installs it),
next to the bug it tests; the command is a small JUnit-writing runner in the repository, run by
the image's own python3 (the base image has no pytest), declared with `report`."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import yaml
from gitrepo import GitRepo, git

from docdelta.agents.claude_code import ClaudeCodeAgent
from docdelta.agents.images import CLI_PREFIX
from docdelta.cli.main import main

pytestmark = pytest.mark.docker

CA = "/etc/ssl/certs/ca-certificates.crt"
"""The intercepting proxy's CA, for the agent layer's npm install (as the agent image tests)."""
RUNNER = textwrap.dedent("""\
    import importlib.util, sys, traceback
    from xml.sax.saxutils import quoteattr
    spec = importlib.util.spec_from_file_location("hidden", "tests/test_image.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, ".")
    spec.loader.exec_module(module)
    cases, failed = [], 0
    for name in sorted(n for n in dir(module) if n.startswith("test_")):
        case = f'<testcase classname="tests.test_image" name="{name}"'
        try:
            getattr(module, name)()
            cases.append(case + "/>")
        except Exception:
            failed += 1
            print("FAILED", name)
            cases.append(f"{case}><failure message={quoteattr(traceback.format_exc())}/></testcase>")
    with open("junit.xml", "w") as out:
        head = f'<testsuite name="hidden" tests="{len(cases)}" failures="{failed}">'
        out.write(head + "".join(cases) + "</testsuite>")
    sys.exit(1 if failed else 0)
    """)
HIDDEN = textwrap.dedent(f"""\
    import os
    from calc.ops import add


    def test_add():
        assert add(2, 3) == 5


    def test_the_agent_cli_is_in_the_image():
        assert os.access("{CLI_PREFIX}/bin/claude", os.X_OK)
    """)


def _selftest(tmp_path: Path, agent: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    base = os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(
        {
            ".docdelta.yml": yaml.safe_dump({"docker": {"base": base, "extra_ca": CA}}),
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a - b\n",
            "tests/run.py": RUNNER,
        }
    )
    (repo.path / "calc/ops.py").write_text("def add(a, b):\n    return a + b\n")
    reference = git(repo.path, "diff")
    git(repo.path, "checkout", "--", "calc/ops.py")
    tasks = tmp_path / "tasks"
    (tasks / "fix" / "hidden" / "tests").mkdir(parents=True)
    (tasks / "fix" / "hidden" / "tests" / "test_image.py").write_text(HIDDEN)
    (tasks / "fix" / "reference.patch").write_text(reference)
    validation = {"hidden": ["tests/test_image.py"], "command": "python3 tests/run.py", "report": "junit.xml"}
    task = {"id": "fix", "kind": "change", "prompt": "Fix add.", "gold": {"validation": validation}}
    (tasks / "fix.yaml").write_text(yaml.safe_dump({**task, "reviewed": True}))
    args = ["selftest", "--repo", str(repo.path), "--tasks", str(tasks), "--flake-runs", "1"]
    code = main([*args, "--sandbox", "docker", "--agent", agent])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_selftest_grades_in_the_image_of_a_run_of_the_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ClaudeCodeAgent.npm  # the agent has an npm layer, so its image differs from the bare one
    code, out = _selftest(tmp_path / "claude", "claude_code", capsys)
    assert code == 0, out
    assert out.startswith("ok   fix\n"), out
    code, out = _selftest(tmp_path / "fake", "fake", capsys)  # the fake agent's image has no CLI
    assert code == 2, out
    assert "FAIL reference passes" in out and "FAILED test_the_agent_cli_is_in_the_image" in out
