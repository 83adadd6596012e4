"""The GitHub Action: inputs in, one activity run, the comment and check out.

`main` is the entry (`docdelta action`): event and inputs to an `Activity`, then that
activity; `settings` the Action's inputs (their own trust level and lifetime, apart from
`.docdelta.yml`); `activity` the closed set of activities, written as the `activity`
output, with the routing and trust rules that pick one. One module per activity:
`evaluate` (a PR), `approval` (waiting for a maintainer), `no_change`, `plan` (a job
matrix's plan job), `receipt`, `refresh`, `ablate`; `job` is one job's evaluation and
`merge` a job matrix's aggregate job; `suggest_and_audit` and `suggest_loop` the comment's
suggestion and audit sections; `publish` the check, the comment, the outputs and every
failure; `workspace` the runner's checkout. Nothing is re-exported here, so importing the
package never pulls in PyGithub.
"""
