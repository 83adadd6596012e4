"""Task files: the reviewed questions and change requests an experiment runs.

`models` is the task file's model; `load` reads and validates `.docdelta/tasks/*.yaml`;
`quotes` locates gold citations by quote in each condition's files.
"""
