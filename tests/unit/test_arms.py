"""Arms: the spec a user writes, the factors two columns differ in, and the comparison."""

from __future__ import annotations

import json

import pytest
from factories import arm, detection, manifest

from docdelta.config import ArmSpec
from docdelta.experiment.arms import parse_arms
from docdelta.report import render_markdown
from docdelta.report.html import render_html
from docdelta.results.models import AgentInfo, ArmRecord, Manifest
from docdelta.scorecard.arms import compare, differs_in
from docdelta.scorecard.summarize import summarize
from docdelta.vocabulary import sha256_hex


def test_parse_arms_reads_every_field_and_dashed_names() -> None:
    specs = parse_arms(
        "small: model=qwen-small ; big:model=qwen-big,condition=base,vs=small,"
        "agent=command,agent-cmd=./agent --json,overlay=/tmp/skills"
    )
    assert specs == [
        ArmSpec(name="small", model="qwen-small"),
        ArmSpec(
            name="big",
            model="qwen-big",
            condition="base",
            vs="small",
            agent="command",
            agent_cmd="./agent --json",
            overlay="/tmp/skills",
        ),
    ]
    assert specs[0].condition == "head"  # an arm builds on head unless told


def test_an_empty_arms_flag_is_refused() -> None:
    with pytest.raises(ValueError, match="no arm given"):
        parse_arms(" ; ")


def _with_arms() -> Manifest:
    m = manifest(["t1", "t2"], conditions=("head", "small", "big", "other"))
    agent = m.agent
    return m.model_copy(
        update={
            "arms": {
                "small": ArmRecord(condition="head", agent=agent.model_copy(update={"model": "s"})),
                "big": ArmRecord(condition="head", agent=agent.model_copy(update={"model": "b"})),
                "other": ArmRecord(
                    condition="base",
                    agent=AgentInfo(name="command", version="cmd-1", model="b"),
                    overlay="skills",
                    overlay_sha256="o",
                    vs="small",
                ),
            }
        }
    )


def test_factors_two_columns_differ_in() -> None:
    m = _with_arms()
    assert differs_in(m, "big", "small") == ["model"]
    assert differs_in(m, "small", "head") == ["model"]
    assert differs_in(m, "other", "small") == ["agent", "model", "condition", "overlay"]


def test_each_arm_is_compared_with_its_reference_and_more_than_one_factor_is_warned_of() -> None:
    m = _with_arms()
    results = [
        *arm("t1", "head", [0.0, 0.0]),
        *arm("t2", "head", [0.5, 0.5]),
        *arm("t1", "small", [0.0, 0.0]),
        *arm("t2", "small", [0.5, 0.5]),
        *arm("t1", "big", [1.0, 1.0]),
        *arm("t2", "big", [1.0, 1.0]),
        *arm("t1", "other", [1.0, 1.0]),
        *arm("t2", "other", [1.0, 1.0]),
    ]
    summary = summarize(m, detection(), results)
    by_arm = {c.arm: c for c in summary.arms}
    # small and big have no vs: the plan's first column; other names small.
    assert {a: (c.vs, c.overall.value) for a, c in by_arm.items()} == {
        "small": ("head", 0.0),
        "big": ("head", 0.75),  # t1 +1.0, t2 +0.5: the mean of per-task deltas
        "other": ("small", 0.75),
    }
    assert by_arm["big"].tasks["t2"].value == 0.5
    assert by_arm["big"].warning is None
    assert by_arm["other"].warning is not None and "4 factors" in by_arm["other"].warning
    assert by_arm["small"].overall.noise
    text = render_markdown(summary)
    assert "| big | head | model | +0.75 |" in text
    assert "other and small differ in 4 factors (agent, model, condition, overlay)" in text
    # No base in the plan, so no head-vs-base verdict: the arms lead.
    assert "## docdelta scorecard: arms · small - head 0.00 · big - head +0.75 · other - small +0.75" in text
    page = render_html(summary, results)
    assert "Arms compared" in page and "other and small differ in 4 factors" in page
    assert compare(m, {}, band=0.05)[0].overall.value is None  # no runs


def test_a_manifest_without_arms_keeps_the_identity_it_had_before_arms_existed() -> None:
    """A workdir planned by the previous release resumes: `arms` (and `pooled_only`, the
    head-only plan's record, and `unreviewed`, the tasks run with --allow-unreviewed) count
    only when set."""
    m = manifest(["t1"])
    before = json.loads(m.model_dump_json(exclude={"created_at"}))
    before.pop("arms")
    before.pop("pooled_only")
    before.pop("unreviewed")
    # fields added since, outside the identity
    for later in ("skipped", "thresholds", "noise_band", "agent_command"):
        before.pop(later)
    assert m.identity() == sha256_hex(json.dumps(before, separators=(",", ":"), ensure_ascii=False).encode())
    assert _with_arms().identity() != m.identity()
    assert m.model_copy(update={"pooled_only": ["base"]}).identity() != m.identity()
    assert m.model_copy(update={"unreviewed": ["t1"]}).identity() != m.identity()
