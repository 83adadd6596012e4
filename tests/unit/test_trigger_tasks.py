"""Trigger tasks: the task kind, the evidence that an on-demand file was loaded (the gateway's
fingerprint match on real request bodies, the agent's tool calls, never its answer), and how
a run is graded, including the run without evidence, which is never a pass."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
import yaml
from docker_helpers import RUN_TOKEN, gateway_on_loopback
from factories import result, summary_of
from modelserver import ScriptedModelServer
from modelserver.script import Script, TextTurn, TurnUsage

from docdelta.agents.models import AgentAnswer, AgentMetrics
from docdelta.errors import TaskError
from docdelta.gateway.config import GatewayConfig, Upstream
from docdelta.gateway.fingerprint import match, request_lines
from docdelta.gateway.models import ModelCall
from docdelta.grading.trigger import evidence, score_trigger
from docdelta.instructions.audit import AuditIndex, audit_run, body, body_reached, build_index
from docdelta.instructions.models import ChangedFile, Detection, FileStatus
from docdelta.report import render_json, render_markdown
from docdelta.report.html import render_html
from docdelta.results.models import EvidenceSource, RunResult, TriggerEvidence
from docdelta.tasks.load import load_tasks
from docdelta.tasks.models import Task, Trigger
from docdelta.vocabulary import ConditionSpec, sha256_hex

SKILL = ".claude/skills/release/SKILL.md"
FRONT = "---\nname: release\ndescription: {}\n---\n"
BODY = """# Cutting a release
Bump the version in pyproject.toml and in src/pkg/__init__.py together.
Write the changelog entry under the new version heading before tagging.
Tag with `git tag -s vX.Y.Z` and push the tag; CI publishes the wheel.
"""
BASE_SKILL = FRONT.format("Release steps.") + BODY
HEAD_SKILL = FRONT.format("Use when asked to cut, tag or publish a release of the package.") + BODY


def _task(**kw: object) -> dict[str, object]:
    return {"id": "t", "prompt": "Cut release 1.2.0", **kw}


def test_a_trigger_task_names_its_file_and_whether_it_should_load() -> None:
    task = Task.model_validate(_task(kind="trigger", trigger={"file": SKILL, "should_load": False}))
    assert task.trigger == Trigger(file=SKILL, should_load=False)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (_task(kind="trigger"), "needs `trigger:"),
        (_task(trigger={"file": SKILL, "should_load": True}), "only for `kind: trigger`"),
        (
            _task(kind="trigger", trigger={"file": SKILL, "should_load": True}, gold={"files": ["x"]}),
            "remove `gold`",
        ),
        (
            _task(kind="trigger", trigger={"file": "../x/SKILL.md", "should_load": True}),
            "plain repository path",
        ),
        (_task(kind="trigger", trigger={"file": SKILL}), "should_load"),
    ],
)
def test_a_malformed_trigger_task_is_refused_naming_the_file_and_field(
    tmp_path: Path, data: dict[str, object], says: str
) -> None:
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(TaskError) as err:
        load_tasks(tmp_path)
    assert "t.yaml" in str(err.value)
    assert says in str(err.value)


@pytest.fixture
def index(tmp_path: Path) -> AuditIndex:
    specs, checkouts = [], {}
    for name, skill in (("base", BASE_SKILL), ("head", HEAD_SKILL), ("none", None)):
        root = tmp_path / name
        files = {"AGENTS.md": "# Agents\nRun the unit tests with `make check` before every push.\n"}
        if skill is not None:
            files[SKILL] = skill
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        digests = {rel: sha256_hex(text.encode()) for rel, text in files.items()}
        specs.append(ConditionSpec(name=name, files=digests, overlay_sha256=name))
        checkouts[name] = root
    changed = [ChangedFile(path=SKILL, status=FileStatus.modified, families=["claude_code"])]
    return build_index(specs, checkouts, Detection(base="b", head="h", changed=changed), [SKILL])


def call(index: AuditIndex, *texts: str, tool: str | None = None) -> ModelCall:
    """The call the gateway logs for a Claude Code request holding `texts` (and a tool output)."""
    messages: list[dict[str, object]] = [
        {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}
    ]
    if tool is not None:
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "1", "content": tool}]}
        )
    found = match(index.fingerprints, *request_lines(json.dumps({"messages": messages}).encode()))
    return ModelCall(
        upstream="anthropic",
        method="POST",
        path="/v1/messages",
        status=200,
        latency_s=0.1,
        instructions=found,
    )


LISTING = (
    "<system-reminder>Skills available:\n"
    "- release: Use when asked to cut, tag or publish a release of the package.\n</system-reminder>"
)


def test_the_description_in_the_skill_listing_is_not_a_load(index: AuditIndex) -> None:
    calls = [call(index, LISTING, "Cut release 1.2.0")]
    assert body_reached(index, "head", SKILL, calls) is False


@pytest.mark.parametrize("how", ["injected", "read with a tool", "whole file read"])
def test_the_body_reaching_the_model_is_a_load_of_that_conditions_file(index: AuditIndex, how: str) -> None:
    sent = {
        "injected": call(
            index,
            LISTING,
            f"Base directory for this skill: /workspace/.claude/skills/release\n\n{body(HEAD_SKILL)}",
        ),
        "read with a tool": call(
            index, LISTING, tool="\n".join(f"{i}\t{line}" for i, line in enumerate(BODY.splitlines(), 1))
        ),
        "whole file read": call(index, LISTING, tool=HEAD_SKILL),
    }[how]
    assert body_reached(index, "head", SKILL, [sent]) is True
    # The body is the same in both; a whole file is the head's version, which base never holds.
    assert body_reached(index, "base", SKILL, [sent]) is (how != "whole file read")
    assert body_reached(index, "none", SKILL, [sent]) is False  # none has no such file
    assert audit_run(index, "head", [sent]).foreign == []  # body ids stay out of the audit


def test_no_forwarded_call_is_no_evidence(index: AuditIndex) -> None:
    refused = call(index, BODY).model_copy(update={"error": "budget"})
    assert body_reached(index, "head", SKILL, []) is None
    assert body_reached(index, "head", SKILL, [refused]) is None


def test_loaded_when_either_record_saw_it_and_never_from_the_answer() -> None:
    should = Trigger(file=SKILL, should_load=True)
    read = AgentMetrics(files_read=[f"/workspace/{SKILL}"])
    assert evidence(should, gateway=False, metrics=read, tool_stream=True).loaded is True
    assert evidence(should, gateway=True, metrics=AgentMetrics(), tool_stream=False).loaded is True
    both = evidence(should, gateway=False, metrics=AgentMetrics(), tool_stream=True)
    assert (both.loaded, both.sources) == (False, [EvidenceSource.gateway, EvidenceSource.tool_stream])
    # a user's command agent reports files_read itself: no gateway, no evidence
    claimed = evidence(should, gateway=None, metrics=read, tool_stream=False)
    assert claimed.loaded is None
    assert AgentAnswer(answer=f"I used {SKILL}", files=[SKILL]) is not None  # an answer is never consulted


def test_a_trigger_run_scores_one_when_loaded_matches_should_load_and_none_without_evidence() -> None:
    near_miss = Trigger(file=SKILL, should_load=False)
    loaded = evidence(near_miss, gateway=True, metrics=AgentMetrics(), tool_stream=False)
    assert score_trigger(loaded).value == 0.0
    quiet = evidence(near_miss, gateway=False, metrics=AgentMetrics(), tool_stream=False)
    assert score_trigger(quiet).value == 1.0
    unknown = score_trigger(evidence(near_miss, gateway=None, metrics=AgentMetrics(), tool_stream=False))
    assert [i.hit for i in unknown.items] == [None]  # unmeasured: left out of every statistic
    assert "no evidence" in unknown.items[0].note


def _runs(
    task: str, condition: str, loaded: Sequence[bool | None], *, should: bool, file: str = SKILL
) -> list[RunResult]:
    """Graded trigger runs of one arm, scored as the runner scores them."""
    out = []
    for repeat, was in enumerate(loaded, 1):
        found = TriggerEvidence(
            file=file, should_load=should, loaded=was, sources=[] if was is None else [EvidenceSource.gateway]
        )
        run = result(task, condition, 0.0, repeat)
        out.append(run.model_copy(update={"trigger": found, "score": score_trigger(found)}))
    return out


def test_the_scorecard_shows_trigger_rates_base_to_head_for_both_kinds_of_prompt() -> None:
    results = [
        *_runs("should-a", "base", [False, False, True], should=True),
        *_runs("should-a", "head", [True, True, True], should=True),
        *_runs("should-b", "base", [False, False, False], should=True),
        *_runs("should-b", "head", [True, True, None], should=True),
        *_runs("near-miss", "base", [True, False, False], should=False),
        *_runs("near-miss", "head", [False, False, False], should=False),
    ]
    s = summary_of(results)
    should, near = s.triggers
    assert (should.should_load, should.tasks, near.should_load) == (True, 2, False)
    assert (should.arms["base"].loaded, should.arms["base"].runs) == (1, 6)
    assert (should.arms["head"].loaded, should.arms["head"].runs, should.arms["head"].no_evidence) == (
        5,
        5,
        1,
    )
    assert should.delta == pytest.approx(((1 - 1 / 3) + (1 - 0)) / 2)  # the mean over prompts
    assert should.ci_low is not None and should.ci_high is not None and should.delta is not None
    assert should.ci_low <= should.delta <= should.ci_high
    assert should.p_value is not None and should.p_value < 0.05
    scored = {t.task: t.conditions["head"].runs for t in s.tasks}
    assert scored["should-b"] == 2  # the run without evidence is left out of the score too
    markdown = render_markdown(s)
    assert "**Picked up when it should / when it should not**" in markdown
    assert (
        f"| {SKILL.replace('_', chr(92) + '_')} | 2 that should load it | 1/6 (17%) | 5/5 (100%) | +0.83"
        in markdown
    )
    assert "| 1 that should not (near misses) | 1/3 (33%) | 0/3 (0%) | -0.33" in markdown
    assert "1 trigger run had no evidence" in markdown
    assert json.loads(render_json(s))["triggers"][0]["arms"]["head"] == {
        "loaded": 5,
        "runs": 5,
        "no_evidence": 1,
    }


def test_a_hostile_trigger_file_name_reaches_the_scorecard_escaped() -> None:
    hostile = ".claude/skills/x|<img src=y>@team/SKILL.md"
    s = summary_of(
        [
            *_runs("t", "base", [True], should=True, file=hostile),
            *_runs("t", "head", [True], should=True, file=hostile),
        ]
    )
    markdown = render_markdown(s)
    assert not re.search(r"(?<!\\)<img", markdown) and "@team" not in markdown
    assert "x\\|\\<img src=y\\>@\u2060team" in markdown
    html = render_html(s, [])
    assert "<img src=y>" not in html and "x|&lt;img src=y&gt;@team/SKILL.md" in html
    assert "Picked up when it should / when it should not</h2>" in html


def test_through_the_gateway_only_the_run_that_got_the_body_loaded_the_skill(index: AuditIndex) -> None:
    """The gateway's own handler on loopback, forwarding to the scripted model server and
    logging which fingerprints each request held; the host reads the log as the runner does."""
    turns = [TextTurn(text='{"answer": "ok"}', usage=TurnUsage(input_tokens=100, output_tokens=5))] * 4
    with ScriptedModelServer(Script(name="trigger", model="claude-sonnet-4-5", turns=turns)) as server:
        route = Upstream(name="anthropic", base_url=server.url, paths=["/v1/messages"], key_from="K")
        config = GatewayConfig(upstreams=[route]).for_run(None, index.fingerprints)
        logs = []
        for texts in ([LISTING, "Bump the lockfile"], [LISTING, "Cut release 1.2.0", body(HEAD_SKILL)]):
            with gateway_on_loopback(config, {"anthropic": "sk-real"}) as (url, _, log):
                request = {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 64,
                    "messages": [{"role": "user", "content": [{"type": "text", "text": t} for t in texts]}],
                }
                sent = httpx.post(
                    f"{url}/anthropic/v1/messages", json=request, headers={"x-api-key": RUN_TOKEN}
                )
                assert sent.status_code == 200, sent.text
            logs.append([ModelCall.model_validate_json(line) for line in log.getvalue().splitlines()])
    near_miss, should = logs
    assert body_reached(index, "head", SKILL, near_miss) is False
    assert body_reached(index, "head", SKILL, should) is True
    assert BODY.splitlines()[1] not in "".join(c.model_dump_json() for c in should)  # hashes only
