"""`docdelta init`: adopt docdelta in a repository in one command.

A new user's first hour went to finding which files docdelta needs and where (the config,
the workflow, reviewed tasks). `init` writes each where it belongs, from what the repository
already holds: `.docdelta.yml`, the pull-request workflow (the shipped example, unchanged),
answer tasks drafted from the always-loaded instruction files for review, and the results
workdir's line in `.gitignore`. It never overwrites a file. It drafts only into a tasks folder
it creates, so running it again never brings back a draft the user deleted (`docdelta tasks
draft` adds more on purpose); it ends by printing the next three commands: review, check the
agent, run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from docdelta.agents import agent_names, agent_upstream
from docdelta.config import ProjectConfig
from docdelta.demo import examples_dir
from docdelta.errors import ConfigError
from docdelta.git import Repo
from docdelta.improve.task_draft import DraftSet, draft_tasks, existing_tasks, write_drafts
from docdelta.instructions.detect import KNOWN_FAMILIES, InstructionMatcher, instruction_files
from docdelta.instructions.loading import rules_for
from docdelta.instructions.models import LoadMode
from docdelta.vocabulary import CONFIG_PATH

TASKS_DIR = ".docdelta/tasks"
WORKDIR = ".docdelta-results"
"""The results workdir the printed `run` writes: generated, so `.gitignore` gets its line."""
GITIGNORE_LINE = f"/{WORKDIR}/"
WORKFLOW = ".github/workflows/docdelta.yml"
EXAMPLE_WORKFLOW = "docdelta-pr.yml"
"""The shipped example the workflow is copied from (examples/workflows/)."""
EXAMPLE_AGENT = "grep_agent.py"
"""The bundled command agent (examples/agents/) the printed commands run: no key, no model."""
CONFIG_TEXT = f"""\
# docdelta's project config (docs/configuration.md). A pull request is evaluated with the
# config of its base commit, so commit this file before the PRs it should apply to.
tasks: {TASKS_DIR}
# Toolchains the agent and the hidden tests may use (docs/sandboxes.md): the sandbox shows
# only its system root and what is named here, read-only.
# sandbox:
#   paths: [/opt/venv]
#   env: {{PATH: "/opt/venv/bin:/usr/bin:/bin"}}
"""


@dataclass
class InitResult:
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    drafts: DraftSet | None = None
    """None when the tasks folder existed: nothing was drafted into it."""
    gitignored: bool = False
    """`.gitignore` gained the workdir's line this time."""
    blind: BlindAgent | None = None
    """The workflow's agent reads none of the drafted-from files: its evaluations would tie."""


@dataclass(frozen=True)
class BlindAgent:
    """The workflow's agent and the instruction files it never loads, with the agents that
    load them (each with the variable its API key comes from, the secret to switch to)."""

    agent: str
    unread: list[str]
    readers: dict[str, str]

    def warning(self) -> str:
        files = ", ".join(self.unread)
        others = ", ".join(f"{name} (secret {key})" for name, key in self.readers.items())
        switch = f"set `agent:` to one that reads it, {others}, and the secret with it, or " if others else ""
        return (
            f"the workflow's agent {self.agent} does not read {files}, so every evaluation of an edit "
            f"to it would tie: in {WORKFLOW} {switch}add an instruction file {self.agent} loads that "
            "imports it (docs/instructions.md)"
        )


def always_loaded(repo: Repo, ref: str) -> list[str]:
    """The instruction files at `ref` that some agent loads into every prompt: the rules a
    task suite should measure first (nested and on-demand files come later, by hand)."""
    overlay = instruction_files(repo, repo.resolve(ref), InstructionMatcher())
    return sorted(p for p in overlay.files if any(r.mode is LoadMode.always for r in rules_for(p)))


def init_project(repo: Repo, ref: str = "HEAD") -> InitResult:
    """Write the config, the workflow and the drafted tasks into `repo`'s work tree; keep
    every file that exists. Raises ConfigError when no instruction file is there to test."""
    sources = always_loaded(repo, ref)
    if not sources:
        raise ConfigError(
            f"no instruction file at {ref} in {repo.root}: nothing for docdelta to test",
            hint="commit an AGENTS.md (or CLAUDE.md, GEMINI.md, .github/copilot-instructions.md) "
            "with the rules agents should follow, then run `docdelta init` again",
        )
    result = InitResult(sources=sources)
    example = (examples_dir("workflows") / EXAMPLE_WORKFLOW).read_text(encoding="utf-8")
    for rel, text in ((CONFIG_PATH, CONFIG_TEXT), (WORKFLOW, example)):
        target = repo.root / rel
        if target.exists():
            result.kept.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        result.written.append(target)
    tasks = repo.root / TASKS_DIR
    if tasks.exists():  # the user's since: a deleted draft stays deleted
        result.kept.append(tasks)
    else:
        result.drafts = draft_tasks(repo, ref, sources, existing_tasks(tasks))
        result.written += write_drafts(result.drafts, tasks)[0]
    result.gitignored = _ignore_workdir(repo.root / ".gitignore")
    result.blind = blind_agent(repo.root / WORKFLOW, sources)
    return result


