"""`detect` on every instruction-file commit the bundles' README lists, with what an agent
really loads there: symlinks both ways, a dangling week, slash commands, pi prompts,
settings and Codex hooks, skills on demand, and the code each PR also changed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from docdelta.git import Repo
from docdelta.instructions.detect import InstructionMatcher, detect_refs
from docdelta.instructions.models import Detection, LoadMode

RealRepo = Callable[[str], Path]
ALWAYS, ON_DEMAND, CONFIG = LoadMode.always, LoadMode.on_demand, LoadMode.config
ROOT_AGENTS = ["codex", "copilot", "cursor", "opencode", "zed"]


def detect(real_repo: RealRepo, name: str, sha: str) -> Detection:
    repo = Repo(real_repo(name))
    return detect_refs(repo, f"{sha}~1", sha, InstructionMatcher())


def table(d: Detection) -> dict[str, tuple[str, str | None, dict[str, LoadMode]]]:
    return {f.path: (f.status.value, f.link_target, dict(f.loading)) for f in d.changed}


def test_minijinja_agents_md_arrives_as_a_symlink_to_claude_md(real_repo: RealRepo) -> None:
    got = table(detect(real_repo, "minijinja", "a8c633b70537"))
    assert got == {
        ".claude/commands/update-changelog.md": ("added", None, {"claude_code": ON_DEMAND}),
        "AGENTS.md": ("added", "CLAUDE.md", dict.fromkeys(ROOT_AGENTS, ALWAYS)),
    }


def test_minijinja_a_claude_md_edit_reaches_codex_through_the_link(real_repo: RealRepo) -> None:
    # 53e2787985f0 edits CLAUDE.md only; AGENTS.md -> CLAUDE.md serves it to Codex and the rest.
    d = detect(real_repo, "minijinja", "53e2787985f0")
    got = table(d)
    assert got["CLAUDE.md"] == ("modified", None, dict.fromkeys(["claude_code", *ROOT_AGENTS], ALWAYS))
    assert got["AGENTS.md"] == ("modified", "CLAUDE.md", dict.fromkeys(ROOT_AGENTS, ALWAYS))
    assert len(d.other_changed) == 2


def test_minijinja_deleting_claude_md_leaves_agents_md_dangling(real_repo: RealRepo) -> None:
    d = detect(real_repo, "minijinja", "179652f1393c")
    got = table(d)
    assert got["CLAUDE.md"][0] == "deleted" and "codex" in got["CLAUDE.md"][2]
    assert got["AGENTS.md"][:2] == ("deleted", "CLAUDE.md")
    notes = {n.path: n.reason for n in d.near_misses}
    assert "does not exist at head: no agent can read it" in notes["AGENTS.md"]


def test_minijinja_agents_md_becomes_a_regular_file(real_repo: RealRepo) -> None:
    d = detect(real_repo, "minijinja", "59a134913b56")
    assert table(d) == {"AGENTS.md": ("modified", None, dict.fromkeys(ROOT_AGENTS, ALWAYS))}
    assert not d.changed[0].symlink


@pytest.mark.parametrize(
    ("sha", "expected"),
    [
        ("f08d14336eee", {".claude/commands/make-release.md": ("added", None, {"claude_code": ON_DEMAND})}),
        ("fc8ccba05559", {".claude/settings.local.json": ("added", None, {"claude_code": CONFIG})}),
        ("454a038b89b6", {".claude/settings.local.json": ("deleted", None, {"claude_code": CONFIG})}),
        (
            "64d933eaf325",
            {
                ".pi/prompts/make-release.md": (
                    "added",
                    "../../.claude/commands/make-release.md",
                    {"pi": ON_DEMAND},
                ),
                ".pi/prompts/update-changelog.md": (
                    "added",
                    "../../.claude/commands/update-changelog.md",
                    {"pi": ON_DEMAND},
                ),
            },
        ),
        ("357fbe16423d", {".pi/prompts/update-cabi-header.md": ("added", None, {"pi": ON_DEMAND})}),
        ("ef27bc9ea4a8", {".pi/prompts/make-release.md": ("modified", None, {"pi": ON_DEMAND})}),
        ("eb17be5752d2", {"AGENTS.md": ("modified", None, dict.fromkeys(ROOT_AGENTS, ALWAYS))}),
        (
            "9a2b13027f36",
            {
                "CLAUDE.md": (
                    "added",
                    None,
                    dict.fromkeys(["claude_code", "copilot", "opencode", "zed"], ALWAYS),
                )
            },
        ),
    ],
)
def test_minijinja_commits(real_repo: RealRepo, sha: str, expected: dict[str, object]) -> None:
    assert table(detect(real_repo, "minijinja", sha)) == expected


def test_minijinja_moving_commands_out_leaves_the_pi_prompts_dangling(real_repo: RealRepo) -> None:
    d = detect(real_repo, "minijinja", "b98dd0517e8e")
    got = table(d)
    assert got[".claude/commands/update-changelog.md"][0] == "deleted"
    assert got[".pi/prompts/make-release.md"][:2] == ("deleted", "../../.claude/commands/make-release.md")
    assert {n.path for n in d.near_misses} >= {
        ".pi/prompts/make-release.md",
        ".pi/prompts/update-changelog.md",
    }


def test_genai_prices_claude_md_becomes_a_link_to_agents_md_with_a_skill(real_repo: RealRepo) -> None:
    d = detect(real_repo, "genai-prices", "1a5e71b9745d")
    got = table(d)
    assert got[".claude/skills/add-price-model/SKILL.md"] == (
        "added",
        None,
        {"claude_code": ON_DEMAND, "opencode": ON_DEMAND},
    )
    assert got["AGENTS.md"] == ("added", None, dict.fromkeys(["claude_code", *ROOT_AGENTS], ALWAYS))
    assert got["CLAUDE.md"][:2] == ("modified", "AGENTS.md")


@pytest.mark.parametrize("sha", ["f596b71588e7", "78bce8c39c18", "1f0199243891", "47df840a5ab1"])
def test_genai_prices_an_agents_md_edit_is_read_by_claude_code_through_claude_md(
    real_repo: RealRepo, sha: str
) -> None:
    d = detect(real_repo, "genai-prices", sha)
    got = table(d)
    assert got["AGENTS.md"] == ("modified", None, dict.fromkeys(["claude_code", *ROOT_AGENTS], ALWAYS))
    # OpenCode takes AGENTS.md, not the CLAUDE.md link beside it.
    assert got["CLAUDE.md"] == ("modified", "AGENTS.md", {"claude_code": ALWAYS, "copilot": ALWAYS})
    assert d.other_changed  # each of these PRs also changed code or data


def test_logfire_js_settings_and_codex_hooks(real_repo: RealRepo) -> None:
    created = table(detect(real_repo, "logfire-js", "03df4fb303f9"))
    assert created[".claude/settings.local.json"] == ("added", None, {"claude_code": CONFIG})
    hooks = table(detect(real_repo, "logfire-js", "45c545d9d9d2"))
    assert hooks == {
        ".codex/hooks.json": ("added", None, {"codex": CONFIG}),
        ".codex/hooks/vp-check-fix-changed.sh": ("added", None, {"codex": CONFIG}),
    }


def test_logfire_js_tool_neutral_agents_md_with_claude_md_link(real_repo: RealRepo) -> None:
    d = detect(real_repo, "logfire-js", "b6e76c29474f")
    got = table(d)
    assert got["AGENTS.md"][0] == "added" and "claude_code" in got["AGENTS.md"][2]
    assert got["CLAUDE.md"][:2] == ("modified", "AGENTS.md")
    assert len(d.other_changed) == 84
