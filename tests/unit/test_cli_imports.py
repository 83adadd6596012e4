"""`docdelta detect` imports nothing heavy (it paid seconds importing scipy).

Checked on `sys.modules` of a real `docdelta detect` in a fresh interpreter, not on a clock:
the figure itself is bench/bench_detect.py's. A heavy import that creeps back into the
CLI's module level (or into detect's own modules) fails here by name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo

from docdelta.cli.main import main
from docdelta.errors import ExitCode
from docdelta.scorecard.models import Summary

HEAVY = ("scipy", "numpy", "docker", "github", "httpx")
"""Top-level packages only other commands need: statistics, the Docker SDK, PyGithub, HTTP."""
UNUSED_BY_DETECT = ("yaml", "jinja2")
"""Lighter, but `detect` on a repository without a .docdelta.yml parses no YAML and renders
no template."""
DOCDELTA_UNUSED_BY_DETECT = (
    "docdelta.tasks.models",
    "docdelta.results.models",
    "docdelta.scorecard.models",
    "docdelta.config",
    "docdelta.gateway.config",
)
"""What detect without a .docdelta.yml never uses, and paid for at start-up: the other ~60
pydantic models of the vocabulary (it serializes only `docdelta.instructions.models`) and the project
config's models (the gateway's, the sandbox's, the arms')."""
SCORECARD_HEAVY = ("scipy", "httpx", "docker", "github")
"""What a scorecard (every `run`, every `report`) never needs: scipy (the usage rank test,
Fisher's test and the normal tail are docdelta.scorecard.stats' own), httpx (only a judge's client),
the Docker SDK and PyGithub (only their sandbox and the Action's comment)."""

PROBE = """
import json, sys
from docdelta.cli.main import main
from docdelta.errors import ExitCode
code = main(sys.argv[1:])
own = {m for m in sys.modules if m.startswith("docdelta")}
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules} | own)}))
"""


def _imported(*argv: str) -> set[str]:
    return _probe(*argv)[0]


def _probe(*argv: str) -> tuple[set[str], str, str]:
    """(top-level modules and docdelta's own modules imported, the command's stdout, stderr)
    of one `docdelta` command in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True, timeout=120
    )
    *printed, last = done.stdout.strip().splitlines()
    out = json.loads(last)
    assert out["code"] == 0, done.stderr
    return set(out["modules"]), "\n".join(printed), done.stderr


def test_detect_on_a_diff_imports_no_heavy_package(tmp_path: Path) -> None:
    diff = tmp_path / "pr.diff"
    diff.write_text(
        "diff --git a/AGENTS.md b/AGENTS.md\n--- a/AGENTS.md\n+++ b/AGENTS.md\n@@ -1 +1 @@\n-a\n+b\n"
    )
    modules = _imported("detect", "--diff", str(diff))
    assert {"docdelta.cli.main", "docdelta.instructions.detect"} <= modules  # the probe really ran the CLI
    unused = {*HEAVY, *UNUSED_BY_DETECT, *DOCDELTA_UNUSED_BY_DETECT}
    assert modules.isdisjoint(unused), sorted(modules & unused)


def test_detect_between_refs_imports_no_heavy_package(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    base = repo.commit({"README.md": "hi", "AGENTS.md": "Run `make test`.\n"})
    head = repo.commit({"AGENTS.md": "Run `tox`. See @docs/style.md\n", "docs/style.md": "tabs\n"})
    modules = _imported("detect", "--repo", str(repo.path), "--base", base, "--head", head, "--json")
    unused = {*HEAVY, *UNUSED_BY_DETECT, *DOCDELTA_UNUSED_BY_DETECT}
    assert modules.isdisjoint(unused), sorted(modules & unused)


def test_detect_with_a_project_config_still_reads_it_and_refuses_a_bad_one(tmp_path: Path) -> None:
    """The control for the test above: with a .docdelta.yml at the base, detect imports the
    config's models and applies them (an `include` glob adds a file; a misspelt field is exit 2
    naming the field), so leaving them out without a config is a shortcut, not a lost check."""
    repo = GitRepo.init(tmp_path / "proj")
    config = "instructions:\n  include: [docs/agent-notes.md]\n"
    base = repo.commit({".docdelta.yml": config, "docs/agent-notes.md": "a\n"})
    head = repo.commit({"docs/agent-notes.md": "b\n"})
    modules, printed, _ = _probe("detect", "--repo", str(repo.path), "--base", base, "--head", head)
    assert {"docdelta.config", "yaml"} <= modules
    assert "docs/agent-notes.md  read by: custom" in printed
    bad = repo.commit({".docdelta.yml": "instructions:\n  includ: [x]\n"})
    assert main(["detect", "--repo", str(repo.path), "--base", bad, "--head", head]) == ExitCode.BAD_INPUT


def test_the_run_and_report_modules_import_no_scipy_httpx_docker_or_pygithub() -> None:
    """The composition root and the scorecard at module level: a fully reused rerun paid
    seconds for scipy (the normal quantile, Fisher's test) and httpx (the judge's client)."""
    probe = "import json, sys\n"
    probe += "import docdelta.cli.main, docdelta.evaluation\n"
    probe += "import docdelta.scorecard.workdir, docdelta.improve.ablation\n"
    probe += "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "pydantic" in modules  # the probe sees third-party imports (every model is pydantic)
    assert "numpy" not in modules  # imported on first use: a run pays for it after its first cells
    assert modules.isdisjoint(SCORECARD_HEAVY), sorted(modules & set(SCORECARD_HEAVY))


def test_a_fully_reused_rerun_and_its_report_import_no_scipy(tmp_path: Path) -> None:
    """The reused rerun's whole cost is start-up and the scorecard, and its scorecard has
    usage figures (the fake agent reports tokens), so the rank test really runs: scipy's
    import alone was 1.4 s of CPU there."""
    assert main(["demo", "--workdir", str(tmp_path), "--repeats", "2"]) == 0
    modules, _, err = _probe("demo", "--workdir", str(tmp_path), "--repeats", "2")
    assert "(0 ran, 24 reused)" in err
    assert modules.isdisjoint(SCORECARD_HEAVY), sorted(modules & set(SCORECARD_HEAVY))
    modules, printed, _ = _probe("report", "--workdir", str(tmp_path / "results"), "--format", "json")
    summary = Summary.model_validate_json(printed)
    assert {u.metric for u in summary.usage} == {"tokens"}, summary.usage  # the rank test ran
    assert modules.isdisjoint(SCORECARD_HEAVY), sorted(modules & set(SCORECARD_HEAVY))


@pytest.mark.parametrize("package", ["scipy", "docker"])
def test_the_probe_sees_a_heavy_import_when_a_command_needs_one(package: str) -> None:
    """The control: the same probe does see scipy and the Docker SDK when they are imported,
    so an empty intersection above is evidence, not a blind probe."""
    done = subprocess.run(
        [sys.executable, "-c", f"import {package}\n" + PROBE, "schema", "task"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert package in json.loads(done.stdout.strip().splitlines()[-1])["modules"]
