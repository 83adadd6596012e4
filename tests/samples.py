"""Instruction-file texts more than one test file reads, kept once so the tests agree on them."""

ONE_SHELL_BLOCK = """\
# Workflow

```bash
# Lint and style
# Check for issues and fix automatically
python -m ruff check src/ tests/ --fix
python -m ruff format src/ tests/

# Typecheck
python -m mypy src/

# Run all tests
python -m pytest tests/
```
"""
"""A CLAUDE.md layout common in real repositories: one bash block under one heading, each
command under its own comment line (the comment, not the heading, is the situation to ask)."""
