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

CALC_HIDDEN_TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
"""The hidden test of the `calc` change task several integration tests build: `add` must add."""

CALC_REFERENCE = """\
diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
"""The `calc` change task's reference patch: the one-character fix its hidden test checks."""
