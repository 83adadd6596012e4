"""The gate as shipped, end to end: simulated PRs through the real `docdelta run` + `report`.

Each simulated PR is a fresh git repository and workdir: three tasks that ask for the test
command, a command agent (a POSIX shell script in a directory the sandbox shows) that
answers right with the per-task rate its checkout's AGENTS.md states, and base and head
commits whose AGENTS.md differ. A/A: head states the same rates (the edit changes nothing
the agent reads). Drop: head states task t3 at 0.3 instead of 0.8. Nothing else is set: the
repeats, noise band, conditions and caps are the CLI's shipped defaults, so the figures are
what a user who configures nothing gets. Beside each case, `docdelta.scorecard.power.simulate` runs the
same scenario, design and band in-process, so a divergence between the two shows.

    .venv/bin/python bench/bench_gate_cli.py [--prs 100] [--aa-prs N] [--sim-prs 1000] [--jobs 4] [--seed 0]
    .venv/bin/python bench/bench_gate_cli.py --smoke   # one PR per case, cap 2: the path, not the figures
    .venv/bin/python bench/bench_gate_cli.py --keep /tmp/misses   # keep each PR the gate got wrong

A PR's workdir is deleted once its verdict is read, unless `--keep` names a directory: then
the PRs whose verdict is not the case's right one (the drop not called regressed, an A/A PR
called a change) keep their repository and workdir there (`docdelta report --workdir` reads
it again). Each case also prints the runs lost to faults and infra errors, which leave a PR
fewer runs than the simulator assumes, and how many PRs a replay contradicts: each PR's own
recorded scores, fed through `run_rounds` the way the simulator feeds its draws, must ask for
exactly the rounds the CLI ran and reach the verdict `report` printed; a PR where they
differ means the CLI and the simulator apply two rules: `--keep` keeps it too, and the bench
exits 1 (so the CI smoke fails), since then the simulator's column says nothing about the CLI.

At the defaults a PR takes 50-216 runs (none arm included). The agent is a shell script (a
few milliseconds a run, where a python one took about 80 ms to start), the power line's
simulation is done once and copied into every workdir (it does not touch the verdict), and
PRs run --jobs at a time: a run costs docdelta about 30 ms of CPU, so an A/A PR about 6 s and
a drop PR about 3 s, and 100 PRs per case take about 10 minutes of two idle cores (each case
prints its wall time per PR; a machine shared with other work takes longer).

Every rate is printed with its 95% Wilson interval.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from docdelta.results.layout import POWER_CACHE
from docdelta.results.models import Cell, RunResult
from docdelta.results.store import ResultStore
from docdelta.scorecard.decision import Design, TaskRuns
from docdelta.scorecard.models import Summary
from docdelta.scorecard.power import (
    CONTROL,
    TREATMENT,
    Scenario,
    cached_drop,
    drop_scenario,
    simulate,
    wilson,
)
from docdelta.scorecard.sequential import run_rounds
from docdelta.scorecard.stats import DEFAULT_ALPHA
from docdelta.scorecard.summarize import design_of, task_runs
from docdelta.validate import DEFAULT_MAX_REPEATS
from docdelta.vocabulary import DEFAULT_NOISE_BAND

SMOKE_ARGS = ["--smoke"]
"""What CI runs (tests/in_docker/test_bench_smoke.py): one PR per case at a cap of 2."""
RATES = (0.3, 0.5, 0.8)
"""The three tasks' success rates (as bench/bench_gate.py); the drop takes the last to 0.3."""
DROPPED, DROP_TO = 2, 0.3
TASK = """\
id: {id}
prompt: "Task {id}: how do I run the tests?"
gold:
  commands: ["make check"]
reviewed: true
"""
AGENT = """\
#!/bin/sh
# Right with the rate AGENTS.md states for the task the prompt names; a shell script, not a
# python one, so a run costs a few milliseconds of agent and the bench measures docdelta.
task=$(sed -n 's/.*Task \\(t[0-9]*\\).*/\\1/p' | head -n 1)
rate=$(sed -n "s/.* $task=\\([0-9.]*\\).*/\\1/p" AGENTS.md 2>/dev/null | head -n 1)
draw=$(od -An -N4 -tu4 /dev/urandom)
if awk -v d="$draw" -v p="${rate:-0}" 'BEGIN { exit !(d / 4294967296 < p) }'; then
  command="make check"
else
  command="python setup.py test"
fi
printf '{"answer": "run %s", "commands": ["%s"]}\\n' "$command" "$command"
"""


@dataclass(frozen=True)
class Case:
    name: str
    head: tuple[float, ...]

    @property
    def dropped(self) -> bool:
        return self.head != RATES

    @property
    def slug(self) -> str:
        return "drop" if self.dropped else "aa"

    def missed(self, kind: str) -> bool:
        """Whether `kind` is the wrong verdict for this case: a drop not called regressed, an
        unchanged PR called a change."""
        return kind != "regressed" if self.dropped else kind in {"regressed", "improved"}

    @property
    def scenario(self) -> Scenario:
        return drop_scenario(RATES, DROPPED, DROP_TO) if self.dropped else Scenario(RATES, RATES)


