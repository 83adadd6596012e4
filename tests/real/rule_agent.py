"""A `command` agent for tasks `docdelta tasks draft` wrote: it reads what an agent would (the
instruction files at the root, then README.md), takes the line sharing the most words with the
question, and answers from that line alone: the command of a shell-block line (before its `#`
comment; headings are skipped), or the code spans of a prose line up to its first negation, the spans that are
existing paths, a citation of the line, and "no" when the line forbids something. It knows
nothing of the task's gold, so its scores are what each condition's files support.
Protocol: prompt on stdin, JSON on stdout."""

import json
import re
import sys
from pathlib import Path

FILES = ("AGENTS.md", "CLAUDE.md", "README.md")
NEGATION = re.compile(r"\b(?:never|not|don't|do not|no longer)\b", re.IGNORECASE)
STOP = frozenset(
    {
        "the",
        "and",
        "for",
        "this",
        "that",
        "with",
        "which",
        "what",
        "should",
        "run",
        "use",
        "repository",
        "exact",
    }
)


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9][a-z0-9_.+-]+", text.lower()) if w not in STOP}


def candidates() -> list[tuple[str, int, str, bool]]:
    """(file, line number, text, inside a code block) of every non-blank line."""
    out = []
    for name in FILES:
        path = Path(name)
        if not path.is_file():
            continue
        fenced = False
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif line.strip() and not line.startswith("#"):  # headings state no rule
                out.append((name, number, line.strip(), fenced))
    return out


prompt = sys.stdin.read()
task = prompt.split("## Task", 1)[-1].split("## Answer format", 1)[0].replace("[blank]", " ")
wanted = words(task)
lines = candidates()
best = max(lines, key=lambda c: len(wanted & words(c[2])), default=None)
answer: dict[str, object] = {"answer": "not found", "commands": [], "files": [], "citations": []}
if best is not None and wanted & words(best[2]):
    name, number, text, fenced = best
    negation = NEGATION.search(text)
    spans = re.findall(r"`([^`]+)`", text[: negation.start()] if negation else text)
    commands = [text.split(" #", 1)[0].strip()] if fenced else spans
    answer = {
        "answer": text,
        "commands": commands,
        "files": [s for s in spans if Path(s.rstrip("/")).exists()],
        "citations": [{"path": name, "lines": number}],
        "verdict": "no" if negation else "yes",
    }
print(json.dumps(answer))
