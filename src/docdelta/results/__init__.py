"""The workdir record: every run's result, written atomically and never rewritten once
complete, under one lock per workdir (`store`)."""
