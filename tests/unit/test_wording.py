"""The Action's words: every CLI flag in a message becomes the workflow input that does the same."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from docdelta.github.wording import FLAG_INPUTS, action_words


@pytest.mark.parametrize(
    ("cli", "action"),
    [
        (
            'pass --agent-cmd "./my-agent --json" (Action input: agent-command)',
            "set `agent-command: ./my-agent --json`",
        ),
        (
            "--agent-cmd is only for the command agent",
            "the `agent-command` input is only for the command agent",
        ),
        ("drop --agent-cmd or use --agent command", "drop the `agent-command` input or set `agent: command`"),
        (
            "check --repeats and --conditions, or pass --yes to run it",
            "check the `repeats` input and the `conditions` input, or raise `max-runs` to run it",
        ),
        ("rerun with `--repeats 90`", "rerun with `repeats: 90`"),
        ("use --sandbox docker", "set `sandbox: docker`"),
        ("pass --allow-network", "set `allow-network: true`"),
        ("e.g. --conditions base,head,none", "e.g. `conditions: base,head,none`"),
        ("--repeats auto stops each task", "`repeats: auto` stops each task"),
        ("add another --file", "add another file as `ablate`"),
    ],
)
def test_cli_advice_reads_as_the_actions_inputs(cli: str, action: str) -> None:
    assert action_words(cli) == action


def test_every_mapped_input_is_one_the_action_declares() -> None:
    declared = set(yaml.safe_load((Path(__file__).parents[2] / "action.yml").read_text())["inputs"])
    assert set(FLAG_INPUTS.values()) <= declared


def test_text_without_a_docdelta_flag_is_left_alone() -> None:
    text = "bwrap --ro-bind / / failed; git diff --no-ext-diff"
    assert action_words(text) == text
