"""The LLM judge: one request per answer, one ruling per criterion, no credit without a quote.

A judge that can say "yes, the answer makes that point" without showing where is a
judge whose mistakes nobody can see. So every claim the judge makes *against the
default* must come with a quote from the answer, and the quote is checked here,
verbatim after whitespace normalization (case and punctuation count):

- a **key point** is credited only when the judge says it is made AND quotes it;
- a **rule** is respected unless the judge says it is broken, and that claim needs
  the offending quote too. A claim whose quote is missing or not in the answer is
  recorded as `supported=False` and is scored as a miss either way: an unbacked
  ruling never earns credit.

The system prompt is part of the rubric hash, so changing it invalidates every
calibration and every judged.json made with the old one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from docdelta.agents.base import extract_last_json
from docdelta.errors import InfraError
from docdelta.grading.judge_api import JudgeAPI, Reply
from docdelta.grading.rubrics import Criterion, Rubric
from docdelta.results.grades import JudgeRuling
from docdelta.vocabulary import sha256_hex

SYSTEM_PROMPT = """\
You grade answers to questions about a software repository. You are given the question, \
the answer, and numbered criteria. Criteria P<n> are key points: a point is met only if the \
answer itself states it (not merely something related). Criteria R<n> are rules: a rule is met \
unless the answer breaks it.

For every criterion reply with {"id": ..., "met": true|false, "quote": ..., "reason": ...}:
- for a point with met=true, "quote" must be copied character for character from the answer: \
the shortest passage that makes the point;
- for a rule with met=false, "quote" must be copied character for character from the answer: \
the passage that breaks it;
- otherwise "quote" is "".
Never paraphrase inside "quote": a quote that is not in the answer earns no credit. \
Reply with one JSON object and nothing else: {"rulings": [...]}."""

NO_ANSWER_REASON = "no answer to judge"


def rubric_sha256(rubric: Rubric) -> str:
    """The identity of what the judge is asked: prompt, question and criteria, in order."""
    content = {
        "system": SYSTEM_PROMPT,
        "task": rubric.task,
        "question": rubric.question,
        "criteria": [[c.kind, c.text] for c in rubric.criteria],
    }
    return sha256_hex(json.dumps(content, sort_keys=True).encode())


def normalize_ws(text: str) -> str:
    return " ".join(text.split())


def quote_found(quote: str, answer: str) -> bool:
    """Is the quote in the answer, verbatim up to runs of whitespace? An empty quote is not."""
    needle = normalize_ws(quote)
    return bool(needle) and needle in normalize_ws(answer)


def _ids(rubric: Rubric) -> dict[str, Criterion]:
    ids: dict[str, Criterion] = {}
    counts = {"point": 0, "rule": 0}
    for c in rubric.criteria:
        counts[c.kind] += 1
        ids[f"{'P' if c.kind == 'point' else 'R'}{counts[c.kind]}"] = c
    return ids


def user_prompt(rubric: Rubric, answer: str) -> str:
    criteria = "\n".join(f"{cid}: {c.text}" for cid, c in _ids(rubric).items())
    return (
        f"Question:\n{rubric.question}\n\n"
        f"Answer (between the markers):\n<<<ANSWER\n{answer}\nANSWER>>>\n\n"
        f"Criteria:\n{criteria}\n"
    )


def needs_quote(kind: str, met: bool) -> bool:
    """The quote rule: a made point and a broken rule must quote the answer to count."""
    return met if kind == "point" else not met


def _ruling(criterion: Criterion, given: Mapping[str, Any] | None, answer: str) -> JudgeRuling:
    """Apply the quote rule to the judge's raw ruling on one criterion."""
    if given is None:
        return JudgeRuling(
            kind=criterion.kind,
            expected=criterion.text,
            met=False,
            supported=False,
            hit=False,
            reason="the judge gave no ruling on it",
        )
    met = given.get("met") is True
    quote = str(given.get("quote") or "")
    reason = str(given.get("reason") or "")
    supported = quote_found(quote, answer) if needs_quote(criterion.kind, met) else True
    hit = met and supported
    return JudgeRuling(
        kind=criterion.kind,
        expected=criterion.text,
        met=met,
        quote=quote,
        supported=supported,
        hit=hit,
        reason=reason,
    )


def parse_rulings(rubric: Rubric, reply_text: str, answer: str) -> list[JudgeRuling]:
    """Rulings for every criterion, in rubric order; a criterion the judge skipped is a miss.

    A reply with no `rulings` list at all is the judge failing, not the answer: InfraError,
    so nothing is saved and a rerun asks again.
    """
    data = extract_last_json(reply_text)
    raw = data.get("rulings") if data else None
    if not isinstance(raw, list):
        shown = reply_text[:200]
        raise InfraError(
            f"the judge's reply for task {rubric.task!r} holds no JSON object with a `rulings` list: "
            f"{shown!r}",
            hint="the judge model may not follow JSON instructions; try another --judge-model",
        )
    by_id = {str(r.get("id")): r for r in raw if isinstance(r, dict)}
    return [_ruling(c, by_id.get(cid), answer) for cid, c in _ids(rubric).items()]


def no_answer_rulings(rubric: Rubric) -> list[JudgeRuling]:
    """Without an answer there is nothing to quote: every criterion is a miss, no call made."""
    return [
        JudgeRuling(
            kind=c.kind, expected=c.text, met=False, supported=True, hit=False, reason=NO_ANSWER_REASON
        )
        for c in rubric.criteria
    ]


def rule_answer(api: JudgeAPI, rubric: Rubric, answer: str) -> tuple[list[JudgeRuling], Reply]:
    """Ask the judge about one answer (one request for all criteria) and check its quotes."""
    reply = api.ask(SYSTEM_PROMPT, user_prompt(rubric, answer))
    return parse_rulings(rubric, reply.text, answer), reply


__all__ = [
    "SYSTEM_PROMPT",
    "no_answer_rulings",
    "normalize_ws",
    "parse_rulings",
    "quote_found",
    "rubric_sha256",
    "rule_answer",
    "user_prompt",
]
