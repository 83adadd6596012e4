"""The ablate example workflow, read statically: a manual (`workflow_dispatch`) job whose
`docdelta ablate` line parses with the CLI's own parser once the inputs' defaults are
substituted, sends only the ablation's markdown (stdout) to the job summary, takes the
inputs through `env:` (never `${{ }}` inside the script) and uploads its workdir."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from docdelta.cli import _parser
from docdelta.validate import AblationUnit

ROOT = Path(__file__).resolve().parents[2]


def test_the_ablate_workflow_runs_a_valid_ablate_command_into_the_job_summary() -> None:
    workflow = yaml.safe_load((ROOT / "examples/workflows/docdelta-ablate.yml").read_text())
    inputs = workflow[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads the key `on` as True
    assert inputs["unit"]["default"] in {u.value for u in AblationUnit}
    steps = workflow["jobs"]["ablate"]["steps"]
    step = next(s for s in steps if "docdelta ablate" in s.get("run", ""))
    script: str = step["run"]
    assert "${{" not in script  # inputs reach the shell as variables, not as pasted text
    env = {k: v for k, v in step["env"].items() if not v.startswith("${{ secrets.")}
    assert set(env) == {"FILE", "UNIT", "REPEATS"}
    defaults = {
        var: inputs[m.group(1)]["default"] for var, v in env.items() if (m := re.search(r"inputs\.(\w+)", v))
    }
    command, _, redirect = script.partition(">>")
    assert redirect.strip() == '"$GITHUB_STEP_SUMMARY"'
    words = [w for w in shlex.split(command) if not w.startswith("OPENAI_API_KEY=")]
    words = [defaults.get(w.removeprefix("$"), w) for w in words]
    assert words[0] == "docdelta"
    args = _parser().parse_args(words[1:])
    assert (args.command, args.file, args.unit, args.repeats) == ("ablate", "AGENTS.md", "heading", 4)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert Path(upload["with"]["path"]) == args.workdir
