"""A skill-description PR on a real bundle yields a trigger-rate table, base -> head.

genai-prices' `add-price-model` skill at its head commit is the base; the PR (a commit made
here) narrows the skill's description to adding a model or updating its prices, dropping the
sentence that lists what the skill covers. The trigger tasks (examples/real/genai-prices/
triggers/) are three prompts the skill is for and three near misses. The fake agent loads a
skill when the question shares enough words with its description (never a model's choice),
and the evidence is its own reads: so the table is exact. Narrowing stops the near misses
from loading the skill (6/6 -> 2/6) and loses one prompt it is for (6/6 -> 4/6)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from docdelta.cli.main import main
from docdelta.results.models import EvidenceSource, RunResult
from docdelta.scorecard.models import Summary

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "real" / "genai-prices" / "triggers"
BASE = "47df840a5ab1"
SKILL = ".claude/skills/add-price-model/SKILL.md"
NARROWER = (
    "description: >-\n"
    "  Add a new LLM model to the genai-prices data, or record a price change for one already there.\n"
    '  Use when asked to add a model or update its prices, e.g. "add grok 4.5", "update openai o5\n'
    '  prices". Not for reading or querying prices.\n'
)


def _git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    ident = ["-c", "user.name=docdelta", "-c", "user.email=dev@docdelta"]
    done = subprocess.run(
        ["git", *ident, *args], cwd=repo, check=True, env=env, capture_output=True, text=True
    )
    return done.stdout.strip()


def _narrow_the_description(repo: Path) -> str:
    """The PR: the skill's description block replaced, its body untouched; returns the head sha."""
    _git(repo, "checkout", "-q", "-b", "narrower-skill", BASE)
    path = repo / SKILL
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("description:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    path.write_text("".join([*lines[:start], NARROWER, *lines[end:]]))
    _git(repo, "commit", "-q", "-am", "add-price-model: a narrower description")
    return _git(repo, "rev-parse", "HEAD")


def test_a_skill_description_edit_gives_trigger_rates_base_to_head(
    real_repo: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "genai-prices"
    subprocess.run(["git", "clone", "-q", str(real_repo("genai-prices")), str(repo)], check=True)
    head = _narrow_the_description(repo)
    workdir = tmp_path / "w"
    args = ["--repo", str(repo), "--base", BASE, "--head", head, "--tasks", str(EXAMPLES)]
    assert (
        main(
            [
                "run",
                *args,
                "--workdir",
                str(workdir),
                "--repeats",
                "2",
                "--sandbox",
                "local",
                "--agent",
                "fake",
            ]
        )
        == 0
    )
    results = [
        RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r*/result.json")
    ]
    assert len(results) == 6 * 3 * 2
    assert all(r.trigger is not None and r.trigger.sources == [EvidenceSource.tool_stream] for r in results)

    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    rates = {
        ("should" if r.should_load else "near miss"): {c: (a.loaded, a.runs) for c, a in r.arms.items()}
        for r in summary.triggers
    }
    assert rates == {
        "should": {"base": (6, 6), "head": (4, 6), "none": (0, 6)},
        "near miss": {"base": (6, 6), "head": (2, 6), "none": (0, 6)},
    }
    should, near = summary.triggers
    assert should.file == near.file == SKILL
    assert should.delta == pytest.approx(-1 / 3) and near.delta == pytest.approx(-2 / 3)

    assert main(["report", "--workdir", str(workdir), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert "**Picked up when it should / when it should not**" in markdown
    assert "| 3 that should load it | 6/6 (100%) | 4/6 (67%) | 0/6 (0%) | -0.33 |" in markdown
    assert "| 3 that should not (near misses) | 6/6 (100%) | 2/6 (33%) | 0/6 (0%) | -0.67 |" in markdown
    start = markdown.index("**Picked up")
    print(
        markdown[start : markdown.index("\n\n", markdown.index("| ---", start))]
    )  # the table, for the record
