"""`docdelta judge` and `docdelta calibrate`: an LLM judge's rulings on key points, and its
measure on labeled fixtures (`docdelta.grading`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docdelta.errors import ExitCode


def add_parser(sub: Any) -> None:
    jd = sub.add_parser("judge", help="rule on key points with a calibrated LLM judge (writes judged.json)")
    jd.add_argument("--workdir", type=Path, required=True)
    _add_judge_options(jd)
    cal = sub.add_parser("calibrate", help="measure a judge on each rubric's labeled pass/fail fixtures")
    cal.add_argument(
        "--fixtures", type=Path, help="labeled fixtures, <task id>.yaml (default: .docdelta/rubrics)"
    )
    _add_judge_options(cal)


def _add_judge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", type=Path, required=True, help="directory of task files (*.yaml, *.json)")
    p.add_argument("--judge-model", required=True, help="must differ from the agent's model")
    p.add_argument("--provider", choices=("openai", "anthropic"), default="openai", help="default: openai")
    p.add_argument("--base-url", help="model API (or gateway route) base URL; default: the provider's")
    p.add_argument("--calibration", type=Path, help="calibration records (default: .docdelta/calibration)")


def _judge(args: argparse.Namespace) -> int:
    """`judge` and `calibrate`: both ask through the judge's client, with the key from the env."""
    from docdelta.grading.calibration import below_threshold, calibrate_tasks, default_dirs
    from docdelta.grading.judged import judge_workdir
    from docdelta.grading.rubrics import rubric_of
    from docdelta.results.grades import JudgeInfo
    from docdelta.results.store import ResultStore
    from docdelta.tasks.load import load_tasks
    from docdelta.wiring import build_judge

    tasks = [t.task for t in load_tasks(args.tasks)]
    fixtures_dir, calibration_dir = default_dirs(args.tasks)
    calibration_dir = args.calibration or calibration_dir
    judge = JudgeInfo(provider=args.provider, model=args.judge_model)
    api = build_judge(judge, args.base_url, os.environ)
    try:
        if args.command == "judge":
            done = judge_workdir(ResultStore(args.workdir), tasks, api, calibration_dir)
            print(f"judge {judge}: {done.judged} run(s) judged, {done.reused} reused, {done.skipped} skipped")
            return ExitCode.OK
        rubrics = [rubric_of(t) for t in tasks]
        saved = calibrate_tasks(api, rubrics, args.fixtures or fixtures_dir, calibration_dir)
    finally:
        api.close()
    for record, path in saved:
        low = below_threshold(record)
        print(
            f"{'FAIL' if low else 'ok  '} {record.task}: pass-class {record.pass_accuracy:.2f} "
            f"({record.pass_labels}), fail-class {record.fail_accuracy:.2f} ({record.fail_labels}) -> {path}"
        )
        for line in [*low, *record.errors]:
            print(f"     {line}")
    return ExitCode.BAD_INPUT if any(below_threshold(r) for r, _ in saved) else ExitCode.OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"judge": _judge, "calibrate": _judge}
