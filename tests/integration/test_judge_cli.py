"""`docdelta calibrate` and `docdelta judge` end to end: real files, real HTTP on 127.0.0.1
against the scripted model server, the CLI called as a user would."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from factories import detection, manifest
from modelserver import ScriptedModelServer

from docdelta.agents.models import AgentAnswer, AgentOutcome, RunStatus
from docdelta.cli.main import main
from docdelta.grading.answer import score_answer
from docdelta.results.models import AgentInfo, Cell, JudgedResult, RunResult
from docdelta.results.store import ResultStore
from docdelta.tasks.models import Task

KEY = "sk-docdelta-test-0123456789-secret"
POINT = "fix a bad commit on main with a revert pull request"
RULE = "never recommend force-pushing to main"
TASK_YAML = f"""\
id: force-push
prompt: Is it OK to force-push to main to fix a bad commit?
reviewed: true
gold:
  verdict: "no"
  points: ["{POINT}"]
  mistakes:
    - id: no-force
      pattern: "push --force"
      description: {RULE}
"""
FIXTURES_YAML = f"""\
task: force-push
fixtures:
  - answer: No. Fix it with a revert pull request.
    labels: {{"{POINT}": pass, "{RULE}": pass}}
  - answer: Yes, run git push --force.
    labels: {{"{POINT}": fail, "{RULE}": fail}}
