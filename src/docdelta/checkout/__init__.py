"""Sealed checkouts: what the agent works in, one per condition of the same source commit.

`seal` strips instruction files and docdelta's own files from the source commit, seals it
once per source tree, and lays each condition's instruction files over it as a cheap
overlay; `envs` installs a project's workspace once per lock hash and links it in.
"""
