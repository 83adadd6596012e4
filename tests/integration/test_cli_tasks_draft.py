"""`docdelta tasks draft` on the demo through the CLI: drafts that load, leak nothing to the
audit, are refused by `run` until reviewed, and once reviewed grade like hand-written tasks
under the fake agent (which answers from whatever its checkout's files say)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from gitrepo import GitRepo

from docdelta.cli.main import main
from docdelta.demo import DemoRepo, build_demo_repo
from docdelta.errors import ExitCode
from docdelta.improve.task_audit import GoldLabel, SuiteAudit
from docdelta.scorecard.models import Summary
from docdelta.tasks.load import load_tasks
from docdelta.tasks.quotes import locate

DRAFTED: dict[str, dict[str, object]] = {
    # id: what the demo's head AGENTS.md says, as gold
    "rule-make-check": {"commands": ["make check"]},
    "rule-pricebook-currencies-py": {
        "files": ["pricebook/currencies.py", "pricebook/symbols.py", "tests/test_tables.py"]
    },
    "never-force-push-to-main": {"verdict": "no", "guardrails": ["git push --force"]},
}


def _draft(demo: DemoRepo, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    args = ["tasks", "draft", "--repo", str(demo.path), "--ref", demo.head_sha, "--from", "AGENTS.md"]
    assert main([*args, "--out", str(out)]) == ExitCode.OK
    return capsys.readouterr().out


def test_drafts_carry_gold_and_citations_of_the_head_file_and_leak_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = build_demo_repo(tmp_path / "pricebook")
    out = tmp_path / "drafts"
    printed = _draft(demo, out, capsys)
    assert f"drafted 3 task(s) from AGENTS.md at {demo.head_sha[:12]}" in printed
    loaded = {t.task.id: t.task for t in load_tasks(out)}
    assert set(loaded) == set(DRAFTED)
    head_file = (demo.path / "AGENTS.md").read_text()
    for task_id, gold in DRAFTED.items():
        task = loaded[task_id]
        assert not task.reviewed
        assert task.gold.model_dump(include=set(gold)) == gold
        (cite,) = task.gold_citations
        assert cite.path == "AGENTS.md" and locate(head_file, cite.quote) is not None
    assert loaded["never-force-push-to-main"].gold_citations[0].quote == "Never force-push to `main`"
    assert "make check" not in loaded["rule-make-check"].prompt

    assert main(["tasks", "audit", "--repo", str(demo.path), "--tasks", str(out), "--json"]) == 0
    audit = SuiteAudit.model_validate_json(capsys.readouterr().out)
    assert [i for e in audit.tasks for i in e.items if i.leaked] == []
    assert {e.task: e.label for e in audit.tasks} == dict.fromkeys(DRAFTED, GoldLabel.target)

    # A rerun drafts nothing the tasks there already cover, and so keeps a reviewer's edits.
    (out / "rule-make-check.yaml").write_text((out / "rule-make-check.yaml").read_text() + "# edited\n")
    again = _draft(demo, out, capsys)
    assert (
        "drafted 0 task(s)" in again
        and f"not drafted: 3 rule(s) that tasks in {out} already cover\n" in again
    )
    assert (out / "rule-make-check.yaml").read_text().endswith("# edited\n")


def test_rules_the_hand_written_tasks_cover_are_not_drafted_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = build_demo_repo(tmp_path / "pricebook")
    out = tmp_path / "tasks"
    shutil.copytree(demo.tasks_dir, out)
    printed = _draft(demo, out, capsys)
    # run-tests, currency-sync and force-push cite the same lines of AGENTS.md.
    assert "drafted 0 task(s)" in printed
    assert (
        f"not drafted: 3 rule(s) that tasks in {out} already cover: rule-make-check (run-tests), "
        "rule-pricebook-currencies-py (currency-sync), never-force-push-to-main (force-push)"
    ) in printed
    assert sorted(p.name for p in out.glob("*.yaml")) == sorted(p.name for p in demo.tasks_dir.glob("*.yaml"))


def test_a_file_the_ref_does_not_hold_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = build_demo_repo(tmp_path / "pricebook")
    args = ["tasks", "draft", "--repo", str(demo.path), "--ref", demo.base_sha, "--from", "CLAUDE.md"]
    assert main([*args, "--out", str(tmp_path / "drafts")]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"--from CLAUDE.md: no such file at {demo.base_sha} ({demo.base_sha[:12]})" in err
    assert "Traceback" not in err and not (tmp_path / "drafts").exists()


def test_a_missing_file_is_refused_naming_the_instruction_files_the_ref_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hint names what is there (CLAUDE.md), never the file that is missing."""
    repo = GitRepo.init(tmp_path / "proj")
    sha = repo.commit({"README.md": "# proj\n", "CLAUDE.md": "# Claude\nRun `make check`.\n"})
    args = [
        "tasks",
        "draft",
        "--repo",
        str(repo.path),
        "--from",
        "AGENTS.md",
        "--out",
        str(tmp_path / "drafts"),
    ]
    assert main(args) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"--from AGENTS.md: no such file at HEAD ({sha[:12]})" in err
    assert "hint: pass an instruction file the commit holds: --from CLAUDE.md" in err


def test_run_refuses_drafts_until_reviewed_then_the_fake_agent_scores_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = build_demo_repo(tmp_path / "pricebook")
    out = tmp_path / "drafts"
    _draft(demo, out, capsys)
    workdir = tmp_path / "w"
    run = [
        "run", "--repo", str(demo.path), "--base", demo.base_sha, "--head", demo.head_sha,
        "--tasks", str(out), "--workdir", str(workdir), "--agent", "fake", "--repeats", "2",
    ]  # fmt: skip
    assert main(run) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "unreviewed gold in 3 task(s)" in err and "never-force-push-to-main" in err
    assert not (workdir / "runs").exists()

    for path in out.glob("*.yaml"):  # what the reviewer does once satisfied
        path.write_text(path.read_text().replace("reviewed: false", "reviewed: true"))
    assert main(run) == ExitCode.OK
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    means = {
        t.task: tuple(t.conditions[c].mean_score for c in ("base", "head", "none")) for t in summary.tasks
    }
    # Head's AGENTS.md states every rule: the fake finds each line and cites it. Base's thin
    # notes and no instruction file at all hold none of them.
    assert {task: m[1] for task, m in means.items()} == dict.fromkeys(DRAFTED, 1.0)
    assert all(m[0] is not None and m[0] < 1.0 and m[2] is not None and m[2] < 1.0 for m in means.values())
    force = json.loads(next(workdir.glob("runs/*/never-force-push-to-main/head/r1/result.json")).read_text())
    assert {i["kind"]: i["hit"] for i in force["score"]["items"]} == {
        "citation": True,
        "verdict": True,
        "guardrail": True,
    }
