"""The instruction graph: what each agent family loads from a tree, with real git trees
and sealed checkouts. Each case is one a real repository showed (the Python SDK whose
CLAUDE.md is `@AGENTS.md`, minijinja's AGENTS.md -> CLAUDE.md and its dangling week,
a PR that adds only a slash command, docs pages named agents.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gitrepo import GitRepo, Link

from docdelta.checkout.seal import build_overlays, seal
from docdelta.errors import ConfigError
from docdelta.gateway.fingerprint import match, request_lines
from docdelta.gateway.models import ModelCall
from docdelta.git import Repo
from docdelta.instructions.audit import audit_run, build_index
from docdelta.instructions.detect import InstructionMatcher, detect_refs
from docdelta.instructions.loading import DirTree, GitTree, Graph, build, imports
from docdelta.instructions.models import FileStatus, LoadMode

MATCH = InstructionMatcher()
AGENTS = "# Agents\nRun the tests with `uv run --frozen pytest` before every commit.\n"


def graph_of(tmp_path: Path, files: dict[str, str | Link]) -> Graph:
    g = GitRepo.init(tmp_path / "proj")
    sha = g.commit(files)
    return build(GitTree(Repo(g.path), sha), MATCH.families)


def paths(graph: Graph, family: str, *modes: LoadMode) -> list[str]:
    return [f.path for f in graph.files(family, *modes)]


# -------------------------------------------------------------------- imports
def test_claude_md_importing_agents_md_makes_claude_code_load_it(tmp_path: Path) -> None:
    graph = graph_of(tmp_path, {"CLAUDE.md": "@AGENTS.md\n", "AGENTS.md": AGENTS})
    assert paths(graph, "claude_code", LoadMode.always) == ["AGENTS.md", "CLAUDE.md"]
    assert graph.readers("AGENTS.md")["claude_code"].via == "CLAUDE.md"


def test_imports_are_relative_recursive_and_end_on_cycles(tmp_path: Path) -> None:
    graph = graph_of(
        tmp_path,
        {
            "CLAUDE.md": "See @docs/guide.md and @missing.md.\n",
            "docs/guide.md": "Style: @style.md\n",  # relative to docs/
            "docs/style.md": "Back to @../CLAUDE.md and @guide.md\n",  # a cycle
        },
    )
    assert paths(graph, "claude_code") == ["CLAUDE.md", "docs/guide.md", "docs/style.md"]
    assert graph.readers("docs/style.md")["claude_code"].via == "docs/guide.md"


def test_imports_stop_after_five_hops(tmp_path: Path) -> None:
    chain = {f"d{i}.md": f"@d{i + 1}.md\n" for i in range(8)}
    graph = graph_of(tmp_path, {"CLAUDE.md": "@d0.md\n", **chain})
    assert paths(graph, "claude_code") == ["CLAUDE.md", "d0.md", "d1.md", "d2.md", "d3.md", "d4.md"]


def test_code_spans_fences_emails_and_home_paths_import_nothing() -> None:
    text = (
        "Mail dev@example.com. Run `@AGENTS.md` literally.\n\n```\n@inside-fence.md\n```\n\n"
        "    @indented-code.md\n\nReal: @docs/a\\ b.md, then @~/.claude/me.md\n"
    )
    assert imports(text) == ["docs/a b.md,", "~/.claude/me.md"]


def test_an_import_never_leaves_the_repository(tmp_path: Path) -> None:
    graph = graph_of(tmp_path, {"CLAUDE.md": "@../outside.md @/etc/passwd\n"})
    assert paths(graph, "claude_code") == ["CLAUDE.md"]


# ----------------------------------------------------------------- precedence
def test_opencode_takes_the_first_of_agents_and_claude_md(tmp_path: Path) -> None:
    both = graph_of(tmp_path / "a", {"AGENTS.md": AGENTS, "CLAUDE.md": "claude only\n"})
    assert paths(both, "opencode", LoadMode.always) == ["AGENTS.md"]
    assert paths(both, "claude_code", LoadMode.always) == ["CLAUDE.md"]  # no import: not AGENTS.md
    only_claude = graph_of(tmp_path / "b", {"CLAUDE.md": "claude only\n"})
    assert paths(only_claude, "opencode", LoadMode.always) == ["CLAUDE.md"]


def test_codex_prefers_an_override_in_the_same_directory(tmp_path: Path) -> None:
    graph = graph_of(
        tmp_path,
        {"AGENTS.md": AGENTS, "AGENTS.override.md": "override\n", "pkg/AGENTS.md": "nested rules here\n"},
    )
    assert paths(graph, "codex") == ["AGENTS.override.md", "pkg/AGENTS.md"]
    assert graph.readers("pkg/AGENTS.md")["codex"].mode is LoadMode.on_demand


@pytest.mark.parametrize(
    ("path", "family", "mode", "kind"),
    [
        (".claude/commands/review-pr.md", "claude_code", LoadMode.on_demand, "slash command"),
        (".claude/agents/reviewer.md", "claude_code", LoadMode.on_demand, "subagent"),
        (".claude/skills/add-price-model/SKILL.md", "claude_code", LoadMode.on_demand, "skill"),
        (".claude/settings.json", "claude_code", LoadMode.config, "settings (permissions, hooks)"),
        (".codex/hooks.json", "codex", LoadMode.config, "configuration, hooks"),
        (".pi/prompts/make-release.md", "pi", LoadMode.on_demand, "prompt template"),
        ("pkg/CLAUDE.md", "claude_code", LoadMode.on_demand, None),
    ],
)
def test_loading_modes(tmp_path: Path, path: str, family: str, mode: LoadMode, kind: str | None) -> None:
    graph = graph_of(tmp_path, {path: "some instruction text for the agent\n"})
    loaded = graph.readers(path)[family]
    assert loaded.mode is mode
    assert kind is None or loaded.kind == kind


def test_a_pr_adding_only_a_slash_command_is_evaluated_with_its_mode(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "proj")
    g.commit({"README.md": "hi\n", "CLAUDE.md": "@AGENTS.md\n", "AGENTS.md": AGENTS})
    head = g.commit({".claude/commands/review-pr.md": "Review the PR: run the tests, then comment.\n"})
    found = detect_refs(Repo(g.path), "HEAD~1", head, MATCH)
    assert not found.empty
    [cmd] = found.changed
    assert (cmd.path, cmd.status, cmd.families) == (
        ".claude/commands/review-pr.md",
        FileStatus.added,
        ["claude_code"],
    )
    assert cmd.loading_text() == "claude_code (on demand: slash command)"


def test_an_agents_md_edit_names_claude_code_as_reader_through_the_import(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "proj")
    g.commit({"CLAUDE.md": "@AGENTS.md\n", "AGENTS.md": AGENTS})
    head = g.commit({"AGENTS.md": AGENTS + "Never push to main.\n"})
    [edit] = detect_refs(Repo(g.path), "HEAD~1", head, MATCH).changed
    assert "claude_code" in edit.families and edit.imported_by == ["CLAUDE.md"]


def test_an_imported_doc_that_changed_is_a_note_not_an_evaluated_change(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "proj")
    g.commit({"CLAUDE.md": "@docs/testing.md\n", "docs/testing.md": "old testing guide, quite long\n"})
    head = g.commit({"docs/testing.md": "new testing guide, quite long\n"})
    found = detect_refs(Repo(g.path), "HEAD~1", head, MATCH)
    assert found.empty
    assert [n.path for n in found.near_misses] == ["docs/testing.md"]
    assert "not evaluated" in found.near_misses[0].reason and "CLAUDE.md" in found.near_misses[0].reason


# ------------------------------------------------------------------ symlinks
def _conditions(tmp_path: Path, base: dict[str, str | Link], head: dict[str, str | Link | None]):  # type: ignore[no-untyped-def]
    g = GitRepo.init(tmp_path / "proj")
    b = g.commit({"README.md": "readme\n", "src/app.py": "print(1)\n", **base})
    h = g.commit(head)
    repo = Repo(g.path)
    overlays = build_overlays(repo, b, h, ["base", "head", "none"], MATCH, None)
    sealed = {n: seal(repo, h, o, tmp_path / n, MATCH, []) for n, o in overlays.items()}
    return repo, b, h, sealed


@pytest.mark.parametrize(("link", "target"), [("CLAUDE.md", "AGENTS.md"), ("AGENTS.md", "CLAUDE.md")])
def test_a_linked_pair_carries_each_conditions_target_content(tmp_path: Path, link: str, target: str) -> None:
    repo, b, h, sealed = _conditions(
        tmp_path,
        {target: "base rules: run make check\n", link: Link(target)},
        {target: "head rules: run make test\n"},
    )
    for name, text in (("base", "base rules"), ("head", "head rules")):
        for path in (link, target):
            assert (sealed[name].path / path).read_text().startswith(text)
    assert not (sealed["none"].path / link).is_symlink() and not (sealed["none"].path / link).exists()
    assert not (sealed["none"].path / target).exists()
    [edit, seen] = detect_refs(repo, b, h, MATCH).changed
    assert (edit.path, seen.path, seen.link_target, seen.symlink) == (target, link, target, True)
    assert set(edit.families) >= {"claude_code", "codex"}  # both read the one content


def test_a_dangling_instruction_link_is_reported_and_reads_as_nothing(tmp_path: Path) -> None:
    # minijinja 179652f1393c: CLAUDE.md deleted, AGENTS.md -> CLAUDE.md left dangling.
    repo, b, h, sealed = _conditions(
        tmp_path,
        {"CLAUDE.md": "the rules, long enough\n", "AGENTS.md": Link("CLAUDE.md")},
        {"CLAUDE.md": None},
    )
    assert (sealed["head"].path / "AGENTS.md").is_symlink() and not (
        sealed["head"].path / "AGENTS.md"
    ).exists()
    found = detect_refs(repo, b, h, MATCH)
    got = {f.path: f for f in found.changed}
    assert got["CLAUDE.md"].status is FileStatus.deleted
    assert got["AGENTS.md"].status is FileStatus.deleted and got["AGENTS.md"].link_target == "CLAUDE.md"
    assert "does not exist at head" in {n.path: n.reason for n in found.near_misses}["AGENTS.md"]
    head_graph = build(DirTree(sealed["head"].path), MATCH.families)
    assert head_graph.dangling == ("AGENTS.md",) and "codex" not in head_graph.loads


def test_a_directory_link_to_rules_is_the_conditions_and_gone_in_none(tmp_path: Path) -> None:
    # `.cursor/rules -> ../docs/rules` leaked its rules into base and none.
    repo, b, h, sealed = _conditions(
        tmp_path,
        {"AGENTS.md": AGENTS, "docs/rules/style.mdc": "Always use tabs in this repo\n"},
        {".cursor/rules": Link("../docs/rules"), "AGENTS.md": AGENTS + "more\n"},
    )
    assert (sealed["head"].path / ".cursor/rules/style.mdc").read_text().startswith("Always use tabs")
    for name in ("base", "none"):
        assert not (sealed[name].path / ".cursor/rules").exists()
        assert (sealed[name].path / "docs/rules/style.mdc").exists()  # the doc itself stays
    got = {f.path: f for f in detect_refs(repo, b, h, MATCH).changed}
    assert got[".cursor/rules/style.mdc"].families == ["cursor"]
    assert got[".cursor/rules"].link_target == "../docs/rules"


def test_a_link_leaving_the_repository_stays_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="outside the repository"):
        _conditions(tmp_path, {"AGENTS.md": AGENTS}, {"CLAUDE.md": Link("../../etc/passwd")})


# ---------------------------------------------------------- trees and range
def test_near_misses_come_from_the_trees_not_only_the_diff(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "proj")
    g.commit({"docs/source/en/reference/agents.md": "# Agents API reference\n", "README.md": "hi\n"})
    head = g.commit({"AGENTS.md": AGENTS})
    found = detect_refs(Repo(g.path), "HEAD~1", head, MATCH)
    assert [n.path for n in found.near_misses] == ["docs/source/en/reference/agents.md"]


def test_other_files_changed_in_the_range_are_counted(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "proj")
    g.commit({"AGENTS.md": AGENTS, "src/a.py": "a = 1\n"})
    head = g.commit(
        {"AGENTS.md": AGENTS + "x\n", "src/a.py": "a = 2\n", "tests/test_a.py": "def test(): pass\n"}
    )
    found = detect_refs(Repo(g.path), "HEAD~1", head, MATCH)
    assert found.other_changed == ["src/a.py", "tests/test_a.py"]


# ------------------------------------------------------ agreement with audit
def test_graph_agrees_with_the_injected_instruction_audit(tmp_path: Path) -> None:
    """What the graph says Claude Code loads always, framed as Claude Code injects memory
    files, is exactly what the audit finds in the request: nothing missing, nothing foreign,
    in every condition (AGENTS.md arrives through CLAUDE.md's import in base and head)."""
    repo, b, h, sealed = _conditions(
        tmp_path,
        {"CLAUDE.md": "@AGENTS.md\n", "AGENTS.md": AGENTS},
        {"AGENTS.md": AGENTS + "Never force-push to a shared branch.\n"},
    )
    detection = detect_refs(repo, b, h, MATCH)
    specs = [build_overlays(repo, b, h, [n], MATCH, None)[n].spec(n) for n in sealed]
    index = build_index(specs, {n: s.path for n, s in sealed.items()}, detection)
    for name, checkout in sealed.items():
        graph = build(DirTree(checkout.path), MATCH.families)
        loaded = paths(graph, "claude_code", LoadMode.always)
        blocks = [
            {"type": "text", "text": f"Contents of /workspace/{p}:\n\n{(checkout.path / p).read_text()}"}
            for p in loaded
        ]
        body = {"messages": [{"role": "user", "content": [*blocks, {"type": "text", "text": "task"}]}]}
        found = match(index.fingerprints, *request_lines(json.dumps(body).encode()))
        call = ModelCall(
            upstream="anthropic",
            method="POST",
            path="/v1/messages",
            status=200,
            latency_s=0.1,
            instructions=found,
        )
        audit = audit_run(index, name, [call])
        assert (audit.seen, audit.missing, audit.foreign) == (loaded, [], []), name
    assert loaded == []  # none: nothing to load
