"""The bundled demo shows what it claims: better AGENTS.md -> better answers, control ties."""

from __future__ import annotations

import io
import statistics
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from docdelta.agents import AgentContext, get_agent
from docdelta.agents.fake_agent import solve
from docdelta.agents.models import AgentAnswer, RunStatus
from docdelta.agents.prompt import build_prompt
from docdelta.demo import STAMP, DemoRepo, build_demo_repo
from docdelta.errors import ConfigError
from docdelta.grading import score_answer
from docdelta.sandbox import SandboxSpec
from docdelta.sandbox.local import LocalProvider
from docdelta.tasks.models import Task
from docdelta.tasks.quotes import locate

CONDITIONS = ("base", "head", "none")
CONTROL = "install-dev"
REPEATS = 40


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True).stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    return build_demo_repo(tmp_path_factory.mktemp("demo") / "pricebook")


@pytest.fixture(scope="module")
def tasks(demo: DemoRepo) -> list[Task]:
    return [Task.model_validate(yaml.safe_load(p.read_text())) for p in sorted(demo.tasks_dir.glob("*.yaml"))]


@pytest.fixture(scope="module")
def checkouts(demo: DemoRepo, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Stand-ins for the sealed checkouts: head's tree, AGENTS.md swapped per condition, tasks removed."""
    made = {}
    for condition in CONDITIONS:
        root = tmp_path_factory.mktemp(condition) / "repo"
        archive = io.BytesIO(_git(demo.path, "archive", demo.head_sha))
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(root, filter="data")
        (root / "AGENTS.md").unlink()
        subprocess.run(["rm", "-r", str(root / ".docdelta")], check=True)
        if condition != "none":
            sha = demo.base_sha if condition == "base" else demo.head_sha
            (root / "AGENTS.md").write_bytes(_git(demo.path, "show", f"{sha}:AGENTS.md"))
        made[condition] = root
    return made


def test_history_is_reproducible_and_only_agents_md_changes(demo: DemoRepo, tmp_path: Path) -> None:
    again = build_demo_repo(tmp_path / "again")
    assert (again.base_sha, again.head_sha) == (demo.base_sha, demo.head_sha)
    assert _git(demo.path, "diff", "--name-only", demo.base_sha, demo.head_sha) == b"AGENTS.md\n"
    assert build_demo_repo(demo.path) == demo  # an identical earlier build is reused
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not this docdelta demo"):
        build_demo_repo(foreign)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_a_rebuilt_demo_is_the_stamped_one_and_a_moved_one_is_refused(tmp_path: Path) -> None:
    first = build_demo_repo(tmp_path / "pricebook")
    assert build_demo_repo(first.path) == first  # reused from its stamp
    stamp = first.path / ".git" / STAMP
    stamp.write_text("not a stamp")  # a damaged stamp: replayed and checked as before, then stamped again
    assert build_demo_repo(first.path) == first and stamp.read_text() != "not a stamp"
    (first.path / "notes.txt").write_text("mine")
    _git(first.path, "add", "notes.txt")
    _git(first.path, "-c", "user.name=me", "-c", "user.email=me@x", "commit", "-qm", "mine")
    with pytest.raises(ConfigError, match="not this docdelta demo"):
        build_demo_repo(first.path)  # the stamp matches the files, not this HEAD


def test_tasks_are_reviewed_and_gold_citations_stand_at_head(demo: DemoRepo, tasks: list[Task]) -> None:
    assert len(tasks) == 4 and all(t.reviewed for t in tasks)
    for task in tasks:
        for cite in task.gold_citations:
            text = _git(demo.path, "show", f"{demo.head_sha}:{cite.path}").decode()
            assert locate(text, cite.quote) == cite.lines, (task.id, cite)


def _score(task: Task, answer: AgentAnswer, checkout: Path) -> float:
    return score_answer(task, answer, checkout).value


def test_head_beats_base_and_none_on_instruction_tasks_and_the_control_ties(
    tasks: list[Task], checkouts: dict[str, Path]
) -> None:
    for task in tasks:
        scores = {
            cond: [
                _score(task, AgentAnswer.model_validate(solve(build_prompt(task), root, seed)[0]), root)
                for seed in range(REPEATS)
            ]
            for cond, root in checkouts.items()
        }
        means = {cond: statistics.mean(values) for cond, values in scores.items()}
        if task.id == CONTROL:
            assert scores["head"] == scores["base"] == scores["none"], means
            assert means["head"] > 0.8, means
        else:
            assert means["head"] - means["base"] > 0.3, (task.id, means)
            assert means["head"] - means["none"] > 0.3, (task.id, means)
            assert statistics.pstdev(scores["head"]) > 0, "repeats should vary a little"


def test_the_fake_agent_in_a_real_sandbox_agrees_and_head_reads_more(
    tasks: list[Task], checkouts: dict[str, Path], tmp_path: Path
) -> None:
    provider = LocalProvider(root=tmp_path / "sb")
    fake = get_agent("fake")
    task = next(t for t in tasks if t.id == "run-tests")
    tokens = {}
    for cond, root in checkouts.items():
        with provider.create(root, SandboxSpec()) as sb:
            outcome = fake.run(build_prompt(task), sb, AgentContext(seed=5))
        assert outcome.status is RunStatus.ok and outcome.answer is not None
        expected = solve(build_prompt(task), root, 5)[0]
        assert outcome.answer == AgentAnswer.model_validate(expected)
        tokens[cond] = outcome.metrics.tokens_in or 0
    assert tokens["head"] > tokens["base"] > tokens["none"]
