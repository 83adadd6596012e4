"""Trigger tasks: was an on-demand instruction file loaded when it should have been, and only then?

A skill, slash command, subagent or path-scoped rule does nothing unless the agent loads
it, and whether it does hangs on its description. A trigger task is one prompt and one
file, with `should_load` true (the prompt is what the file is for) or false (a near miss).
What the agent *says* it used is no evidence. Two records are:

- the gateway: the file's body (`instructions.audit.body_reached`) was in a request the
  model received, injected by the agent or returned by a tool;
- the agent's own tool calls, where docdelta parses them (`Agent.reads_from_tool_stream`):
  a read of the file is a load even when the gateway's fingerprint missed a fragment.

The run is loaded when either saw the file; with neither, the run has no evidence and its
score item is unscored, so the scorecard leaves it out (and names the task as unmeasured)
instead of counting a silent agent as one that correctly loaded nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from docdelta.agents.models import AgentMetrics
from docdelta.results.grades import Score, ScoreItem
from docdelta.results.models import EvidenceSource, TriggerEvidence
from docdelta.tasks.models import Trigger

NO_EVIDENCE_NOTE = (
    "no evidence: no gateway saw the run's model requests and the agent's tool calls are not "
    "parsed, so whether the file was loaded is unknown (run with a gateway or an agent docdelta parses)"
)


def read_in_tool_stream(path: str, files_read: Sequence[str]) -> bool:
    """`path` among the files the agent read, seen from the repository root or any depth
    (an adapter may leave a path absolute when it lies outside the workspace)."""
    wanted = path.removeprefix("./")
    return any(f.removeprefix("./") == wanted or f.endswith(f"/{wanted}") for f in files_read)


def evidence(
    trigger: Trigger, *, gateway: bool | None, metrics: AgentMetrics, tool_stream: bool
) -> TriggerEvidence:
    """One run's evidence. `gateway`: `body_reached` (None: no gateway, or nothing forwarded);
    `tool_stream`: whether the agent's `files_read` comes from its own tool calls."""
    sources: list[EvidenceSource] = []
    seen: list[bool] = []
    if gateway is not None:
        sources.append(EvidenceSource.gateway)
        seen.append(gateway)
    if tool_stream:
        sources.append(EvidenceSource.tool_stream)
        seen.append(read_in_tool_stream(trigger.file, metrics.files_read))
    return TriggerEvidence(
        file=trigger.file,
        should_load=trigger.should_load,
        loaded=any(seen) if seen else None,
        sources=sources,
    )


def score_trigger(found: TriggerEvidence) -> Score:
    """1.0 when the file was loaded exactly when it should be; an unscored item without evidence."""
    expected = f"{'loads' if found.should_load else 'does not load'} {found.file}"
    if found.loaded is None:
        return Score(
            value=0.0, items=[ScoreItem(kind="trigger", expected=expected, hit=None, note=NO_EVIDENCE_NOTE)]
        )
    hit = found.loaded == found.should_load
    how = " and ".join(str(s) for s in found.sources)
    note = f"{'loaded' if found.loaded else 'not loaded'} (evidence: {how})"
    return Score(
        value=1.0 if hit else 0.0, items=[ScoreItem(kind="trigger", expected=expected, hit=hit, note=note)]
    )
