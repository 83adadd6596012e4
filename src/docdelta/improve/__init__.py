"""Tools that improve instruction files and tasks, built on the experiment.

`ablation` (`docdelta ablate`): which sections of a file matter; `suggest` and
`suggest_model`: a patch from missed gold, deterministic or model-written; `task_draft`
drafts answer tasks from concrete rules; `task_audit` checks gold against the source;
`from_commits` drafts change tasks from past fixes; `project_init` (`docdelta init`)
adopts docdelta in a repository.
"""
