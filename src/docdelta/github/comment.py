"""The sticky scorecard comment: a hidden per-config marker plus the report, always postable.

The marker is how the bot finds its own comment again (one comment per config, edited on
every run), so the template refuses to render without it. GitHub rejects bodies over
65,536 characters; rather than fail, `fit` shrinks the report: the largest collapsible
`<details>` sections are emptied first (they are the least-read part), then the tail is
cut, and a link to the full report (job summary / artifact) is appended.
"""

from __future__ import annotations

import re

from jinja2 import StrictUndefined, TemplateRuntimeError
from jinja2.sandbox import SandboxedEnvironment

#: GitHub's limit on an issue comment body (and a check run's summary/text is 65,535).
COMMENT_LIMIT = 65_536

_CONFIG_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")
_MARKER = re.compile(r"^<!-- docdelta:[A-Za-z0-9._/-]+ -->$")
# An innermost <details> block: no nested <details> between its tags.
_DETAILS = re.compile(r"<details>((?:(?!<details>).)*?)</details>", re.DOTALL)
_SUMMARY = re.compile(r"^\s*(<summary>.*?</summary>)", re.DOTALL)
_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)

_TEMPLATE = "{{ marker | required_marker }}\n{{ body }}"


def _required_marker(value: object) -> str:
    """Template filter: the marker is not optional, so a missing or malformed one raises."""
    if not isinstance(value, str) or not _MARKER.match(value):
        raise TemplateRuntimeError(f"the sticky comment needs a docdelta marker, got {value!r}")
    return value


_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_ENV.filters["required_marker"] = _required_marker


def marker(config_id: str) -> str:
    """The hidden marker of one config's comment; `config_id` must be a plain slug."""
    if not _CONFIG_ID.match(config_id) or "--" in config_id:
        raise ValueError(f"config id {config_id!r} must be letters, digits, '.', '_', '/', '-' (no '--')")
    return f"<!-- docdelta:{config_id} -->"


def suggestion_marker(config_id: str) -> str:
    """The hidden marker of one config's review comment (the proven ```suggestion), told apart
    from the scorecard's so neither is ever taken for the other."""
    return marker(config_id).replace("<!-- docdelta:", "<!-- docdelta-suggestion:", 1)


def render_comment(config_id: str, body: str, *, full_report_url: str, limit: int = COMMENT_LIMIT) -> str:
    """The complete comment body: marker line, then `body` fitted under `limit` characters."""
    mark = marker(config_id)
    return render_template(mark, fit(body, limit - len(mark) - 1, full_report_url))


def render_template(marker_value: object, body: str) -> str:
    """Render the comment template as is: it raises unless `marker_value` is a docdelta marker."""
    return _ENV.from_string(_TEMPLATE).render(marker=marker_value, body=body)


def fit(text: str, limit: int, full_report_url: str) -> str:
    """`text` if it fits in `limit` characters, else a trimmed copy linking to `full_report_url`."""
    if len(text) <= limit:
        return text
    notice = (
        f"\n\n> **Trimmed** to fit GitHub's {COMMENT_LIMIT:,}-character limit; "
        f"the full report is in the [job summary]({full_report_url})."
    )
    budget = limit - len(notice)
    if budget <= 0:
        raise ValueError(f"limit {limit} leaves no room for the report")
    text = _collapse_details(text, budget)
    if len(text) > budget:
        text = _cut_tail(text, budget)
    return text + notice


def _collapse_details(text: str, budget: int) -> str:
    """Empty `<details>` sections, largest first, until `text` fits `budget` or none is left to empty."""
    placeholder = "\n\n_(trimmed: see the full report)_\n"
    while len(text) > budget:
        candidates = [m for m in _DETAILS.finditer(text) if placeholder not in m.group(1)]
        if not candidates:
            break
        biggest = max(candidates, key=lambda m: len(m.group(0)))
        summary = _SUMMARY.match(biggest.group(1))
        head = summary.group(1) if summary else "<summary>details</summary>"
        replacement = f"<details>{head}{placeholder}</details>"
        text = text[: biggest.start()] + replacement + text[biggest.end() :]
    return text


def _cut_tail(text: str, budget: int) -> str:
    """Cut at a line break under `budget`, closing an open code fence and open `<details>` tags."""
    closers_room = 200
    cut = text[: max(budget - closers_room, 0)]
    newline = cut.rfind("\n")
    if newline > 0:
        cut = cut[:newline]
    if len(_FENCE.findall(cut)) % 2:
        cut += "\n```"
    open_details = cut.count("<details>") - cut.count("</details>")
    cut += "\n</details>" * max(open_details, 0)
    return cut[:budget]
