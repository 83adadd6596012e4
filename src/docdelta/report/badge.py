"""A shields.io endpoint badge: `agent docs | +0.12 score | -10% tokens | 2/3 tasks`.

- score: the overall head - base delta (mean of per-task deltas).
- tokens: relative change of the pooled median tokens (in + out), head vs base;
  left out when either arm did not report tokens.
- tasks: "not worse" tasks over compared tasks — a task is not worse when its
  head - base delta is above -band (an improvement, or a change inside the noise
  band); compared tasks are those where both arms have graded runs.
- color: green when the overall delta is above the band, red below -band,
  lightgrey when inside it (noise).

A badge is a claim people read without the report, so it refuses to speak for an
experiment where any arm of any task has fewer than 2 graded runs.
"""

from __future__ import annotations

from docdelta.errors import ConfigError
from docdelta.report.render import fmt_signed
from docdelta.scorecard.models import Summary
from docdelta.vocabulary import BASE, HEAD

LABEL = "agent docs"
MIN_REPEATS = 2


def _check_repeats(summary: Summary) -> None:
    if not summary.tasks:
        raise ConfigError("badge: the summary has no tasks", hint="run `docdelta run` with --tasks DIR first")
    for t in summary.tasks:
        for c in (BASE, HEAD, *summary.conditions):
            runs = t.conditions[c].runs if c in t.conditions else 0
            if runs < MIN_REPEATS:
                raise ConfigError(
                    f"badge: task {t.task!r}, condition {c!r} has {runs} graded run(s); "
                    f"a badge needs at least {MIN_REPEATS} per arm",
                    hint=f"rerun `docdelta run` with --repeats {MIN_REPEATS} or more and both base and head",
                )
    if not summary.tasks:
        raise ConfigError(
            "badge: the summary has no tasks", hint="run `docdelta run` with a tasks directory first"
        )


def _tokens_change(summary: Summary) -> str | None:
    base = summary.overall[BASE].median_tokens
    head = summary.overall[HEAD].median_tokens
    if base is None or head is None or base == 0:
        return None
    pct = round((head - base) / base * 100)
    return f"{pct:+d}% tokens" if pct else "0% tokens"


def _color(delta: float, noise: bool) -> str:
    if noise:
        return "lightgrey"
    return "green" if delta > 0 else "red"


def badge(summary: Summary) -> dict[str, object]:
    """shields.io endpoint JSON (`schemaVersion`, `label`, `message`, `color`)."""
    _check_repeats(summary)
    delta = summary.head_vs_base
    assert delta.value is not None and delta.noise is not None  # guaranteed by _check_repeats
    compared = [t.head_vs_base for t in summary.tasks if t.head_vs_base.value is not None]
    not_worse = sum(1 for d in compared if d.noise or (d.value or 0.0) > 0)
    parts = [
        f"{fmt_signed(delta.value)} score",
        _tokens_change(summary),
        f"{not_worse}/{len(compared)} tasks",
    ]
    return {
        "schemaVersion": 1,
        "label": LABEL,
        "message": " | ".join(p for p in parts if p),
        "color": _color(delta.value, delta.noise),
    }
