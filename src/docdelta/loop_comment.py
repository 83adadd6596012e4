"""The Action's loop sections (issue 15), each one folded part of the PR comment.

* `suggest: true`: what head missed is drafted into a patch (`docdelta.suggest`), the patch
  is run as `head,patched` (the `prove` callback: the Action's own matrix), and the section
  offers it with its measured effect only where that run raised a task past alpha and the
  noise band. Without the patched run there is no section: nothing is ever claimed unproven.
  With `suggest-model`, the model's draft (`docdelta.suggest_model`, the `ask` callback) is the
  one proven and offered in its place; when it is refused or the call fails, the
  deterministic draft is, and the section says why.
* `audit: true`: `tasks audit` over base's and head's trees and this run's results, as a table of
  findings (leaked answers, unattainable gold, saturated tasks); holdout tasks are counted,
  never named, since the scorecard shows them only in aggregate.

Both are appended after the scorecard's first fold, so the comment's first screen is
unchanged (docdelta.report.render.SCREEN_LINES).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from docdelta.config import ProjectConfig
from docdelta.errors import InfraError
from docdelta.git import Repo
from docdelta.models import HEAD, Manifest, RunResult, Task
from docdelta.suggest import Suggestion, adding, measure, offer, suggest
from docdelta.suggest import write as write_suggestion
from docdelta.suggest_model import ModelDraft, measured_as
from docdelta.suggest_model import write as write_model_draft
from docdelta.task_audit import FileKind, Label, SuiteAudit, audit_suite, read_source
from docdelta.tasks import load_tasks

SUGGESTED_PATCH = "suggested.patch"
"""In `results-path`, which the workflow uploads: the patch the section offers."""


def suggestion_section(
    repo: Repo,
    manifest: Manifest,
    results: Sequence[RunResult],
    tasks_dir: Path,
    out_dir: Path,
    prove: Callable[[Path], tuple[Manifest, list[RunResult]]],
    diff_lines: Mapping[str, set[int]],
    ask: Callable[[Suggestion, Mapping[str, Task]], ModelDraft | str] | None = None,
) -> str | None:
    """The folded section, or None when head missed nothing a patch could add. `ask`: the
    model's draft of the same misses, or why there is none (said in the section)."""
    tasks = {lt.task.id: lt.task for lt in load_tasks(tasks_dir)}
    drafted = suggest(repo, manifest, results, tasks, condition=HEAD)
    if drafted is None:
        return None
    patch = out_dir / SUGGESTED_PATCH
    write_suggestion(drafted, patch)
    got = None if ask is None else ask(drafted, tasks)
    lines = diff_lines.get(drafted.file, set())
    if not isinstance(got, ModelDraft):
        proof_manifest, proof_results = prove(patch)
        note = "" if got is None else f"Not the model's draft: {got}. This is the deterministic draft."
        return offer(drafted, measure(drafted, proof_manifest, proof_results), lines, note=note)
    written = write_model_draft(got, patch)
    proof_manifest, proof_results = prove(written)
    measured_draft = measured_as(drafted, patch, proof_manifest)
    if measured_draft is None:  # the run holds another patch: nothing of it is the model's
        raise InfraError("the patched run did not run the model's draft")
    theirs, added = measured_draft
    return offer(
        theirs, measure(theirs, proof_manifest, proof_results), lines,
        author=f"{got.provider}/{got.model}", what=adding(added), patch_name=written.name,
    )  # fmt: skip


def audit_section(
    repo: Repo,
    commits: Sequence[str],
    config: ProjectConfig,
    tasks_dir: Path,
    tasks_path: str,
    workdirs: Sequence[Path],
) -> str:
    """`tasks audit` of the committed tasks (`tasks_path` in the repository, stripped from
    the source as the runs strip it) against this run's results, in the tree of each of
    `commits` (base and head): a task either side's files make a target is shown as the
    target it is there; else as the first commit labels it."""
    strip = [f"/{tasks_path.strip('/')}/**"]
    loaded = load_tasks(tasks_dir)
    audits = [audit_suite(loaded, read_source(repo, sha, config, strip), sha, workdirs) for sha in commits]
    entries = [
        next((e for e in sides if e.label is Label.target), sides[0])
        for sides in zip(*(a.tasks for a in audits), strict=True)
    ]
    return audit_markdown(audits[0].model_copy(update={"tasks": entries}))


def audit_markdown(audit: SuiteAudit) -> str:
    """A summary line of counts and a table of every shown task with what the audit found."""
    shown = [e for e in audit.tasks if not e.holdout]
    labels = {label: sum(e.label is label for e in audit.tasks) for label in Label}
    leaked = sum(i.leaked for e in audit.tasks for i in e.items)
    unattainable = sum(i.label is Label.unattainable for e in audit.tasks for i in e.items)
    saturated = sum(e.saturated is not None for e in audit.tasks)
    counts = ", ".join(f"{n} {label.value}" for label, n in labels.items() if n)
    head = (
        f"Task audit: {counts} · {leaked} leaked answer{'s' * (leaked != 1)} · "
        f"{unattainable} unattainable item{'s' * (unattainable != 1)} · {saturated} saturated"
    )
    rows = ["| task | measures | findings |", "| --- | --- | --- |"]
    for e in shown:
        found = [f"the prompt states {i.kind} `{i.expected}`" for i in e.items if i.leaked]
        found += [f"{i.kind} `{i.expected}` is in no doc" for i in e.items if i.label is Label.unattainable]
        docs = sorted(
            {p for i in e.items if i.label is Label.control for p in i.found_in.get(FileKind.docs, [])}
        )
        found += [f"gold also in {', '.join(docs)}"] if docs else []
        if e.saturated is not None:
            s = e.saturated
            found.append(f"saturated: every {', '.join(s.arms)} run scored {s.level:g} ({s.runs} runs)")
        rows.append(f"| {e.task} | {e.label.value} | {'; '.join(found) or '—'} |")
    held = len(audit.tasks) - len(shown)
    note = f"\n{held} holdout task{'s' * (held != 1)} counted above, not listed.\n" if held else ""
    return (
        f"<details><summary>{head}</summary>\n\n"
        "Where each task's gold stands in the source tree: only in instruction files (a target), "
        "also in the human docs (a control), or nowhere (unattainable).\n\n"
        + "\n".join(rows)
        + "\n"
        + note
        + "\n</details>\n"
    )
