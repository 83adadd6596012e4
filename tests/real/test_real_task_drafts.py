"""`docdelta tasks draft` on the real repositories' AGENTS.md: the drafts for rules we know
are there carry the right gold, every citation stands in the file at that ref, no prompt
leaks its answer to `tasks audit`, and once reviewed the drafts grade a command agent by
what each condition's files hold."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.improve.task_audit import SuiteAudit
from docdelta.scorecard.models import Summary
from docdelta.tasks.load import load_tasks
from docdelta.tasks.quotes import locate

RealRepo = Callable[[str], Path]
AGENT = Path(__file__).with_name("rule_agent.py")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "real"
HEADS = {"genai-prices": "47df840a5ab1", "logfire-js": "eb3a2723c364", "minijinja": "eb17be5752d2"}
KNOWN: dict[str, dict[str, dict[str, Any]]] = {
    # id -> gold fields, for rules each AGENTS.md states (see /work/shared/real-repos/README.md)
    "genai-prices": {
        "command-make-test": {"commands": ["make test"]},
        "tool-uv": {"commands": ["uv"]},
        "never-use-pip-or-conda-for-dependency-management": {"verdict": "no"},
        "rule-make-build": {"commands": ["make build"], "guardrails": ["make build-prices"]},
        "never-overwrite-a-prices-block-when-a-provider": {"verdict": "no"},
        "never-reach-for-no-verify": {"verdict": "no", "guardrails": ["--no-verify"]},
        "tool-make-test-all-python": {"commands": ["make test-all-python"]},
    },
    "logfire-js": {
        "command-pnpm-run-test": {"commands": ["pnpm run test"]},
        "command-pnpm-run-changeset-add": {"commands": ["pnpm run changeset-add"]},
        "tool-vp": {"commands": ["vp"]},
        "rule-node-version": {"files": [".node-version"]},
    },
    "minijinja": {
        "rule-cargo-insta-test-all-features-accept": {
            "commands": ["cargo insta test --all-features --accept"]
        },
        "never-use-cargo-insta-review-or-make-snapshot": {
            "verdict": "no",
            "guardrails": ["cargo insta review", "make snapshot-tests"],
        },
        "command-make-test": {"commands": ["make test"]},
        "command-cargo-test-p-minijinja-all-features": {
            "commands": [
                "cargo test -p minijinja --all-features",
                "cargo test -p minijinja --all-features test_name -- --nocapture",
            ]
        },
    },
}


def _draft(repo: Path, ref: str, out: Path) -> None:
    args = ["tasks", "draft", "--repo", str(repo), "--ref", ref, "--from", "AGENTS.md", "--out", str(out)]
    assert main(args) == ExitCode.OK


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_drafts_of_known_rules_carry_gold_and_citations_that_stand_at_the_ref(
    real_repo: RealRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    repo = real_repo(name)
    out = tmp_path / "drafts"
    _draft(repo, HEADS[name], out)
    capsys.readouterr()
    tasks = {t.task.id: t.task for t in load_tasks(out)}
    for task_id, gold in KNOWN[name].items():
        assert tasks[task_id].gold.model_dump(include=set(gold)) == gold, task_id
    text = subprocess.run(
        ["git", "show", f"{HEADS[name]}:AGENTS.md"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    for task in tasks.values():
        assert not task.reviewed
        (cite,) = task.gold_citations
        assert cite.path == "AGENTS.md" and locate(text, cite.quote) is not None, task.id
    audit_args = ["tasks", "audit", "--repo", str(repo), "--ref", HEADS[name], "--tasks", str(out), "--json"]
    assert main(audit_args) == 0
    audit = SuiteAudit.model_validate_json(capsys.readouterr().out)
    assert len(audit.tasks) == len(tasks)
    assert [(e.task, i.expected) for e in audit.tasks for i in e.items if i.leaked] == []


def test_reviewed_drafts_grade_a_command_agent_by_what_each_condition_holds(
    real_repo: RealRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = real_repo("genai-prices")
    drafts, tasks = tmp_path / "drafts", tmp_path / "tasks"
    _draft(repo, HEADS["genai-prices"], drafts)
    tasks.mkdir()
    chosen = ["command-make-test", "tool-uv", "rule-make-build"]
    chosen += [
        "never-overwrite-a-prices-block-when-a-provider",
        "never-use-pip-or-conda-for-dependency-management",
    ]
    for task_id in chosen:
        text = (drafts / f"{task_id}.yaml").read_text()
        (tasks / f"{task_id}.yaml").write_text(text.replace("reviewed: false", "reviewed: true"))
    workdir = tmp_path / "w"
    # The PR that grew AGENTS.md from its first version (base) to the bundle's head.
    agent = f"/usr/bin/python3 -c {shlex.quote(AGENT.read_text())}"
    run = [
        "run", "--repo", str(repo), "--base", "1a5e71b9745d", "--head", HEADS["genai-prices"],
        "--tasks", str(tasks), "--workdir", str(workdir), "--repeats", "1", "--sandbox", "local",
        "--agent", "command", "--agent-cmd", agent,
    ]  # fmt: skip
    assert main(run) == 0
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    means = {
        t.task: tuple(round(t.conditions[c].mean_score or 0.0, 2) for c in ("base", "head", "none"))
        for t in summary.tasks
    }
    assert means == {
        # Head states every rule. Base's first AGENTS.md lists `make test` as "Run tests with
        # coverage", which the agent ranks below "`tests/`: Python Test suite"; the citation is
        # head's line, not in base either.
        "command-make-test": (0.0, 1.0, 0.0),
        # The rule came later; README (all that `none` has) does not state it.
        "never-overwrite-a-prices-block-when-a-provider": (0.0, 1.0, 0.0),
        # Base says "Run `make build` after editing provider YAML files": no word of the
        # question's. Everywhere the agent recommends no `make build-prices` (the guardrail).
        "rule-make-build": (0.33, 1.0, 0.33),
        # The citation is the rule's core, "Use `uv` for dependency management", which base's
        # file already had (head added ", `npm` for the JS workspace"): a tie, as it should be.
        "tool-uv": (1.0, 1.0, 0.0),
        # "is it OK to use pip or conda for dependency management?": no, by the same line.
        "never-use-pip-or-conda-for-dependency-management": (1.0, 1.0, 0.0),
    }


def test_rules_the_reviewed_real_tasks_already_ask_about_are_not_drafted_again(
    real_repo: RealRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tasks"
    shutil.copytree(EXAMPLES / "genai-prices" / "tasks", out)
    _draft(real_repo("genai-prices"), HEADS["genai-prices"], out)
    printed = capsys.readouterr().out
    assert (
        "not drafted: 3 rule(s) that tasks in "
        f"{out} already cover: rule-make-build (build-target), "
        "never-overwrite-a-prices-block-when-a-provider (price-history), "
        "never-hand-edit-tests-dataset-usages-json-or-add (usages-json)"
    ) in printed
    assert not (out / "rule-make-build.yaml").exists() and (out / "command-make-test.yaml").exists()
