"""A scripted model server for tests and dry runs: it replays a script of turns ("call the
shell tool with `cat AGENTS.md`", "answer with this JSON", "fail with 429") over the
Anthropic Messages, OpenAI Chat Completions, OpenAI Responses and Gemini APIs, streaming or not,
and records every request so a test can see what reached the model.

`wire` (the four APIs' shapes), `replay` (the script cursor and tool mapping) and
`server` (HTTP, `ScriptedModelServer`) are stdlib only: this package's `__init__` imports
nothing else, so `python3 -m modelserver` runs in an image with only python3.
`script` (pydantic, host side) documents and validates the script format.
"""

from modelserver.server import ScriptedModelServer

__all__ = ["ScriptedModelServer"]
