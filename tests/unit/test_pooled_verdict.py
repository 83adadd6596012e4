"""`summarize.pooled_verdict`: several evaluations' head vs base decided as one, each
evaluation's task a stratum of its own, exactly as one evaluation of all those tasks."""

from __future__ import annotations

from factories import arm, detection, manifest

from docdelta.results.models import RunResult
from docdelta.scorecard.summarize import pooled_verdict, summarize
from docdelta.vocabulary import DEFAULT_NOISE_BAND

HEAD_DROPS = [*arm("t", "base", [1, 1, 1, 1]), *arm("t", "head", [0, 0, 0, 0])]
SAME = [*arm("t", "base", [1, 0, 1, 0]), *arm("t", "head", [1, 0, 1, 0])]


def _renamed(prefix: str, runs: list[RunResult]) -> list[RunResult]:
    return [r.model_copy(update={"cell": r.cell.model_copy(update={"task": f"{prefix}/t"})}) for r in runs]


def test_two_repositories_of_one_task_id_are_decided_as_one_evaluation_of_two_tasks() -> None:
    parts = {
        "api": (manifest(["t"], ("base", "head"), repeats=4), HEAD_DROPS),
        "web": (manifest(["t"], ("base", "head"), repeats=4), SAME),
    }
    pooled = pooled_verdict(parts, alpha=0.05, band=DEFAULT_NOISE_BAND)
    runs = _renamed("api", HEAD_DROPS) + _renamed("web", SAME)
    one = summarize(manifest(["api/t", "web/t"], ("base", "head"), repeats=4), detection(), runs).verdict
    assert pooled is not None and one is not None
    assert pooled.tasks == 2  # one task id in two repositories: two strata, not one
    assert pooled == one
    assert (pooled.kind, pooled.subject) == ("regressed", "api/t")  # named by repository and task


def test_a_holdout_task_counts_but_is_never_named() -> None:
    held = manifest(["t"], ("base", "head"), repeats=4).model_copy(update={"holdout": ["t"]})
    pooled = pooled_verdict({"api": (held, HEAD_DROPS)}, alpha=0.05, band=DEFAULT_NOISE_BAND)
    assert pooled is not None and pooled.tasks == 1
    assert pooled.kind == "regressed"
    assert "api/t" not in pooled.model_dump_json()


def test_nothing_to_pool_is_no_verdict() -> None:
    assert pooled_verdict({}, alpha=0.05, band=DEFAULT_NOISE_BAND) is None