def docdelta_inputs(workflow: Path) -> list[dict[str, object]]:
    """The `with:` inputs of each docdelta step of `workflow`; none when init cannot read it
    (a workflow that is not YAML is the user's to check)."""
    try:
        doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    steps = [st for job in (jobs or {}).values() if isinstance(job, dict) for st in job.get("steps") or []]
    return [
        st["with"]
        for st in steps
        if isinstance(st, dict)
        and str(st.get("uses", "")).startswith("docdelta/docdelta")
        and isinstance(st.get("with"), dict)
    ]


def data_branch(workflow: Path) -> str | None:
    """The data branch a docdelta step of `workflow` keeps results on (`results-store:
    branch:NAME`), or None. Only docdelta-push.yml writes base arms there, and init does not
    copy it (it runs agents on every push): the user is told, or PRs never reuse a base arm."""
    stores = (str(inputs.get("results-store", "")) for inputs in docdelta_inputs(workflow))
    return next((s.removeprefix("branch:") for s in stores if s.startswith("branch:")), None)


def _loads(agent: str, path: str) -> bool:
    return any(agent in r.families and r.mode is LoadMode.always for r in rules_for(path))


def blind_agent(workflow: Path, sources: list[str]) -> BlindAgent | None:
    """Whether the docdelta step of `workflow` (written now or the user's) runs an agent that
    loads none of `sources`. The shipped example runs Claude Code, which reads CLAUDE.md but
    not AGENTS.md: on an AGENTS.md-only repository every PR would pay for a matrix whose
    conditions the agent cannot tell apart, and only the scorecard would say so, afterwards."""
    agents = {str(inputs["agent"]) for inputs in docdelta_inputs(workflow) if "agent" in inputs}
    upstreams = {u.name: u.key_from for u in ProjectConfig().gateway.upstreams}
    for agent in sorted(agents & KNOWN_FAMILIES):
        if any(_loads(agent, p) for p in sources):
            continue
        readers = {
            name: upstreams[up]
            for name in agent_names()
            if (up := agent_upstream(name)) in upstreams and all(_loads(name, p) for p in sources)
        }
        return BlindAgent(agent, sources, readers)
    return None


def _ignore_workdir(gitignore: Path) -> bool:
    """Add the workdir's line to `gitignore` unless a line already names it; True if added."""
    text = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    if any(line.strip().strip("/") == WORKDIR for line in text.splitlines()):
        return False
    separator = "" if not text or text.endswith("\n") else "\n"
    gitignore.write_text(f"{text}{separator}{GITIGNORE_LINE}\n", encoding="utf-8")
    return True


def next_commands(repo: Repo, result: InitResult) -> list[str]:
    """What to type next, in order, each runnable as printed: review the drafts, see an agent
    (the bundled example) run once, and evaluate the last commit that changed the files, with
    the work tree's config (a past commit's base has none, and `run` reads the base's)."""
    where = "" if repo.root.resolve() == Path.cwd().resolve() else f" --repo {repo.root}"
    tasks, config, workdir = (
        rel if not where else repo.root / rel for rel in (TASKS_DIR, CONFIG_PATH, WORKDIR)
    )
    agent = f'--agent command --agent-cmd "python3 {examples_dir("agents") / EXAMPLE_AGENT}"'
    changed = repo.last_change("HEAD", result.sources)
    refs = f"--base {changed[:12]}~1 --head {changed[:12]}" if changed else "--base HEAD~1 --head HEAD"
    return [
        f"docdelta tasks audit{where} --tasks {tasks}   # review each draft, then set `reviewed: true`",
        f"docdelta agent-check{where} --tasks {tasks} {agent}",
        f"docdelta run{where} {refs} --tasks {tasks} --config {config} --workdir {workdir} {agent}",
    ]