CASES = (
    Case("drop t3 0.8 -> 0.3", tuple(DROP_TO if i == DROPPED else r for i, r in enumerate(RATES))),
    Case("A/A", RATES),
)
"""The drop first: a run cut short on a busy machine still has the figure the gate is for."""


def _rates(rates: tuple[float, ...], note: str) -> str:
    return f"# Agents\n{note}\nrates: {' '.join(f't{i + 1}={r}' for i, r in enumerate(rates))}\n"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _project(root: Path, case: Case) -> Path:
    """Base and head commits of a repository whose AGENTS.md carries the agent's rates."""
    repo = root / "proj"
    tasks = repo / ".docdelta" / "tasks"
    tasks.mkdir(parents=True)
    agent_dir = root / "agent-bin"
    agent_dir.mkdir()
    (agent_dir / "agent.sh").write_text(textwrap.dedent(AGENT))
    (repo / ".docdelta.yml").write_text(json.dumps({"sandbox": {"paths": [str(agent_dir)]}}) + "\n")
    for i in range(len(RATES)):
        (tasks / f"t{i + 1}.yaml").write_text(TASK.format(id=f"t{i + 1}"))
    (repo / "README.md").write_text("# proj\n")
    (repo / "AGENTS.md").write_text(_rates(RATES, "Be careful."))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "add", "-A")
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
    (repo / "AGENTS.md").write_text(_rates(case.head, "Be careful, and kind."))
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", "head")
    return repo


def _docdelta(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "docdelta", *args], capture_output=True, text=True, check=False
    )


@dataclass(frozen=True)
class Outcome:
    kind: str
    runs: int
    """Graded runs in all arms."""
    lost: int
    """Runs that ended as a fault or an infra error: no score, so the decision had fewer."""
    replay_agrees: bool
    """`replay_agrees` on this PR's workdir."""


def replay_agrees(work: Path, kind: str) -> bool:
    """Whether this PR's recorded runs, fed through `run_rounds` as the simulator feeds its
    draws (each cell's stored score instead of a fresh one), ask for exactly the cells the CLI
    ran and decide `kind`, the verdict `report` printed: then the CLI and the simulator apply
    one rule, and any gap between their rates lies in the runs themselves."""
    store = ResultStore(work)
    manifest = store.read_manifest()
    if manifest is None:
        return False
    recorded = {r.cell.key: r for r in store.results(manifest.repo)}
    fed: dict[str, RunResult] = {}

    def execute(cells: list[Cell]) -> str | None:
        missing = [c.key for c in cells if c.key not in recorded]
        fed.update((c.key, recorded[c.key]) for c in cells if c.key in recorded)
        return f"the CLI never ran {', '.join(missing)}" if missing else None

    def observe() -> Mapping[str, TaskRuns]:
        grid: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
        for r in fed.values():
            grid[r.cell.task][r.cell.condition].append(r)
        return task_runs(grid, TREATMENT, CONTROL)

    conditions = [c.name for c in manifest.conditions]
    out = run_rounds(
        sorted(manifest.tasks), conditions, design_of(manifest), execute, observe,
        alpha=DEFAULT_ALPHA, band=manifest.band, seed=manifest.seed,
    )  # fmt: skip
    decided = out.decision.kind if out.decision is not None else "none"
    return out.stopped is None and fed.keys() == recorded.keys() and decided == kind


