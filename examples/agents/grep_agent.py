#!/usr/bin/env python3
"""A complete docdelta command agent in the standard library: no model, no key.

Run it with `docdelta run --agent command --agent-cmd "python3 examples/agents/grep_agent.py" ...`
(docdelta shows the file to the sandbox read-only). The protocol it follows:

- the prompt arrives on stdin; its question is under `## Task`;
- the working directory is the repository's sealed checkout (one condition's instruction files);
- the last JSON object printed on stdout is the answer (`docdelta schema answer`);
- optional telemetry goes, as one JSON object, to the file named by `$DOCDELTA_METRICS`.

Its "reasoning" is a word match: it answers with the instruction-file line that shares the
most words with the question, and offers the line's `code spans` as commands, or, for a
comment line of a shell code block (`# Typecheck`), the command lines under it. A yes/no
question gets a verdict: "no" when the line forbids something (and then its spans are what
not to run, so it offers none), else "yes". Replace `best_line` with a call to your own
agent; keep the input and output as they are.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md", ".github/copilot-instructions.md")
WORD = re.compile(r"[a-z0-9_]{3,}")
STOPWORDS = frozenset({"the", "and", "for", "this", "that", "which", "what", "should", "with", "from", "how"})
"""Words too common to say which line a question is about."""
CODE_SPAN = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
SHELL_FENCES = ("", "sh", "bash", "shell", "console", "zsh")
YES_NO = re.compile(r"^\s*(is|are|can|could|may|should|must|do|does|will)\b|yes or no", re.IGNORECASE)
"""A question that asks for a verdict (the prompt's answer format wants "yes" or "no")."""
FORBIDS = re.compile(r"\b(never|not|don't|do not|must not|forbidden|no)\b", re.IGNORECASE)
"""A rule that forbids: the answer to "may I ...?" is no."""


def question(prompt: str) -> str:
    """The task's text: what stands between `## Task` and `## Answer format`."""
    after = prompt.split("## Task", 1)[-1]
    return after.split("## Answer format", 1)[0].strip()


def candidates(text: str) -> list[tuple[int, int, str, list[str]]]:
    """(first and last line number, line, its commands) of each line that can answer: a prose
    line with its code spans, or a comment of a shell code block with the command lines under
    it (up to a blank line or the next comment after them), which its lines then run through.
    Headings and fence lines say nothing."""
    out: list[tuple[int, int, str, list[str]]] = []
    fence, shell, comments = "", False, []  # comments: indices into `out` still taking commands
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        fenced = FENCE.match(line)
        if not fence:
            if fenced:
                fence, shell, comments = fenced.group(1), fenced.group(2).lower() in SHELL_FENCES, []
            elif line and not line.startswith("#"):
                out.append((number, number, line, CODE_SPAN.findall(line)))
        elif fenced and line.startswith(fence) and not fenced.group(2):
            fence = ""
        elif shell and line.startswith("#"):
            if comments and out[comments[-1]][3]:
                comments = []  # the previous comments have their commands: a new group starts
            out.append((number, number, line, []))
            comments.append(len(out) - 1)
        elif shell and line:
            for at in comments:
                first, _, comment, commands = out[at]
                out[at] = (first, number, comment, [*commands, line.removeprefix("$ ")])
        else:
            comments = []
    return out


def best_line(text: str) -> tuple[str, int, int, str, list[str]] | None:
    """(path, first and last line number, line, commands) of the instruction line sharing most
    words with `text`."""
    wanted = set(WORD.findall(text.lower())) - STOPWORDS
    best: tuple[int, str, int, int, str, list[str]] | None = None
    for name in INSTRUCTION_FILES:
        path = Path(name)
        if not path.is_file():
            continue
        for first, last, line, commands in candidates(path.read_text(encoding="utf-8", errors="replace")):
            score = len(wanted & set(WORD.findall(line.lower())))
            if score and (best is None or score > best[0]):
                best = (score, name, first, last, line, commands)
    return None if best is None else best[1:]


def main() -> int:
    asked = question(sys.stdin.read())
    found = best_line(asked)
    if found is None:
        answer = {"answer": "The repository's instruction files do not say.", "commands": [], "files": []}
    else:
        path, first, last, line, commands = found
        forbids = bool(FORBIDS.search(line))
        answer = {
            "answer": line,
            "commands": [] if forbids else commands,
            "files": [path],
            "citations": [{"path": path, "lines": f"{first}-{last}"}],
            "verdict": ("no" if forbids else "yes") if YES_NO.search(asked) else None,
        }
    metrics = os.environ.get("DOCDELTA_METRICS")
    if metrics:
        read = [name for name in INSTRUCTION_FILES if Path(name).is_file()]
        Path(metrics).write_text(json.dumps({"turns": 1, "files_read": read}))
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
