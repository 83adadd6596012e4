"""The GitHub Action: inputs in, one activity run, the comment and check out.

`main` is the entry (`docdelta action`): event and inputs to an `Activity`, then that
activity; `settings` the Action's inputs (their own trust level and lifetime, apart from
`.docdelta.yml`); `activity` the closed set of activities, written as the `activity`
output; `suggest_loop` the comment's suggestion and audit sections. Nothing is
re-exported here, so importing the package never pulls in PyGithub.
"""
