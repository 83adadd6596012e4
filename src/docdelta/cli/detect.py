"""`docdelta detect`: the instruction files changed between two refs, or in a unified diff."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from docdelta.errors import ConfigError, ExitCode
from docdelta.git import Repo
from docdelta.instructions.detect import InstructionMatcher, detect_diff, detect_refs
from docdelta.instructions.models import NearMiss
from docdelta.text import listing
from docdelta.vocabulary import CONFIG_PATH


def add_parser(sub: Any) -> None:
    d = sub.add_parser(
        "detect", help="list the agent instruction files changed between two refs, or in a unified diff"
    )
    d.add_argument("--repo", type=Path, default=Path())
    d.add_argument("--base", help="base ref (with --head)")
    d.add_argument("--head", help="head ref (with --base)")
    d.add_argument(
        "--diff",
        type=argparse.FileType("rb"),
        help="a unified diff ('-' for stdin) instead of two refs; the built-in file table is used",
    )
    d.add_argument("--json", action="store_true", help="print the detection as JSON")


def _detect(args: argparse.Namespace) -> int:
    if args.diff is not None:
        if args.base or args.head:
            raise ConfigError("--diff and --base/--head are alternatives", hint="pass one or the other")
        detection = detect_diff(_diff_text(args.diff), InstructionMatcher())
    elif args.base and args.head:
        repo = Repo(args.repo)
        base = repo.resolve(args.base)
        detection = detect_refs(repo, base, repo.resolve(args.head), _project_matcher(repo, base))
    else:
        raise ConfigError(
            "detect needs --base and --head, or --diff FILE", hint="e.g. --base origin/main --head HEAD"
        )
    if args.json:
        print(detection.model_dump_json(indent=2))
        return ExitCode.OK
    if detection.empty:
        print("nothing to evaluate: no agent instruction file changed")
    for f in detection.changed:
        moved = f" (from {f.old_path})" if f.old_path else ""
        link = f" [symlink -> {f.link_target}]" if f.link_target else " [symlink]" if f.symlink else ""
        via = f" (imported by {', '.join(f.imported_by)})" if f.imported_by else ""
        print(f"{f.status.value:<9} {f.path}{moved}{link}{via}  read by: {f.loading_text() or '-'}")
    for reason, paths in _grouped(detection.near_misses).items():
        where = paths[0] if len(paths) == 1 else f"{len(paths)} files ({listing(paths)})"
        print(f"note      {where}: {reason}")
    if detection.other_changed and not detection.empty:
        print(
            f"note      {len(detection.other_changed)} other file(s) changed in the range (code, tests, docs)"
        )
    return ExitCode.OK


def _grouped(near_misses: Sequence[NearMiss]) -> dict[str, list[str]]:
    """Near misses with the same reason as one line: a docs site's six translated `agents.md`
    pages are one finding, not six."""
    grouped: dict[str, list[str]] = {}
    for n in near_misses:
        grouped.setdefault(n.reason, []).append(n.path)
    return grouped


def _project_matcher(repo: Repo, sha: str) -> InstructionMatcher:
    """The instruction matcher of `.docdelta.yml` at `sha` (the trusted base). Without one
    it is the built-in table's, and the config's models are never imported."""
    if not any(e.path == CONFIG_PATH for e in repo.tree(sha, [CONFIG_PATH])):
        return InstructionMatcher()
    from docdelta.config import load_project_config, matcher

    return matcher(load_project_config(repo, sha))


def _diff_text(stream: BinaryIO) -> str:
    """A diff's text. Only its file headers matter to detection and those are git's (UTF-8
    or C-quoted); a hunk in another encoding (a Latin-1 file) must not stop it."""
    with stream:
        return stream.read().decode("utf-8", errors="replace")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"detect": _detect}
