"""Arms through the real CLI: columns that vary the model, the condition or an overlay of extra
files, run by a command agent in the bubblewrap sandbox, scored, compared, resumed and refused."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from clirun import saved_results
from fakegithub import FakeGitHub, event_path
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.action import main as action_main
from docdelta.action.settings import ActionSettings, input_variable
from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.evaluation import Deps, RunOptions, evaluate
from docdelta.experiment.arms import parse_arms
from docdelta.experiment.plan import ExperimentRequest
from docdelta.experiment.reuse import arm_key
from docdelta.git import Repo
from docdelta.github.actions import ActionsRuntime
from docdelta.github.events import load_event
from docdelta.github.pygithub import PyGithubPort
from docdelta.results.models import Manifest
from docdelta.scorecard.history import History
from docdelta.scorecard.models import Summary

TASK = """\
id: {id}
prompt: How do I run the tests?
gold:
  commands: ["make check"]
reviewed: true
"""

AGENT = """\
import json, os, pathlib, sys
sys.stdin.read()
# The "strong" model finds the test command wherever the checkout states it; the "weak"
# model never looks and guesses.
found = any(
    "make check" in p.read_text(errors="replace")
    for p in pathlib.Path(".").rglob("*.md")
    if ".git" not in p.parts
)
model = os.environ.get("DOCDELTA_MODEL", "")
command = "make check" if model == "strong" and found else "python setup.py test"
print(json.dumps({"answer": f"run {command}", "commands": [command]}))
"""


def _project(tmp_path: Path) -> GitRepo:
    """AGENTS.md names `make check` at head, not at base; two tasks ask for the test command."""
    repo = GitRepo.init(tmp_path / "proj")
    (tmp_path / "agent-bin").mkdir()
    tasks = {f".docdelta/tasks/{t}.yaml": TASK.format(id=t) for t in ("tests", "tests-again")}
    config = {".docdelta.yml": sandbox_config(tmp_path / "agent-bin")}
    repo.commit({"README.md": "# proj\n", "AGENTS.md": "# Agents\nbe nice\n", **config, **tasks})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    return repo


def _agent(tmp_path: Path) -> str:
    script = tmp_path / "agent-bin" / "agent.py"
    script.write_text(textwrap.dedent(AGENT))
    return f"{sys.executable} {script}"


def _args(tmp_path: Path, repo: GitRepo, arms: str, *extra: str) -> list[str]:
    return [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(tmp_path / "work"),
        "--agent", "command", "--agent-cmd", _agent(tmp_path), "--repeats", "2", "--arms", arms, *extra,
    ]  # fmt: skip


def _summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Summary:
    capsys.readouterr()
    assert main(["report", "--workdir", str(tmp_path / "work"), "--format", "json"]) == ExitCode.OK
    return Summary.model_validate_json(capsys.readouterr().out)


def test_two_arms_differing_only_in_model_are_compared_and_a_rerun_reuses_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    history = tmp_path / "history"
    args = _args(tmp_path, repo, "weak:model=weak;strong:model=strong", "--history", str(history))
    assert main(args) == ExitCode.OK
    out = capsys.readouterr()
    assert "(8 ran, 0 reused)" in out.err
    (record,), _ = History.at(history).records()
    assert {(a.condition, a.agent.model if a.agent else None, a.mean_score) for a in record.arms} == {
        ("weak", "weak", 0.0),
        ("strong", "strong", 1.0),
    }
    assert "**Arms**" in out.out
    assert "| strong | weak | model | +1.00 |" in out.out
    assert "factors (" not in out.out  # one factor: no warning

    runs = saved_results(tmp_path / "work")
    assert {r.cell.condition for r in runs} == {"weak", "strong"}  # only the arms: no base/head/none
    assert {(r.cell.condition, r.outcome.model, r.score.value if r.score else None) for r in runs} == {
        ("weak", "weak", 0.0),
        ("strong", "strong", 1.0),
    }
    summary = _summary(tmp_path, capsys)
    assert summary.overall["strong"].mean_score == 1.0
    assert summary.overall["weak"].mean_score == 0.0
    (arms,) = summary.arms
    assert (arms.arm, arms.vs, arms.differs_in, arms.warning) == ("strong", "weak", ["model"], None)
    assert arms.overall.value == 1.0
    assert {t: d.value for t, d in arms.tasks.items()} == {"tests": 1.0, "tests-again": 1.0}
    assert (arms.arm_runs, arms.vs_runs) == (4, 4)
    # Exact stratified permutation test: each task's 2 + 2 runs split apart in 1 of 6 ways, so
    # the two-sided p is 2 x (1/6)^2.
    assert arms.overall.p_value == pytest.approx(2 / 36)
    manifest = Manifest.model_validate_json((tmp_path / "work" / "manifest.json").read_text())
    assert {n: a.agent.model for n, a in manifest.arms.items()} == {"weak": "weak", "strong": "strong"}

    assert main(args) == ExitCode.OK
    assert "(0 ran, 8 reused)" in capsys.readouterr().err
    assert saved_results(tmp_path / "work") == runs  # never rewritten


def test_an_arm_whose_model_changed_is_another_experiment_its_results_never_mix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    assert main(_args(tmp_path, repo, "weak:model=weak;strong:model=strong")) == ExitCode.OK
    capsys.readouterr()
    assert main(_args(tmp_path, repo, "weak:model=weak;strong:model=stronger")) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "holds a different experiment" in err
    assert "arms.strong.agent.model: 'strong' -> 'stronger'" in err


def test_the_cache_key_of_an_arm_holds_its_own_model_and_overlay(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    overlay = tmp_path / "extra"
    (overlay / "docs").mkdir(parents=True)
    (overlay / "docs" / "testing.md").write_text("Run `make check`.\n")
    request = ExperimentRequest(
        base="HEAD~1",
        head="HEAD",
        tasks_dir=repo.path / ".docdelta/tasks",
        conditions=["head"],
        repeats=1,
        arms=parse_arms(f"weak:model=weak;strong:model=strong;strong-docs:model=strong,overlay={overlay}"),
    )
    options = RunOptions(agent="command", agent_cmd=_agent(tmp_path))
    done = evaluate(request, options, Deps(repo=Repo(repo.path), workdir=tmp_path / "work"))
    assert done is not None
    keys = {c: arm_key(done.experiment, c) for c in ("head", "weak", "strong", "strong-docs")}
    assert len({k.digest for k in keys.values()}) == 4
    assert (keys["head"].agent.model, keys["weak"].agent.model, keys["strong"].agent.model) == (
        None,
        "weak",
        "strong",
    )
    assert keys["strong"].overlay_sha256 == keys["weak"].overlay_sha256 == keys["head"].overlay_sha256
    assert keys["strong-docs"].overlay_sha256 != keys["strong"].overlay_sha256
    # The overlay's file is in its arm's checkout only.
    assert (done.experiment.checkouts["strong-docs"].path / "docs" / "testing.md").is_file()
    assert not (done.experiment.checkouts["strong"].path / "docs").exists()


def test_an_overlay_arm_adds_its_files_and_two_factors_are_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    overlay = tmp_path / "docs-export"
    (overlay / "docs").mkdir(parents=True)
    (overlay / "docs" / "testing.md").write_text("# Testing\nRun `make check`.\n")
    arms = (
        f"plain:model=strong,condition=base;exported:model=strong,condition=base,overlay={overlay};"
        "weak-head:model=weak,vs=exported"
    )
    assert main(_args(tmp_path, repo, arms)) == ExitCode.OK
    out = capsys.readouterr().out
    summary = _summary(tmp_path, capsys)
    by_arm = {a.arm: a for a in summary.arms}
    assert by_arm["exported"].vs == "plain"
    assert by_arm["exported"].differs_in == ["overlay"]
    assert by_arm["exported"].overall.value == 1.0  # base's AGENTS.md lacks the command; the export has it
    assert by_arm["exported"].warning is None
    assert by_arm["weak-head"].vs == "exported"
    assert by_arm["weak-head"].differs_in == ["model", "condition", "overlay"]
    assert by_arm["weak-head"].warning is not None
    assert "weak-head and exported differ in 3 factors (model, condition, overlay)" in out
    assert "cannot be put down to one of them" in out


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        ("big:modle=x", "arm 'big': unknown field 'modle'; fields: condition, agent, agent_cmd, model"),
        ("big:model", "arm 'big': 'model' is not field=value"),
        ("Big:model=x", "arm 'Big': name 'Big': an arm's name is 1-32 lowercase letters"),
        ("head:model=x", "--arms: arm name 'head' is a condition's name"),
        ("a:model=x;a:model=y", "--arms: arm 'a' is declared twice"),
        ("a:condition=main", "--arms: arm 'a': condition 'main' is not one docdelta builds"),
        ("a:model=x,vs=nowhere", "--arms: arm 'a': vs 'nowhere' is not another column of this run"),
        ("a:agent=nope", "--arms: arm 'a': unknown agent 'nope'"),
        ("a:agent=fake,agent_cmd=x", "--arms: arm 'a': --agent-cmd is only for the command agent"),
        ("a:overlay=/nonexistent/dir", "--arms: arm 'a': overlay '/nonexistent/dir' is not a directory"),
    ],
)
def test_a_bad_arm_spec_exits_2_naming_the_arm_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arms: str, message: str
) -> None:
    repo = _project(tmp_path)
    with pytest.raises(SystemExit) as exited:  # argparse's own usage errors
        code = main(_args(tmp_path, repo, arms))
        raise SystemExit(code)
    assert exited.value.code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "work" / "runs").exists()  # refused before any run


def test_two_agent_commands_are_arms_that_differ_in_the_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    guesser = tmp_path / "agent-bin" / "guess.py"
    guesser.write_text('import json, sys\nsys.stdin.read()\nprint(json.dumps({"answer": "run tox"}))\n')
    reader = _agent(tmp_path)
    arms = f"reader:agent_cmd={reader},model=strong;guesser:agent_cmd={sys.executable} {guesser},model=strong"
    assert main(_args(tmp_path, repo, arms)) == ExitCode.OK
    (arm,) = _summary(tmp_path, capsys).arms
    assert (arm.arm, arm.vs, arm.differs_in, arm.overall.value) == ("guesser", "reader", ["agent"], -1.0)


def test_adaptive_repeats_need_head_and_base_beside_the_arms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    assert main(_args(tmp_path, repo, "weak:model=weak;strong:model=strong", "--repeats", "auto")) == 2
    err = capsys.readouterr().err
    assert "--repeats auto stops each task once head vs base is decided" in err
    assert "hint: give a fixed --repeats N, or add --conditions base,head" in err


def _project_with_config_arms(tmp_path: Path) -> GitRepo:
    """`.docdelta.yml` declares an arm: base's docs plus a docs export committed in the repo."""
    repo = GitRepo.init(tmp_path / "proj")
    (tmp_path / "agent-bin").mkdir()
    config = yaml.safe_load(sandbox_config(tmp_path / "agent-bin"))
    config["arms"] = [{"name": "base-docs", "condition": "base", "overlay": "arms/docs-export"}]
    export = "arms/docs-export/docs/testing.md"
    repo.commit(
        {
            "README.md": "# proj\n",
            "AGENTS.md": "# Agents\nbe nice\n",
            ".docdelta.yml": yaml.safe_dump(config),
            ".docdelta/tasks/tests.yaml": TASK.format(id="tests"),
            export: "# Testing\nRun `make check`.\n",
        }
    )
    # The PR edits the export too: the arm must read the trusted base's copy, not the head's.
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n", export: "# Testing\nsoon\n"})
    return repo


