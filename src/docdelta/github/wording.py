"""The Action's words for advice written in the CLI's: inputs, never flags.

Errors and hints are raised deep in shared code, which spells the setting as the CLI's
flag (`--agent-cmd`, `--repeats 90`, `pass --yes`). A reader of a check run or a workflow
annotation cannot type a flag: every text the Action posts goes through `action_words`,
which names the workflow input that does the same (`agent-command`, `repeats: 90`,
raise `max-runs`). This table is the one place that knows which flag is which input.
"""

from __future__ import annotations

import re

FLAG_INPUTS = {
    "--agent": "agent",
    "--agent-cmd": "agent-command",
    "--model": "model",
    "--provider": "provider",
    "--tasks": "tasks",
    "--conditions": "conditions",
    "--repeats": "repeats",
    "--max-repeats": "max-repeats",
    "--seed": "seed",
    "--source": "source",
    "--patch": "patch",
    "--cap-usd": "cap-usd",
    "--reserve-usd": "reserve-usd",
    "--max-turns": "max-turns",
    "--max-output-tokens": "max-output-tokens",
    "--infra-retries": "infra-retries",
    "--rate-limit": "rate-limit",
    "--fail-on": "fail-on",
    "--noise-band": "noise-band",
    "--alpha": "alpha",
    "--results-store": "results-store",
    "--skip-base-from": "skip-base-from",
    "--sandbox": "sandbox",
    "--allow-network": "allow-network",
    "--timeout": "timeout",
    "--jobs": "jobs",
    "--shard": "shard",
    "--max-parallel": "max-parallel",
    "--max-runs": "max-runs",
    "--extra-ca": "ca-bundle",
    "--unit": "ablate-unit",
}
"""Each CLI flag that has an Action input, and that input's name in action.yml."""
SWITCHES = frozenset({"--allow-network"})
"""Flags without a value: the input that does the same is set to `true`."""
PHRASES = (
    ("pass --yes to run it", "raise `max-runs` to run it"),
    ("or pass --yes", "or raise `max-runs`"),
    ("--yes", "a higher `max-runs`"),
    ("another --file", "another file as `ablate`"),
)
"""CLI advice that has no flag-for-input equivalent, reworded whole."""

_VALUE = "|".join((
    r'"[^"]*"', r"'[^']*'", r"\d[\d.]*", r"[\w.-]+(?:,[\w.-]+)+",
    "auto", "N", "docker", "local", "none", "bullets", "command", "regression", "any",
))  # fmt: skip
"""What counts as a flag's value: quoted, a number, a list, or a word the flags take."""
_FLAG = re.compile(
    r"(?P<verb>\b(?:pass|use) )?(?P<tick>`?)(?P<flag>"
    + "|".join(re.escape(f) for f in sorted(FLAG_INPUTS, key=len, reverse=True))
    + rf")(?![\w-])(?: (?P<value>{_VALUE})(?![\w-])(?!,[\w.-]))?(?P=tick)"
)
_REDUNDANT = re.compile(r" \(Action input: [a-z-]+\)")


def _input(m: re.Match[str]) -> str:
    name = FLAG_INPUTS[m["flag"]]
    value = m["value"]
    if value is None and m["flag"] in SWITCHES:
        value = "true"
    verb = "set " if m["verb"] else ""
    if value is None:
        return f"{verb}the `{name}` input"
    return f"{verb}`{name}: {value.strip(chr(34) + chr(39))}`"


def action_words(text: str) -> str:
    """`text` with every CLI flag it names replaced by the Action input that does the same."""
    text = _REDUNDANT.sub("", text)
    for cli, action in PHRASES:
        text = text.replace(f"`{cli}`", action).replace(cli, action)
    return _FLAG.sub(_input, text)
