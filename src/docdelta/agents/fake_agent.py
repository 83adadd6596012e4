#!/usr/bin/env python3
"""A deterministic stand-in for a coding agent (standalone: Python 3 stdlib only).

docdelta copies this script into the sandbox and runs it with `python3`, so it
works in any sandbox, including a container image without docdelta. It behaves
like a small, honest agent, so conditions differ for real reasons and not
because it was told which condition it is in:

- it reads the instruction files present in the checkout (auto-loaded, like
  AGENTS.md for Codex), then the human docs (README, CONTRIBUTING, docs/);
- it sees every skill's description (as agents list skills in their prompt) and
  loads a skill's file, reading it like an instruction file, when the question
  shares enough content words with the description, so a description edit changes
  which prompts load the skill, as it would for a real agent;
- it ranks every line by word overlap with the question, instruction files first,
  and answers from the best line: its text, the backticked commands in it (unless
  the line forbids them), the backticked paths that exist, a citation of the line,
  and a yes/no verdict when asked (no when the line forbids something); a comment line
  of a shell code block (`# Typecheck`) answers with the command lines under it; a
  phrase the question quotes is what it is about, so lines sharing its words rank first;
- with a seeded error rate it picks a worse line or drops a field, so repeats vary;
  the draws depend only on the seed and the question, so every condition makes the
  same slips and differences come from the docs alone;
- its metrics are plausible: tokens grow with the text it read, a turn per file; no cost
  (it spends nothing).

Protocol (the `command` agent's): prompt on stdin, answer as the last JSON object on
stdout, metrics as JSON at the path in $DOCDELTA_METRICS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from pathlib import Path
from typing import Any

INSTRUCTION_FILES = (
    "AGENTS.md",
    "CLAUDE.md",
    "GEMINI.md",
    "CONVENTIONS.md",
    ".cursorrules",
    ".windsurfrules",
    ".clinerules",
    ".rules",
    ".github/copilot-instructions.md",
)
SKILL_GLOBS = (".claude/skills/*/SKILL.md", ".agents/skills/*/SKILL.md")
SKILL_MATCH = 2
"""Shared content words a question needs with a skill's description to load the skill, at
least, and at least a third of the question's own."""
HUMAN_DOCS = ("README.md", "README.rst", "README", "CONTRIBUTING.md", "CONTRIBUTING.rst")
ERROR_RATE = 0.1
INSTRUCTION_BONUS = 0.5
COMMAND_WORDS = {
    "make",
    "pytest",
    "python",
    "python3",
    "pip",
    "git",
    "npm",
    "ruff",
    "tox",
    "uv",
    "nox",
    "docker",
}
NEGATION = re.compile(r"\b(never|not|don't|do not|must not|forbidden|no)\b", re.IGNORECASE)
YES_NO = re.compile(r"^\s*(is|are|can|could|may|should|must|do|does|am|will)\b|yes or no", re.IGNORECASE)
_STOPWORD_TEXT = """
a an and any are as at be before by can could do does for from has have how i if in into is it its
me my of ok okay on or our should so that the then there this to use used using we what when where
which who why will with you your am after all also must may need want here
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
SHELL_FENCES = frozenset({"", "sh", "bash", "shell", "console", "zsh"})
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
SHELL_PROMPT = re.compile(r"^[$%>]\s+")
QUOTED = re.compile(r"\"([^\"]+)\"")


def keywords(text: str) -> set[str]:
    """Lower-cased content words, crudely singularised, so 'tests' meets 'test'."""
    words = re.findall(r"[a-z0-9][a-z0-9_+-]*", text.lower())
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if w not in STOPWORDS}


def question_of(prompt: str) -> str:
    """The task text: the section under '## Task', or the whole prompt."""
    m = re.search(r"^## Task\s*\n(.*?)(?=^## |\Z)", prompt, re.MULTILINE | re.DOTALL)
    return (m.group(1) if m else prompt).strip()


def description(text: str) -> str:
    """A skill's `description` from its YAML front matter (one line, or a folded block)."""
    m = re.match(r"---[ \t]*\n(.*?)\n---[ \t]*(?:\n|$)", text, re.DOTALL)
    if not m:
        return ""
    lines = m.group(1).splitlines()
    for i, line in enumerate(lines):
        key = re.match(r"description:\s*(.*)$", line)
        if key is None:
            continue
        value = key.group(1).strip()
        if value and value[0] not in ">|":
            return value.strip("'\"")
        block = []
        for follow in lines[i + 1 :]:
            if follow.strip() and not follow.startswith((" ", "\t")):
                break  # the next key ends the block
            block.append(follow.strip())
        return " ".join(b for b in block if b)
    return ""


