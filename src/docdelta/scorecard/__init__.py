"""The scorecard: results in, one `Summary` out (analysis, not rendering).

`stats` pure tests and intervals; `decision` the verdict rule; `power` the cached power
simulation; `thresholds` pass@k / pass thresholds; `summarize` builds the `Summary` every
surface shows; `workdir` opens a workdir and scores it; `instruction_usage` which files
the agent read; `history` evaluation records and receipts across PRs.
"""
