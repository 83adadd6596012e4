"""docdelta: test edits to agent instruction files the way code is tested."""

__version__ = "0.1.0"
