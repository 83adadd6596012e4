"""`docdelta run --history`, `docdelta history` and `docdelta receipt` through the CLI with
a command agent: one record per evaluation, receipts by exact content."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from clirun import run_args
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.scorecard.history import LEGACY_FILE, History, Receipt, ReceiptEntry, content_digest

AGENT = """\
import json, os, sys
sys.stdin.read()
docs = open("AGENTS.md").read() if os.path.exists("AGENTS.md") else ""
print(json.dumps({"answer": "ok", "commands": ["make check"] if "make check" in docs else ["pytest"]}))
"""
TASK = "id: {id}\nprompt: {prompt}\ngold:\n  commands: [make check]\nreviewed: true\n"
GOOD = "# Agents\n\nRun `make check` before you push.\n"


def test_an_evaluation_is_recorded_once_and_only_its_exact_head_content_has_a_receipt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    bin_dir = tmp_path / "agent-bin"
    bin_dir.mkdir()
    (bin_dir / "agent.py").write_text(textwrap.dedent(AGENT))
    tasks = {
        f".docdelta/tasks/{tid}.yaml": TASK.format(id=tid, prompt=prompt)
        for tid, prompt in (("tests", "How do I run the tests?"), ("check", "What do I run before a push?"))
    }
    repo.commit({".docdelta.yml": sandbox_config(bin_dir), "AGENTS.md": "# Agents\n", **tasks})
    repo.commit({"AGENTS.md": GOOD})
    history = tmp_path / "history"
    agent = f"{sys.executable} {bin_dir / 'agent.py'}"
    args = [*run_args(repo, tmp_path / "w", agent, "--repeats", "5"), "--history", str(history)]
    assert main(args) == 0
    assert "(recorded)" in capsys.readouterr().err
    assert main(args) == 0  # a rerun: every run reused, the same evaluation
    assert "(already recorded)" in capsys.readouterr().err

    (record,), skipped = History.at(history).records()
    assert skipped == 0 and record.pr is None
    assert record.verdict is not None and record.verdict.kind == "improved"
    head = next(a for a in record.arms if a.condition == "head")
    assert head.files == {"AGENTS.md": content_digest(GOOD.encode())} and head.mean_score == 1.0
    assert set(record.tasks) == {"tests", "check"} and record.task_scores["tests"]["base"] == 0.0

    assert main(["history", "--history", str(history), "--file", "AGENTS.md"]) == 0
    shown = capsys.readouterr().out
    assert f"AGENTS.md@{content_digest(GOOD.encode())[:12]}" in shown
    assert "base 0.00 · head 1.00 · none 0.00  improved +1.00" in shown

    receipt = ["receipt", "--history", str(history), "--file", "AGENTS.md", "--repo", str(repo.path)]
    assert main([*receipt, "--ref", "HEAD"]) == 0
    assert "passed `fail-on: regression`" in capsys.readouterr().out
    assert main(receipt) == 0  # the work tree holds the same bytes
    # The base's content was never the head arm; an edit after the evaluation has no receipt.
    assert main([*receipt, "--ref", "HEAD~1"]) == ExitCode.NO_RECEIPT
    (repo.path / "AGENTS.md").write_text(GOOD + "Be kind.\n")
    assert main(receipt) == ExitCode.NO_RECEIPT
    assert "no evaluation of this exact content is recorded" in capsys.readouterr().err

    # An earlier version's layout is still read: history.ndjson, where a line a crash cut short
    # is skipped and said so, and receipts/<sha256>.json; a rerun into it adds no second record.
    legacy = tmp_path / "legacy"
    (legacy / "receipts").mkdir(parents=True)
    (legacy / LEGACY_FILE).write_text(record.model_dump_json() + '\n{"schema_version": 1, "experi')
    entry = ReceiptEntry.model_validate(record.model_dump(include=set(ReceiptEntry.model_fields)))
    digest = content_digest(GOOD.encode())
    old = Receipt(sha256=digest, paths=["AGENTS.md"], evaluations=[entry])
    (legacy / "receipts" / f"{digest}.json").write_text(old.model_dump_json())
    assert main(["history", "--history", str(legacy)]) == 0
    out = capsys.readouterr().out
    assert "improved +1.00" in out and "(1 unreadable record(s) skipped)" in out
    assert main([*receipt[:2], str(legacy), *receipt[3:], "--ref", "HEAD"]) == 0
    assert main([*args[:-1], str(legacy)]) == 0
    assert "(already recorded)" in capsys.readouterr().err
    assert not (legacy / "records").exists()