def test_docdelta_yml_arms_join_the_conditions_with_an_overlay_read_from_the_base_ref(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project_with_config_arms(tmp_path)
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(tmp_path / "work"),
        "--agent", "command", "--agent-cmd", _agent(tmp_path), "--model", "strong",
        "--repeats", "2", "--conditions", "base,head",
    ]  # fmt: skip
    assert main(args) == ExitCode.OK
    out = capsys.readouterr().out
    assert "## docdelta scorecard: inconclusive · head - base +1.00" in out  # head vs base leads
    assert "**Arms**" in out
    summary = _summary(tmp_path, capsys)
    assert summary.conditions == ["base", "head", "base-docs"]
    # The export's directory is stripped from every checkout: base does not see it as source.
    assert {c: summary.overall[c].mean_score for c in summary.conditions} == {
        "base": 0.0,
        "head": 1.0,
        "base-docs": 1.0,
    }
    (arm,) = summary.arms
    assert (arm.arm, arm.vs, arm.differs_in, arm.overall.value) == ("base-docs", "base", ["overlay"], 1.0)


def test_the_actions_pr_comment_shows_the_docdelta_yml_arms(tmp_path: Path) -> None:
    repo = _project_with_config_arms(tmp_path)
    base, head = (repo.git("rev-parse", ref).strip() for ref in ("HEAD~1", "HEAD"))
    payload = json.loads(event_path("pull_request.opened").read_text())
    payload["pull_request"]["base"]["sha"] = base  # EDIT: this repository's commits
    payload["pull_request"]["head"]["sha"] = head
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload))
    inputs = {
        "agent": "command",
        "agent-command": _agent(tmp_path),
        "model": "strong",
        "sandbox": "local",
        "conditions": "base,head",
        "repeats": "2",
    }
    with FakeGitHub() as fake:
        fake.add_pull(2, base, head, [("AGENTS.md", "modified")])
        env = {
            "GITHUB_REPOSITORY": fake.repo,
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_WORKSPACE": str(repo.path),
            "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
            "INPUT_GITHUB-TOKEN": fake.token,
            "INPUT_RESULTS-PATH": str(tmp_path / "action"),
        } | {input_variable(k): v for k, v in inputs.items()}
        settings = ActionSettings.from_env(env)
        port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
        result = action_main.action(
            settings, load_event("pull_request", event), port, ActionsRuntime.from_env(env, io.StringIO())
        )
        assert result.activity == "evaluate", result.title
        (comment,) = fake.comments
    body = comment["body"]
    assert "**Arms**" in body
    assert "| base-docs | base | overlay | +1.00 |" in body
    assert "base + overlay arms/docs-export" in body


def test_plan_counts_the_arms_cells_as_run_plans_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path)
    base = ["plan", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD"]
    base += ["--tasks", str(repo.path / ".docdelta/tasks"), "--repeats", "2"]
    capsys.readouterr()
    assert main([*base, "--arms", "a:model=x;b:model=y"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["cells"] == 2 * 2 * 2  # tasks x arms x repeats
    assert main([*base, "--arms", "a:model=x", "--conditions", "base,head"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["cells"] == 2 * 3 * 2