def skills_to_load(question: str, root: Path) -> list[str]:
    """The skills whose description matches the question, in path order."""
    wanted = keywords(question)
    need = max(SKILL_MATCH, -(-len(wanted) // 3))
    found = []
    for pattern in SKILL_GLOBS:
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8", errors="replace")
            if len(wanted & keywords(description(text))) >= need:
                found.append(str(path.relative_to(root)))
    return found


def find_docs(root: Path, question: str = "") -> list[tuple[str, bool]]:
    """(path, is_instruction_file) in reading order: instruction files, the skills the question
    loads, then human docs."""
    found = [(p, True) for p in INSTRUCTION_FILES if (root / p).is_file()]
    found += [(p, True) for p in skills_to_load(question, root)]
    found += [(p, False) for p in HUMAN_DOCS if (root / p).is_file()]
    docs_dir = root / "docs"
    if docs_dir.is_dir():
        found += [(str(p.relative_to(root)), False) for p in sorted(docs_dir.rglob("*.md"))]
    return found


def commented_commands(lines: list[str]) -> dict[int, tuple[list[str], int]]:
    """Line number of each comment line of a shell code block -> (the commands under it, the
    line number of the last), so the answer cites the commands, not only their comment.

    Many CLAUDE.md files keep their commands in one block, each under a `# What it does`
    line: the comment is what a question matches, the lines after it (up to a blank line or
    the next comment after them) are the answer. A markdown heading is no such comment."""
    out: dict[int, tuple[list[str], int]] = {}
    fence: str | None = None
    shell = False
    comments: list[int] = []
    taking = False
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        m = FENCE.match(text)
        if fence is None:
            if m:
                fence, shell, comments, taking = m.group(1), m.group(2).lower() in SHELL_FENCES, [], False
            continue
        if m and text.startswith(fence) and not m.group(2):
            fence = None
            continue
        command = SHELL_PROMPT.sub("", text)
        if not shell or not command:
            comments, taking = [], False
        elif command.startswith("#"):
            comments = [number] if taking else [*comments, number]
            taking = False
        else:
            taking = True
            for at in comments:
                out[at] = ([*out[at][0], command] if at in out else [command], number)
    return out


def rank(
    question: str, root: Path, docs: list[tuple[str, bool]]
) -> list[tuple[float, str, int, str, tuple[list[str], int] | None]]:
    """Candidate lines, best first (those sharing most words with a phrase the question quotes,
    then by score): (score, path, line number, text, the commands under it and the last
    one's line number when it is a shell block's comment)."""
    wanted = keywords(question)
    focus = keywords(" ".join(QUOTED.findall(question)))
    ranked: list[tuple[int, float, int, str, int, str, tuple[list[str], int] | None]] = []
    for order, (path, instruction) in enumerate(docs):
        lines = (root / path).read_text(encoding="utf-8", errors="replace").splitlines()
        under = commented_commands(lines)
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if not text or text.startswith(("```", "~~~")) or (text.startswith("#") and number not in under):
                continue
            overlap = len(wanted & keywords(text))
            if overlap:
                score = overlap + (INSTRUCTION_BONUS if instruction else 0.0)
                key = -len(focus & keywords(text))
                ranked.append((key, -score, order, path, number, text, under.get(number)))
    ranked.sort(key=lambda r: r[:6])
    return [(-neg, path, number, text, commands) for _, neg, _, path, number, text, commands in ranked]


def spans(line: str, root: Path) -> tuple[list[str], list[str]]:
    """(commands, files) named in backticks in a line; files must exist."""
    commands: list[str] = []
    files: list[str] = []
    for raw in re.findall(r"`([^`]+)`", line):
        span = raw.strip()
        if (root / span).exists() and not span.startswith(("/", "..")):
            files.append(span)
        elif span.split()[0] in COMMAND_WORDS or span.startswith("./"):
            commands.append(span)
    return commands, files


def solve(prompt: str, root: Path, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(answer, metrics) for a prompt, deterministic in (prompt, files, seed)."""
    question = question_of(prompt)
    rng = random.Random(f"{seed}:{question}")
    slip = rng.random() < ERROR_RATE
    slip_kind = rng.choice(["worse_line", "drop_field"])
    dropped = rng.choice(["commands", "files", "citations", "verdict"])

    docs = find_docs(root, question)
    read_chars = sum(len((root / p).read_text(encoding="utf-8", errors="replace")) for p, _ in docs)
    ranked = rank(question, root, docs)
    pick = 1 if slip and slip_kind == "worse_line" and len(ranked) > 1 else 0
    asks_yes_no = bool(YES_NO.search(question))

    if ranked:
        _, path, number, text, under = ranked[pick]
        forbids = bool(NEGATION.search(text))
        commands, files = spans(text, root)
        commands, last = (commands, number) if under is None else under
        answer: dict[str, Any] = {
            "answer": f"According to {path}: {text}",
            "commands": [] if forbids else commands,
            "files": files,
            "citations": [{"path": path, "lines": str(number) if last == number else f"{number}-{last}"}],
            "verdict": ("no" if forbids else "yes") if asks_yes_no else None,
        }
    else:
        answer = {
            "answer": "I could not find this in the repository's documentation.",
            "commands": [],
            "files": [],
            "citations": [],
            "verdict": "yes" if asks_yes_no else None,
        }
    if slip and slip_kind == "drop_field":
        answer[dropped] = None if dropped == "verdict" else []

    tokens_in = (len(prompt) + read_chars) // 4
    tokens_out = len(json.dumps(answer)) // 4 + 20
    metrics = {
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        # No cost: the fake spends nothing, and a made-up dollar figure would be read as real.
        "turns": len(docs) + 1,
        "tool_calls": len(docs),
        "files_read": [p for p, _ in docs],
    }
    return answer, metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    prompt = sys.stdin.read()
    answer, metrics = solve(prompt, Path.cwd(), args.seed)
    metrics_path = os.environ.get("DOCDELTA_METRICS")
    if metrics_path:
        Path(metrics_path).write_text(json.dumps(metrics), encoding="utf-8")
    print(f"I read {len(metrics['files_read'])} files and looked for the answer.")
    print("```json\n" + json.dumps(answer, indent=2) + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
