"""Which instruction files' text is in a model request, without the gateway holding the text.

The host turns every instruction file of every condition (and each near-miss file from
detection) into a *fingerprint*: the hashes of its distinctive lines. The gateway hashes
the lines of each request it forwards and reports which fingerprints the request covers.
Lines, not whole files, because agents wrap a file in their own framing ("Contents of
/workspace/CLAUDE.md ...", "<INSTRUCTIONS>", line-numbered tool output) and may send it
in pieces; hashes, because neither the gateway's config nor its log may hold the files.

Stdlib only: this module runs inside the gateway container (and on the host, which
builds the fingerprints with the same `fingerprint` so both sides hash alike).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

Channel = Literal["injected", "tool"]

MIN_CHARS = 16
"""Shorter lines ("## Tests", "```") are too common to say which file a request holds."""
COVERAGE = 0.6
"""Share of a file's distinctive lines a request must hold for the file to count as there:
below 1 so a truncated or partly re-wrapped file is still found."""

_LINE_NUMBER = re.compile(r"^\s*\d+(?:\t|→)")
"""The prefix of line-numbered tool output (`cat -n`, Claude Code's Read tool)."""


def _normal(line: str) -> str:
    return " ".join(_LINE_NUMBER.sub("", line).split())


def _digest(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def fingerprint(text: str) -> list[str]:
    """A file's fingerprint: hashes of its distinctive lines, sorted and unique. A file
    with no line of MIN_CHARS falls back to all its non-blank lines; an empty file has none
    and cannot be audited."""
    lines = {_normal(line) for line in text.splitlines()} - {""}
    distinctive = {line for line in lines if len(line) >= MIN_CHARS} or lines
    return sorted({_digest(line) for line in distinctive})


def _is_tool_output(node: Mapping[str, Any]) -> bool:
    """A tool's output in any of the APIs: Anthropic `tool_result` blocks, Chat Completions
    `role: tool` messages, Responses `*_call_output` items, Gemini `functionResponse` parts."""
    kind = node.get("type")
    if isinstance(kind, str) and (kind == "tool_result" or kind.endswith("_call_output")):
        return True
    return node.get("role") in ("tool", "function") or "functionResponse" in node


def _strings(node: Any, in_tool: bool) -> Iterator[tuple[str, bool]]:
    if isinstance(node, str):
        yield node, in_tool
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item, in_tool)
    elif isinstance(node, dict):
        inside = in_tool or _is_tool_output(node)
        for value in node.values():
            yield from _strings(value, inside)


def request_lines(body: bytes) -> tuple[set[str], set[str]]:
    """(line hashes outside tool outputs, line hashes inside them) of one request body; a
    body that is not JSON counts as one injected text."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = body.decode("utf-8", "replace")
    injected: set[str] = set()
    tool: set[str] = set()
    for text, in_tool in _strings(parsed, False):
        (tool if in_tool else injected).update(_digest(_normal(line)) for line in text.splitlines())
    return injected, tool


def match(
    fingerprints: Mapping[str, Sequence[str]], injected: set[str], tool: set[str]
) -> dict[str, Channel]:
    """The fingerprints a request covers, each with how it arrived: `injected` when the
    request holds it outside tool outputs, else `tool`.

    A covered file whose matched lines all belong to a better-covered file already found is
    left out: head's AGENTS.md holds most of base's, and only the version actually sent
    (the one covered best) must be reported."""
    everything = injected | tool
    found = []
    for ident, hashes in fingerprints.items():
        wanted = set(hashes)
        hit = wanted & everything
        if wanted and len(hit) >= COVERAGE * len(wanted):
            found.append((len(hit) / len(wanted), len(hit), ident, hit))
    found.sort(key=lambda f: (-f[0], -f[1], f[2]))
    covered: set[str] = set()
    result: dict[str, Channel] = {}
    for _share, _count, ident, hit in found:
        if hit <= covered:
            continue
        covered |= hit
        wanted = set(fingerprints[ident])
        result[ident] = "injected" if len(wanted & injected) >= COVERAGE * len(wanted) else "tool"
    return result
