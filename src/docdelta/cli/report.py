"""`docdelta report` and `docdelta badge`: the readers of a workdir, merged or not."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docdelta.errors import ConfigError, ExitCode

if TYPE_CHECKING:
    from docdelta.scorecard.workdir import ScoredWorkdir


def add_parser(sub: Any) -> None:
    rep = sub.add_parser("report", help="render the scorecard of a workdir")
    rep.add_argument("--workdir", type=Path, required=True)
    rep.add_argument(
        "--format",
        choices=("md", "json", "html"),
        default="md",
        help="html: one self-contained page; its links to run files are relative to the current directory",
    )

    b = sub.add_parser("badge", help="write a shields.io endpoint JSON badge")
    b.add_argument("--workdir", type=Path, required=True)
    b.add_argument("--out", type=Path, required=True)


def open_workdir(workdir: Path) -> ScoredWorkdir:
    """A finished (or partial) experiment's store, manifest, results and scorecard numbers."""
    from docdelta.scorecard.workdir import score_workdir

    scored = score_workdir(workdir)
    if scored is None:
        raise ConfigError(
            f"{workdir} holds no docdelta experiment (manifest.json or detection.json missing)",
            hint="pass the --workdir you gave to `docdelta run`",
        )
    return scored


def _report(args: argparse.Namespace) -> int:
    from docdelta.report import render_json, render_markdown
    from docdelta.report.html import render_html

    scored = open_workdir(args.workdir)
    summary = scored.summary
    if args.format == "html":
        cell_dir = partial(scored.store.cell_dir, scored.manifest.repo)
        sys.stdout.write(render_html(summary, scored.results, cell_dir=cell_dir, link_root=Path.cwd()))
        return ExitCode.OK
    print(render_json(summary) if args.format == "json" else render_markdown(summary))
    return ExitCode.OK


def _badge(args: argparse.Namespace) -> int:
    from docdelta.report import badge

    data = badge(open_workdir(args.workdir).summary)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        raise ConfigError(
            f"cannot write the badge to {args.out}: {exc.strerror or exc}",
            hint="pass --out a file path (not a directory) in a directory you can write to",
        ) from None
    print(f"badge written to {args.out}: {data['message']}")
    return ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"report": _report, "badge": _badge}