def one_pr(
    case: Case,
    seed: int,
    extra: tuple[str, ...] = (),
    power: bytes | None = None,
    keep: Path | None = None,
) -> Outcome:
    """One simulated PR through the CLI. `power`: the workdir's power cache
    (`power.POWER_CACHE`), simulated once for all PRs of this design instead of once per PR;
    it only feeds the power line, never the verdict. `keep`: where a PR the gate got wrong
    (`Case.missed`) keeps its repository and workdir, to see why."""
    root = Path(tempfile.mkdtemp(prefix="docdelta-gate-"))
    missed = False
    try:
        repo = _project(root, case)
        work = root / "work"
        if power is not None:
            work.mkdir()
            (work / POWER_CACHE).write_bytes(power)
        run = _docdelta(
            "run", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD",
            "--tasks", str(repo / ".docdelta" / "tasks"), "--workdir", str(work),
            "--agent", "command", "--agent-cmd", f"sh {root / 'agent-bin' / 'agent.sh'}",
            "--seed", str(seed), *extra,
        )  # fmt: skip
        if run.returncode != 0:
            raise RuntimeError(f"docdelta run exited {run.returncode}: {run.stderr[-2000:]}")
        report = _docdelta("report", "--workdir", str(work), "--format", "json")
        if report.returncode != 0:
            raise RuntimeError(f"docdelta report exited {report.returncode}: {report.stderr[-2000:]}")
        summary = Summary.model_validate_json(report.stdout)
        runs = sum(c.runs for c in summary.overall.values())
        lost = sum(summary.faults.values()) + sum(c.infra_errors for c in summary.overall.values())
        kind = summary.verdict.kind if summary.verdict else "none"
        agrees = replay_agrees(work, kind)
        missed = keep is not None and (case.missed(kind) or not agrees)
        kept = f", kept in {keep / f'{case.slug}-{seed}'}" if missed and keep else ""
        differs = "" if agrees else ", THE REPLAY DIFFERS"
        print(
            f"  {case.name}, seed {seed}: {kind} after {runs} runs, {lost} lost{differs}{kept}",
            file=sys.stderr,
            flush=True,
        )
        return Outcome(kind, runs, lost, agrees)
    finally:
        if missed and keep is not None:
            shutil.move(root, keep / f"{case.slug}-{seed}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _rate(count: int, n: int) -> str:
    low, high = wilson(count, n)
    return f"{count / n:6.1%} [{low:.1%}, {high:.1%}]" if n else "—"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prs", type=int, default=100, help="simulated PRs per case through the CLI")
    p.add_argument(
        "--aa-prs",
        type=int,
        help="PRs of the A/A case through the CLI (default --prs): each runs every task to the cap, "
        "about twice a drop PR's runs",
    )
    p.add_argument("--sim-prs", type=int, default=1000, help="PRs per case of the in-process simulator")
    p.add_argument(
        "--jobs", type=int, default=2 * (os.cpu_count() or 1), help="PRs run at once (default 2 per core)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--smoke",
        action="store_true",
        help="one PR per case through the CLI capped at 2 repeats, 10 simulated",
    )
    p.add_argument(
        "--keep", type=Path, help="directory that keeps the workdir of every PR whose verdict is wrong"
    )
    args = p.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    sim_prs = 10 if args.smoke else args.sim_prs
    per_case = {
        case: 1 if args.smoke else args.aa_prs if args.aa_prs is not None and not case.dropped else args.prs
        for case in CASES
    }
    cap = 2 if args.smoke else DEFAULT_MAX_REPEATS
    extra = ("--max-repeats", str(cap)) if args.smoke else ()
    design = Design.auto(cap)
    began = time.perf_counter()
    differing = 0
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / POWER_CACHE
        cached_drop(cache, len(RATES), design, alpha=DEFAULT_ALPHA, band=DEFAULT_NOISE_BAND)
        power = cache.read_bytes()
    what = "smoke (not the defaults)" if args.smoke else "shipped defaults"
    print(
        f"{what}: repeats auto (cap {cap}, {design.label}), noise band "
        f"±{DEFAULT_NOISE_BAND}, conditions base,head,none; tasks at {RATES}; "
        f"{', '.join(f'{n} PRs of {case.name}' for case, n in per_case.items())} "
        f"through `docdelta run` + `report` (fresh workdir each), {sim_prs} in the simulator"
    )
    print(
        f"{'case':<20} {'path':<10} {'PRs':>5} {'regressed':>22} {'improved':>22} "
        f"{'no change':>22} {'runs/PR':>8}"
    )
    for i, case in enumerate(CASES):
        prs = per_case[case]
        start = time.perf_counter()
        with ThreadPoolExecutor(args.jobs) as pool:
            seeds = [args.seed + 1000 * i + k for k in range(prs)]
            done = list(pool.map(partial(one_pr, case, extra=extra, power=power, keep=args.keep), seeds))
        kinds = Counter(o.kind for o in done)
        runs = sum(o.runs for o in done) / len(done)
        lost = sum(o.lost for o in done)
        differ = sum(not o.replay_agrees for o in done)
        differing += differ
        secs = time.perf_counter() - start
        print(
            f"{case.name:<20} {'CLI':<10} {prs:>5} {_rate(kinds['regressed'], prs):>22} "
            f"{_rate(kinds['improved'], prs):>22} {_rate(kinds['no_change'], prs):>22} {runs:8.1f}"
            f"  ({secs:.0f}s, {secs / prs:.1f}s per PR at {args.jobs} at once, {lost} runs lost, "
            f"{differ} replays differ)"
        )
        sim = simulate(case.scenario, design, prs=sim_prs, band=DEFAULT_NOISE_BAND, seed=args.seed + i)
        # the simulator runs head and base only; the CLI's default none arm runs the same rounds
        arms = 3 / 2
        print(
            f"{'':<20} {'simulator':<10} {sim_prs:>5} {_rate(sim.count('regressed'), sim_prs):>22} "
            f"{_rate(sim.count('improved'), sim_prs):>22} {_rate(sim.count('no_change'), sim_prs):>22} "
            f"{sim.mean_runs * arms:8.1f}"
        )
    print(f"wall time {time.perf_counter() - began:.0f}s on {os.cpu_count()} cores")
    if differing:
        sys.exit(
            f"{differing} PRs' runs replayed through run_rounds asked for other rounds or decided "
            "otherwise than the CLI: the CLI and the simulator apply two rules (see their workdirs "
            "with --keep)"
        )


if __name__ == "__main__":
    main()
