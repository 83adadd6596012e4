"""Task files: the reviewed questions and change requests an experiment runs.

`load` reads and validates `.docdelta/tasks/*.yaml` (the model lives in `docdelta.models`
until it moves here); `quotes` locates gold citations by quote in each condition's files.
"""
