"""The experiment: from a request to run cells.

`plan` prepares the manifest (seeded, interleaved order; identity hashes; bounds); `arms`
the extra columns (`--arms`); `runner` runs cells (spend cap, retries, resume, `--jobs`);
`rounds` is the adaptive `--repeats auto` driver; `reuse` the cross-PR base-arm cache and
pool; `shard` splits a plan over jobs and merges them; `forecast` predicts cost and time;
`progress` reports to a terminal or CI log; `external` runs blind trials for agents
docdelta does not drive.
"""
