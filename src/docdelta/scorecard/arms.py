"""Comparing arms: each arm's scores against its `vs`, and the factors two columns differ in
(`results.models.ARM_FACTORS`). Analysis over the workdir record; the arms themselves (specs,
overlays, agents) are `docdelta.experiment.arms`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from docdelta.agents.models import RunStatus
from docdelta.results.models import ARM_FACTORS, Manifest, RunResult
from docdelta.scorecard import stats
from docdelta.scorecard.models import ArmComparison, Delta


def factors(manifest: Manifest, column: str) -> dict[str, str | None]:
    """A column's value of each ARM_FACTORS: a plain condition runs the experiment's agent and
    model with no overlay."""
    arm = manifest.arms.get(column)
    agent = manifest.agent_of(column)
    return {
        "agent": f"{agent.name} {agent.version} {sorted(agent.settings.items())}",
        "model": agent.model,
        "condition": column if arm is None else arm.condition,
        "overlay": None if arm is None else arm.overlay_sha256,
    }


def describe(manifest: Manifest, column: str) -> str:
    """`command cmd-1a2b · model small · head + overlay skills`: what runs a column."""
    arm, agent = manifest.arms.get(column), manifest.agent_of(column)
    on = column if arm is None else arm.condition
    extra = f" + overlay {arm.overlay}" if arm is not None and arm.overlay else ""
    return f"{agent.name} {agent.version} · model {agent.model or '(default)'} · {on}{extra}"


def differs_in(manifest: Manifest, a: str, b: str) -> list[str]:
    fa, fb = factors(manifest, a), factors(manifest, b)
    return [f for f in ARM_FACTORS if fa[f] != fb[f]]


def reference(manifest: Manifest, column: str) -> str | None:
    """What an arm is compared with: its `vs`, else the plan's first column (None for the
    first column itself, which is then every other arm's reference)."""
    arm = manifest.arms[column]
    if arm.vs is not None:
        return arm.vs
    first = manifest.conditions[0].name
    return None if first == column else first


Grid = Mapping[str, Mapping[str, Sequence[RunResult]]]
"""task -> column -> its runs, as the summary groups them."""


def _scores(runs: Sequence[RunResult]) -> list[float]:
    return [r.score.value for r in runs if r.score is not None and r.status is not RunStatus.infra_error]


def _gap(treated: Sequence[float], control: Sequence[float]) -> float | None:
    t, c = stats.mean(treated), stats.mean(control)
    return None if t is None or c is None else t - c


def _delta(arm: str, vs: str, stratum: stats.Stratum, band: float, seed: int) -> Delta:
    value = _gap(*stratum)
    test = stats.permutation_test([stratum], seed=seed) if value is not None else None
    return Delta(
        treatment=arm,
        control=vs,
        value=value,
        noise=None if value is None else stats.is_noise(value, band),
        p_value=None if test is None else test.p_value,
    )


def compare(manifest: Manifest, grid: Grid, *, band: float) -> list[ArmComparison]:
    """Each arm against its reference: per shown task and over all tasks (a stratified
    permutation test of the mean of per-task deltas), with the factors they differ in."""
    out: list[ArmComparison] = []
    holdout = set(manifest.holdout)
    for arm in manifest.arms:
        vs = reference(manifest, arm)
        if vs is None:
            continue
        strata = {t: (_scores(by.get(arm, ())), _scores(by.get(vs, ()))) for t, by in sorted(grid.items())}
        tasks = {t: _delta(arm, vs, s, band, manifest.seed) for t, s in strata.items() if t not in holdout}
        overall_value = stats.mean_delta([_gap(t, c) for t, c in strata.values()])
        test = stats.permutation_test(list(strata.values()), seed=manifest.seed)
        overall = Delta(
            treatment=arm,
            control=vs,
            value=overall_value,
            noise=None if overall_value is None else stats.is_noise(overall_value, band),
            p_value=None if test is None else test.p_value,
        )
        differ = differs_in(manifest, arm, vs)
        warning = None
        if len(differ) > 1:
            warning = (
                f"{arm} and {vs} differ in {len(differ)} factors ({', '.join(differ)}): the delta "
                "cannot be put down to one of them; compare arms that differ in one factor"
            )
        out.append(
            ArmComparison(
                arm=arm,
                vs=vs,
                differs_in=differ,
                described={c: describe(manifest, c) for c in (arm, vs)},
                tasks=tasks,
                overall=overall,
                arm_runs=sum(len(s[0]) for s in strata.values()),
                vs_runs=sum(len(s[1]) for s in strata.values()),
                warning=warning,
            )
        )
    return out
