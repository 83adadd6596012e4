"""The flags several commands share (`run` and `ablate`'s agent and limits, `plan`'s arms), the
argparse types made from `docdelta.validate`, and `run_options`, their one reading as
`RunOptions`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from docdelta import validate
from docdelta.errors import ConfigError
from docdelta.sandbox import provider_names
from docdelta.validate import DEFAULT_MAX_OUTPUT_TOKENS
from docdelta.vocabulary import DEFAULT_CONDITIONS, DEFAULT_NOISE_BAND

if TYPE_CHECKING:
    from docdelta.config import ArmSpec
    from docdelta.evaluation import RunOptions
    from docdelta.experiment.plan import PlanTooLarge


T = TypeVar("T")


def arg(check: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a `docdelta.validate` function: its message becomes the usage
    error, which argparse prefixes with the flag's name (exit 2)."""

    def parse(value: str) -> T:
        try:
            return check(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def at_least(low: int) -> Callable[[str], int]:
    return arg(partial(validate.whole_at_least, low))


def parse_arm_specs(text: str) -> list[ArmSpec]:
    from docdelta.experiment.arms import parse_arms  # statistics are imported only when arms are given

    return parse_arms(text)


def chosen_conditions(args: argparse.Namespace) -> list[str]:
    """`--conditions`, by default base,head,none, or none of them when `--arms` is given."""
    if args.conditions is not None:
        return list(args.conditions)
    return [] if args.arms else list(DEFAULT_CONDITIONS)


def add_comparison(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The repository, the two refs compared and the task files (`run`, `plan`, `prepare`).
    Not `required`: `run --repos FILE` names them per repository instead (`ONE_REPO_FLAGS`)."""
    p.add_argument("--repo", type=Path, default=Path() if required else None)
    p.add_argument("--base", required=required)
    p.add_argument("--head", required=required)
    p.add_argument("--tasks", type=Path, required=required, help="directory of task files (*.yaml, *.json)")


def add_band(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "--noise-band",
        type=arg(validate.noise_band),
        default=None,
        help="head - base differences within +- this are noise (default: .docdelta.yml's noise_band, "
        f"else {DEFAULT_NOISE_BAND}); the run records it, so `report` uses it too",
    )


def add_agent_options(r: argparse.ArgumentParser) -> None:
    """The flags of `RUN_FLAGS`: agent, sandbox and limits (`run` and `ablate`)."""
    r.add_argument(
        "--agent",
        default="fake",
        help="fake | command | openai | claude_code | codex | opencode | gemini | copilot "
        "(agents that call a model need --sandbox docker)",
    )
    r.add_argument("--agent-cmd", help="the command agent's executable and arguments")
    r.add_argument("--model", help="the model the agent uses (agents that call a model API)")
    r.add_argument("--timeout", type=float, default=600.0, help="wall-clock seconds per run")
    r.add_argument(
        "--sandbox",
        default="local",
        choices=provider_names(),
        help="local (bubblewrap), docker, or none (no isolation, flagged as a confound); default: local",
    )
    r.add_argument("--extra-ca", type=Path, help="PEM bundle trusted when building the docker image")
    r.add_argument(
        "--allow-network", action="store_true", help="local sandbox: give runs asking for it the host network"
    )
    r.add_argument("--allow-unreviewed", action="store_true", help="run tasks whose gold is not reviewed")
    r.add_argument("--cap-usd", type=float, help="stop the matrix before spend would exceed this")
    r.add_argument(
        "--reserve-usd",
        type=float,
        default=0.0,
        help="spend reserved per run for the cap check; behind the gateway also each run's dollar budget",
    )
    r.add_argument("--max-turns", type=at_least(1), help="turn cap per run, for agents that take one")
    r.add_argument(
        "--max-output-tokens",
        type=at_least(1),
        help=f"output cap per model turn of the openai agent (default {DEFAULT_MAX_OUTPUT_TOKENS})",
    )
    r.add_argument(
        "--infra-retries",
        type=at_least(0),
        default=2,
        help="reruns of a run our own machinery failed (default 2)",
    )
    r.add_argument(
        "--rate-limit",
        choices=("stop", "wait"),
        default="stop",
        help="stop: a rate-limited run stops the matrix (default); wait: retry it after 5, 15 and 45 "
        "minutes first (logged in <workdir>/ratelimit.log)",
    )

    r.add_argument(
        "--env-file",
        type=Path,
        metavar="FILE",
        help="read API keys from this dotenv file (KEY=value lines); variables already set win",
    )
    r.add_argument("--jobs", type=at_least(1), default=1, help="cells run at once (default 1)")
    r.add_argument(
        "--shard",
        help="I/N: run only shard I of N of the plan (one GitHub Actions matrix job; see `docdelta plan`)",
    )


RUN_FLAGS = {
    "agent": "agent",
    "agent_cmd": "agent-cmd",
    "model": "model",
    "sandbox": "sandbox",
    "allow_network": "allow-network",
    "extra_ca": "extra-ca",
    "timeout_s": "timeout",
    "max_turns": "max-turns",
    "max_output_tokens": "max-output-tokens",
    "cap_usd": "cap-usd",
    "reserve_usd": "reserve-usd",
    "infra_retries": "infra-retries",
    "rate_limit": "rate-limit",
    "jobs": "jobs",
    "shard": "shard",
    "noise_band": "noise-band",
}
"""RunOptions field -> `docdelta run` flag (without `--`); the Action's table is settings.INPUTS."""


def run_options(args: argparse.Namespace) -> RunOptions:
    """`docdelta run`'s flags as the options the composition root takes. The CLI's keys
    come from the environment, so `api_key` stays unset."""
    from docdelta.evaluation import RunOptions

    values = {name: getattr(args, flag.replace("-", "_")) for name, flag in RUN_FLAGS.items()}
    return RunOptions.parse(
        {**values, "stop_failed_alike": True}, lambda name: f"--{RUN_FLAGS.get(name, name)}"
    )


def plan_too_large(exc: PlanTooLarge, options: RunOptions) -> ConfigError:
    """The refusal of a plan over the confirmation bound, with what it may cost and take."""
    from docdelta.experiment.plan import plan_cost

    cost = plan_cost(exc.planned, timeout_s=options.timeout_s, reserve_usd=options.reserve_usd)
    return ConfigError(exc.message, hint=cost + exc.hint)
