"""docdelta: test edits to agent instruction files the way code is tested."""

__version__ = "0.2.0"
"""The one place the version is written: hatch reads it for the package metadata
(pyproject's `tool.hatch.version`), and manifests and cache keys record it."""
