"""Globs mean what .gitignore means, wherever docdelta evaluates one (pathspec underneath)."""

from __future__ import annotations

import pytest

from docdelta.grading.hidden import BUILD_FILES, TEST_FILES
from docdelta.instructions.globs import GlobSet


def test_globs_anchor_when_they_contain_a_slash() -> None:
    assert GlobSet(["*.md"]).matches("a/b/c.md")
    assert not GlobSet(["/README.md"]).matches("docs/README.md")
    assert GlobSet(["a/**/z"]).matches("a/z") and GlobSet(["a/**/z"]).matches("a/b/c/z")
    assert not GlobSet([]).matches("anything")


@pytest.mark.parametrize("pattern", ["/", "", "   ", "# a comment"])
def test_a_glob_that_matches_nothing_is_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="empty glob"):
        GlobSet([pattern])


def test_bracket_classes_match_one_character_of_the_set() -> None:
    spec = GlobSet(["*.test.[jt]s"])
    assert spec.matches("src/sum.test.ts") and spec.matches("sum.test.js")
    assert not spec.matches("sum.test.py") and not spec.matches("sum.test.[jt]s.md")


def test_a_directory_pattern_covers_everything_below_it_and_negation_reincludes() -> None:
    spec = GlobSet(["fixtures/", "!fixtures/keep.txt"])
    assert spec.matches("fixtures/a/b.json") and spec.matches("pkg/fixtures/x")
    assert not spec.matches("fixtures/keep.txt")


PROTECTED = GlobSet([*TEST_FILES, *BUILD_FILES])


@pytest.mark.parametrize(
    "path",
    [
        "src/sum.test.ts",
        "src/sum.test.js",
        "src/sum.spec.ts",
        "packages/api/src/formatter.spec.js",
        "src/sum.test.tsx",
        "src/sum.test.mjs",
        "package.json",
        "packages/logfire-api/package.json",
        "jest.config.js",
        "jest.config.cjs",
        "vitest.config.ts",
        "packages/api/vitest.config.mts",
        "src/__snapshots__/sum.test.ts.snap",
        "tests/snapshots/test_templates__vm@filters.txt.snap",
        ".cargo/config.toml",
    ],
)
def test_js_ts_test_and_runner_files_are_protected_from_the_agent(path: str) -> None:
    assert PROTECTED.matches(path)


@pytest.mark.parametrize("path", ["src/sum.ts", "src/testament.js", "src/contest.ts", "README.md"])
def test_ordinary_sources_are_not_protected(path: str) -> None:
    assert not PROTECTED.matches(path)
