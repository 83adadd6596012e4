"""What one Action run did: the closed set of activities, written as the `activity` output.

`app.choose` maps an event to `evaluate`, `refresh` or `skip`; an evaluation can end as
`no_change` (no instruction file changed) or `awaiting_approval` (a fork without a
maintainer's label), with the `plan` input as `plan` (the job matrix written, nothing
run), and with the `receipt` input as `receipt` (the receipts checked, nothing run); with
the `ablate` input the run is an `ablate` (`docdelta ablate` on the event's commit) whatever
the event; anything docdelta could not do is `error`. Workflows branch on the output's
value, so the strings are part of the Action's contract (action.yml lists them).
"""

from __future__ import annotations

from enum import StrEnum


class Activity(StrEnum):
    evaluate = "evaluate"
    refresh = "refresh"
    skip = "skip"
    no_change = "no_change"
    awaiting_approval = "awaiting_approval"
    plan = "plan"
    ablate = "ablate"
    receipt = "receipt"
    error = "error"