"""
ANSWERS = {
    "base": "No, that is not allowed here.",
    "head": "No. Never force-push; fix a bad commit with a revert pull request.",
}
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def turn(*rulings: Mapping[str, Any]) -> dict[str, Any]:
    """One scripted judge reply."""
    return {"text": json.dumps({"rulings": list(rulings)})}


CALIBRATION_TURNS = [  # the two fixtures, judged right
    turn(
        {"id": "P1", "met": True, "quote": "Fix it with a revert pull request."},
        {"id": "R1", "met": True, "quote": ""},
    ),
    turn(
        {"id": "P1", "met": False, "quote": ""}, {"id": "R1", "met": False, "quote": "run git push --force"}
    ),
]
JUDGE_TURNS = [  # runs are judged in path order: base, then head
    turn({"id": "P1", "met": True, "quote": "use a revert PR instead"}, {"id": "R1", "met": True}),  # made up
    turn(
        {"id": "P1", "met": True, "quote": "fix a bad commit with a revert pull request"},
        {"id": "R1", "met": True},
    ),
]


@dataclass
class Project:
    tasks: Path
    fixtures: Path
    calibration: Path
    workdir: Path

    def judged(self, condition: str) -> Path:
        return self.workdir / "runs" / "demo" / "force-push" / condition / "r1" / "judged.json"

    def calibrate(self, url: str, *, model: str = "judge-model", provider: str = "openai") -> int:
        return main(["calibrate", *self._common(url, model, provider), "--fixtures", str(self.fixtures)])

    def judge(self, url: str, *, model: str = "judge-model", provider: str = "openai") -> int:
        return main(["judge", "--workdir", str(self.workdir), *self._common(url, model, provider)])

    def _common(self, url: str, model: str, provider: str) -> list[str]:
        base_url = url + "/v1" if provider == "openai" else url  # each SDK family's convention
        return [
            *("--tasks", str(self.tasks), "--calibration", str(self.calibration)),
            *("--judge-model", model, "--provider", provider, "--base-url", base_url),
        ]


def _run(task: Task, condition: str, checkout: Path) -> RunResult:
    answer = AgentAnswer(answer=ANSWERS[condition], verdict="no")
    return RunResult(
        cell=Cell(task=task.id, condition=condition, repeat=1),
        status=RunStatus.ok,
        outcome=AgentOutcome(
            agent="openai", agent_version="1", model="gpt-agent", status=RunStatus.ok, answer=answer
        ),
        score=score_answer(task, answer, checkout),
        isolation="netns",
        seed=1,
        started_at=T0,
        finished_at=T0,
        task_sha256="t",
        overlay_sha256="o",
        tree_sha256="x",
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    p = Project(tmp_path / "tasks", tmp_path / "rubrics", tmp_path / "calibration", tmp_path / "work")
    p.tasks.mkdir()
    (p.tasks / "force-push.yaml").write_text(TASK_YAML)
    p.fixtures.mkdir()
    (p.fixtures / "force-push.yaml").write_text(FIXTURES_YAML)
    task = Task.model_validate(yaml.safe_load(TASK_YAML))
    store = ResultStore(p.workdir)
    plan = manifest(["force-push"], ("base", "head"), repeats=1)
    store.write_manifest(
        plan.model_copy(update={"agent": AgentInfo(name="openai", version="1", model="gpt-agent")})
    )
    store.write_detection(detection())
    for condition in ("base", "head"):
        store.save("demo", _run(task, condition, tmp_path))
    return p


@pytest.fixture
def server() -> Iterator[Any]:
    """`serve(turns)` starts a scripted judge on 127.0.0.1; every server is stopped after the test."""
    servers: list[ScriptedModelServer] = []

    def serve(turns: Sequence[Mapping[str, Any]], model: str = "judge-model") -> ScriptedModelServer:
        s = ScriptedModelServer({"name": "judge", "model": model, "turns": list(turns)})
        s.start()
        servers.append(s)
        return s

    yield serve
    for s in servers:
        s.stop()


def _report(workdir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", "--workdir", str(workdir), "--format", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_calibrate_then_judge_gives_no_credit_for_a_made_up_quote(
    project: Project, server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    s = server(CALIBRATION_TURNS + JUDGE_TURNS)
    assert project.calibrate(s.url) == 0
    assert "ok   force-push: pass-class 1.00 (2), fail-class 1.00 (2)" in capsys.readouterr().out
    record = json.loads((project.calibration / "force-push.json").read_text())["records"][0]
    assert record["judge"] == {"provider": "openai", "model": "judge-model"}

    assert project.judge(s.url) == 0
    assert "2 run(s) judged, 0 reused" in capsys.readouterr().out
    base = JudgedResult.model_validate_json(project.judged("base").read_bytes())
    head = JudgedResult.model_validate_json(project.judged("head").read_bytes())
    assert base.rulings[0].met and not base.rulings[0].supported and not base.rulings[0].hit
    assert head.rulings[0].hit and head.rulings[0].quote == "fix a bad commit with a revert pull request"
    assert base.rubric_sha256 == record["rubric_sha256"]

    body = s.requests[-1]["body"]
    assert body["temperature"] == 0 and body["response_format"] == {"type": "json_object"}
    assert body["model"] == "judge-model" and not body.get("stream")
    assert ANSWERS["head"] in body["messages"][1]["content"]

    summary = _report(project.workdir, capsys)
    head_mean = summary["tasks"][0]["conditions"]["head"]["mean_score"]
    base_mean = summary["tasks"][0]["conditions"]["base"]["mean_score"]
    assert (head_mean, base_mean) == (1.0, pytest.approx(2 / 3))  # verdict, point, rule
    assert summary["confounds"]["unscored_points"] == 0
    assert "not in the answer" in summary["missed"]["base"][0]["note"]


def test_judged_results_are_reused_and_rejudged_when_the_rubric_changes(
    project: Project, server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    s = server(CALIBRATION_TURNS + JUDGE_TURNS)
    assert project.calibrate(s.url) == 0
    assert project.judge(s.url) == 0
    first = project.judged("head").read_bytes()
    calls = len(s.requests)
    capsys.readouterr()

    assert project.judge(s.url) == 0
    assert "0 run(s) judged, 2 reused" in capsys.readouterr().out
    assert len(s.requests) == calls and project.judged("head").read_bytes() == first

    new_point = "revert the commit in a pull request"
    (project.tasks / "force-push.yaml").write_text(TASK_YAML.replace(POINT, new_point))
    assert project.judge(s.url) == 2
    err = capsys.readouterr().err
    assert "task 'force-push': stale calibration" in err and "rubric is now" in err
    assert len(s.requests) == calls  # refused before any call

    (project.fixtures / "force-push.yaml").write_text(FIXTURES_YAML.replace(POINT, new_point))
    rejudge = server(
        [
            *CALIBRATION_TURNS,
            turn({"id": "P1", "met": False}, {"id": "R1", "met": True}),
            turn({"id": "P1", "met": True, "quote": "revert pull request"}, {"id": "R1", "met": True}),
        ]
    )
    assert project.calibrate(rejudge.url) == 0
    assert project.judge(rejudge.url) == 0
    assert "2 run(s) judged, 0 reused" in capsys.readouterr().out
    head = JudgedResult.model_validate_json(project.judged("head").read_bytes())
    assert head.rulings[0].expected == new_point and head.rulings[0].hit
    assert rejudge.remaining == 0


def test_a_judge_that_is_the_agents_model_is_refused(
    project: Project, server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    s = server(CALIBRATION_TURNS)
    assert project.calibrate(s.url, model="gpt-agent") == 0
    assert project.judge(s.url, model="GPT-Agent") == 2
    err = capsys.readouterr().err
    assert "judge model 'GPT-Agent' is the agent's own model" in err and "--judge-model" in err
    assert not project.judged("head").exists()


def test_missing_low_and_other_model_calibrations_are_refused_by_name(
    project: Project, server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    s = server(
        [
            CALIBRATION_TURNS[0],
            # the fail fixture: the judge credits the point with a quote that is in the answer
            turn(
                {"id": "P1", "met": True, "quote": "Yes, run git push"},
                {"id": "R1", "met": False, "quote": "--force"},
            ),
        ]
    )
    assert project.judge(s.url) == 2
    assert "task 'force-push': no calibration" in capsys.readouterr().err

    assert project.calibrate(s.url) == 2
    out = capsys.readouterr().out
    assert "FAIL force-push" in out and "fail-class accuracy 0.50 < 0.90" in out
    assert "fixture 2, point" in out and "labeled fail, the judge credited it" in out
    assert project.judge(s.url) == 2
    err = capsys.readouterr().err
    assert "task 'force-push'" in err and "fail-class accuracy 0.50" in err and "pass-class" not in err

    assert project.judge(s.url, model="another-judge") == 2
    assert "stale calibration" in capsys.readouterr().err
    assert len(s.requests) == 2  # only the calibration called the model


def test_anthropic_judge_speaks_messages(
    project: Project, server: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    s = server(CALIBRATION_TURNS + JUDGE_TURNS)
    assert project.calibrate(s.url, provider="anthropic") == 0
    assert project.judge(s.url, provider="anthropic") == 0, capsys.readouterr().err
    request = s.requests[-1]
    assert request["path"] == "/v1/messages" and request["body"]["temperature"] == 0
    assert request["headers"]["anthropic-version"] and request["auth"][0][0] == "x-api-key"
    assert JudgedResult.model_validate_json(project.judged("head").read_bytes()).judge.provider == "anthropic"


def test_the_api_key_is_sent_but_never_written_or_printed(
    project: Project, server: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    s = server([*CALIBRATION_TURNS, JUDGE_TURNS[0], {"error": 401, "message": "bad key"}])
    assert project.calibrate(s.url) == 0
    assert project.judge(s.url) == 3  # the second run's call fails: an infra error, resumable
    out = capsys.readouterr()
    assert "answered 401" in out.err and "bad key" in out.err
    sent = {value for r in s.requests for _, value in r["auth"]}
    assert sent == {hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()}
    assert KEY not in out.out + out.err
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert project.judged("base").exists() and not project.judged("head").exists()
    assert all(KEY.encode() not in p.read_bytes() for p in written)


def test_no_key_in_the_environment_is_a_clear_error(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    assert project.calibrate("http://127.0.0.1:9") == 2
    assert "needs an API key in the environment variable OPENAI_API_KEY" in capsys.readouterr().err


def test_runs_without_an_answer_miss_every_point_without_a_call_and_infra_errors_are_skipped(
    project: Project, server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ResultStore(project.workdir)
    head = store.load("demo", Cell(task="force-push", condition="head", repeat=1))
    assert head is not None
    silent = head.outcome.model_copy(update={"answer": None, "status": RunStatus.no_answer})
    store.save(
        "demo",
        head.model_copy(
            update={
                "cell": Cell(task="force-push", condition="base", repeat=2),
                "outcome": silent,
                "status": RunStatus.no_answer,
            }
        ),
    )
    store.save(
        "demo",
        head.model_copy(
            update={
                "cell": Cell(task="force-push", condition="base", repeat=3),
                "status": RunStatus.infra_error,
                "score": None,
            }
        ),
    )
    s = server(CALIBRATION_TURNS + JUDGE_TURNS)
    assert project.calibrate(s.url) == 0
    assert project.judge(s.url) == 0
    assert "3 run(s) judged, 0 reused, 1 skipped" in capsys.readouterr().out
    assert s.remaining == 0  # two calibration calls and two judged answers: the silent run cost nothing
    r2 = JudgedResult.model_validate_json(
        (project.judged("base").parent.parent / "r2" / "judged.json").read_bytes()
    )
    assert [(r.hit, r.reason) for r in r2.rulings] == [(False, "no answer to judge")] * 2
    assert not (project.judged("base").parent.parent / "r3" / "judged.json").exists()
