"""`docdelta run` of an agent that calls a model, with no key for it: refused before any image
is pulled or built (a first build takes minutes), naming the one variable that agent needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import pr_args
from gitrepo import GitRepo
from toolchain import MAKE_CHECK_TASK

from docdelta.cli.main import main


def test_a_model_agent_without_its_key_is_refused_first_naming_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({"AGENTS.md": "# Agents\n", ".docdelta/tasks/test-cmd.yaml": MAKE_CHECK_TASK})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n", "CLAUDE.md": "@AGENTS.md\n"})
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    # No engine answers here: a refusal that came after touching Docker would be Docker's error.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    args = [*pr_args(repo, repo.path / ".docdelta/tasks", tmp_path / "work"), "--agent", "claude_code"]
    assert main([*args, "--sandbox", "docker"]) == 2
    err = capsys.readouterr().err
    assert "the model gateway has no API key for claude_code, which speaks to the anthropic API" in err
    assert "hint: set ANTHROPIC_API_KEY in the environment" in err
    assert "OPENAI_API_KEY" not in err and "Traceback" not in err
