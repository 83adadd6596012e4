"""`docdelta history` and `docdelta receipt`: the evaluations `run --history DIR` or the Action
recorded (`docdelta.scorecard.history`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from docdelta.errors import ConfigError, ExitCode
from docdelta.git import Repo

if TYPE_CHECKING:
    from docdelta.scorecard.history import History


def add_parser(sub: Any) -> None:
    h = sub.add_parser("history", help="the evaluations recorded by `run --history DIR` or the Action")
    _add_history_source(h)
    h.add_argument("--file", help="only evaluations whose head arm held this instruction file")
    h.add_argument("--json", action="store_true", help="print the records as JSON lines")
    rc = sub.add_parser(
        "receipt", help="exit 0 only if this exact instruction file content has a passing evaluation"
    )
    _add_history_source(rc)
    rc.add_argument("--file", required=True, help="the instruction file, e.g. AGENTS.md")
    rc.add_argument("--ref", help="read the file at this commit (default: the work tree's file)")
    rc.add_argument(
        "--fail-on",
        choices=("regression", "no-improvement", "never"),
        default="regression",
        help="the gate an evaluation must pass (default regression)",
    )


def _add_history_source(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--history", type=Path, metavar="DIR", help="a directory `run --history` wrote")
    where.add_argument(
        "--results-store",
        metavar="SPEC",
        help="the Action's results store, spelled as its input: branch:NAME (fetched from --repo's origin) "
        "or dir:PATH",
    )
    p.add_argument("--repo", type=Path, default=Path())


def _open_history(args: argparse.Namespace) -> History:
    """`--history DIR`, or the `history/` folder of `--results-store` (the data branch included)."""
    from docdelta.action.settings import StoreSpec
    from docdelta.scorecard.history import HISTORY_DIR, History
    from docdelta.wiring import build_results_store

    if args.history is not None:
        return History.at(args.history)
    try:
        spec = StoreSpec.parse(args.results_store)
    except ValueError as exc:
        raise ConfigError(f"--results-store: {exc}", hint="e.g. branch:docdelta-results") from None
    # The checkout's own git credentials reach a data branch; the CLI passes no token.
    store = build_results_store(spec.kind, spec.location, args.repo, server_url="", token="")
    if store is None:
        raise ConfigError("--results-store none keeps no history", hint="name the branch or directory")
    return History(store, HISTORY_DIR)


def _history(args: argparse.Namespace) -> int:
    from docdelta.scorecard.history import render as render_history

    records, skipped = _open_history(args).records()
    if args.json:
        for record in records:
            print(record.model_dump_json())
        return ExitCode.OK
    print(render_history(records, args.file, skipped))
    return ExitCode.OK


def _file_bytes(repo_dir: Path, path: str, ref: str | None) -> bytes:
    """The instruction file as it would be merged: the work tree's, or at `ref`."""
    if ref is None:
        try:
            return (repo_dir / path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {repo_dir / path}: {exc.strerror}", hint="check --file") from None
    repo = Repo(repo_dir)
    data = repo.file_at(repo.resolve(ref), path)
    if data is None:
        raise ConfigError(f"{path} does not exist at {ref}", hint="check --file and --ref")
    return data


def _receipt(args: argparse.Namespace) -> int:
    """The CI check: the file being merged, by content hash, against the receipts."""
    from docdelta.scorecard.history import content_digest

    history = _open_history(args)
    digest = content_digest(_file_bytes(args.repo, args.file, args.ref))
    receipt = history.receipt(digest)
    entries = receipt.evaluations if receipt else []
    # the path as the history names it (`./AGENTS.md` is `AGENTS.md`): a receipt holds at one path
    passing = receipt.passing(args.fail_on, PurePosixPath(args.file).as_posix()) if receipt else []
    if passing:
        last = passing[-1]
        print(
            f"ok: {args.file} ({digest[:12]}) passed `fail-on: {args.fail_on}` in the evaluation of head "
            f"{last.head_sha[:12]} on {last.recorded_at:%Y-%m-%d %H:%M}: {last.gate(args.fail_on).reason}"
        )
        return ExitCode.OK
    why = (
        f"{len(entries)} evaluation(s) of this content, none passing `fail-on: {args.fail_on}`"
        if entries
        else "no evaluation of this exact content is recorded"
    )
    print(f"docdelta: {args.file} ({digest[:12]}): {why}", file=sys.stderr)
    return ExitCode.NO_RECEIPT


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"history": _history, "receipt": _receipt}
