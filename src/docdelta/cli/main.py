"""Command line: build the parser from the command modules, dispatch, map errors to exit codes.

Each command group is one module of this package, its `add_parser` beside its handlers and
its `COMMANDS` (subcommand -> handler). `run` and `demo` parse their flags into `RunOptions`
and call the composition root (`docdelta.evaluation.evaluate`), exactly as the Action does
with its inputs. Exit codes are `errors.ExitCode`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

from docdelta import __version__
from docdelta.cli import (
    ablate,
    action,
    agent_check,
    demo,
    detect,
    external,
    gc,
    history,
    init,
    judge,
    report,
    run,
    schema,
    shard,
    suggest,
    tasks,
)
from docdelta.errors import DocdeltaError, ExitCode, Terminated

# Each command imports what only it needs inside its handler (hence the PLC0415 per-file
# ignore in pyproject.toml): scipy, the Docker SDK, PyGithub and httpx cost seconds to
# import, and `detect`, which needs none of them, must start in well under a second
# (the test is tests/unit/test_cli_imports.py, the figure bench/bench_detect.py).
# That includes docdelta's own pydantic models: the class statements of each package's models and
# docdelta.config (with the gateway's) were a third of detect's start-up.

GROUPS = (detect, run, shard, report, ablate, suggest, history, external, demo, tasks, judge, gc,
          agent_check, init, schema, action)  # fmt: skip
"""The command modules, in the order `docdelta --help` lists their commands."""

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    name: handler for group in GROUPS for name, handler in group.COMMANDS.items()
}
"""Subcommand -> handler; every subparser of `_parser` has one (a test holds them equal)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="docdelta",
        description="Test edits to agent instruction files (AGENTS.md, CLAUDE.md, ...) like code.",
    )
    p.add_argument("--version", action="version", version=f"docdelta {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with _sigterm_as_exception():
        try:
            code = _dispatch(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit as "Exception ignored"
            return code
        except DocdeltaError as exc:
            print(f"docdelta: error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print(f"\ndocdelta: interrupted; {_SAVED}", file=sys.stderr)
            return ExitCode.INTERRUPTED
        except Terminated:
            print(f"\ndocdelta: terminated (SIGTERM); {_SAVED}", file=sys.stderr)
            return ExitCode.TERMINATED
        except BrokenPipeError:
            return _reader_went_away()


_SAVED = "every finished result is saved — rerun the same command to resume"


@contextlib.contextmanager
def _sigterm_as_exception() -> Iterator[None]:
    """SIGTERM (a CI cancel, `kill`, `docker stop`) unwinds like Ctrl-C: every `finally`
    removes its temp files and sandboxes, finished results stay, and the exit is 143."""

    def terminate(_signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends us at once
        raise Terminated

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _reader_went_away() -> int:
    """`docdelta report | head`: the reader closed the pipe, which is its right, not an error.
    Point stdout at /dev/null so the interpreter's final flush does not fail too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return ExitCode.OK


def _dispatch(args: argparse.Namespace) -> int:
    if getattr(args, "env_file", None) is not None:
        from docdelta.envfile import load_env_file

        names = load_env_file(args.env_file)
        print(f"docdelta: --env-file set {', '.join(names) or 'nothing new'}", file=sys.stderr)
    return COMMANDS[args.command](args)
