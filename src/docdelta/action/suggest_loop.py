"""The Action's loop sections, each one folded part of the PR comment.

* `suggest: true`: what head missed is drafted into a patch (`docdelta.improve.suggest`), the patch
  is run as `head,patched` (the `prove` callback: the Action's own run, `job.run_job`), and it is offered
  with its measured effect only where that run raised a task past alpha and the noise band.
  Without the patched run nothing is offered: nothing is ever claimed unproven.
  Where GitHub can apply it, the offer is a pull-request review comment holding a
  ```suggestion block (`publish_suggestion`): GitHub takes review comments only on lines of
  the PR's diff, so the change must replace lines of one hunk (an addition hangs on the line
  before it). That comment is sticky like the scorecard (a hidden marker and the bot's own
  authorship): edited on the same lines, deleted and posted anew when its anchor moved,
  deleted when this run proves no suggestion; the scorecard's section links to it. Where it
  cannot be placed, or GitHub refuses it (a token without `pull-requests: write`), the
  section holds the change itself and says why; a refusal is a warning, never a failure.
  With `suggest-model`, the model's draft (`docdelta.improve.suggest_model`, the `ask` callback) is the
  one proven and offered in its place; when it is refused or the call fails, the
  deterministic draft is, and the offer says why.
* `audit: true`: `tasks audit` over base's and head's trees and this run's results, as a table of
  findings (leaked answers, unattainable gold, saturated tasks); holdout tasks are counted,
  never named, since the scorecard shows them only in aggregate.

Both are appended after the scorecard's first fold, so the comment's first screen is
unchanged (docdelta.report.render.SCREEN_LINES).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from docdelta.config import ProjectConfig
from docdelta.errors import InfraError
from docdelta.git import Repo
from docdelta.github.port import GitHubPort, ReviewAnchor
from docdelta.github.pygithub import ApiError
from docdelta.improve.suggest import Measured, Suggestion, adding, change, measure, measured_line, suggest
from docdelta.improve.suggest import write as write_suggestion
from docdelta.improve.suggest_model import ModelDraft, measured_as
from docdelta.improve.suggest_model import write as write_model_draft
from docdelta.improve.task_audit import FileKind, GoldLabel, SuiteAudit, audit_suite, read_source
from docdelta.results.layout import SUGGESTED_PATCH
from docdelta.results.models import Manifest, RunResult
from docdelta.tasks.load import load_tasks
from docdelta.tasks.models import Task
from docdelta.vocabulary import HEAD, Frozen


@dataclass(frozen=True)
class Proven:
    """A drafted patch and what its `head,patched` run measured: nothing else is offered."""

    suggestion: Suggestion
    measured: list[Measured]
    author: str | None = None
    """The model that wrote the patch; None: drafted from the gold."""
    what: str | None = None
    """The change as the claim names it; None: `suggest.change` of the drafted patch."""
    note: str = ""
    """Said first: why the model's draft is not the one offered."""
    patch_name: str = SUGGESTED_PATCH

    @property
    def claims(self) -> list[str]:
        return [measured_line(m, self.what or change(self.suggestion)) for m in self.measured]

    @property
    def raised(self) -> list[str]:
        """The claims made: tasks the patch raised past alpha and the band."""
        return [c for m, c in zip(self.measured, self.claims, strict=True) if m.raised]


def prove_suggestion(
    repo: Repo,
    manifest: Manifest,
    results: Sequence[RunResult],
    tasks_dir: Path,
    out_dir: Path,
    prove: Callable[[Path], tuple[Manifest, list[RunResult]]],
    ask: Callable[[Suggestion, Mapping[str, Task]], ModelDraft | str] | None = None,
) -> Proven | None:
    """Draft, write `SUGGESTED_PATCH`, run it; None when head missed nothing a patch could add.
    `ask`: the model's draft of the same misses (written beside it and run in its place), or
    why there is none (said in the offer)."""
    tasks = {lt.task.id: lt.task for lt in load_tasks(tasks_dir)}
    drafted = suggest(repo, manifest, results, tasks, condition=HEAD)
    if drafted is None:
        return None
    patch = out_dir / SUGGESTED_PATCH
    write_suggestion(drafted, patch)
    got = None if ask is None else ask(drafted, tasks)
    if not isinstance(got, ModelDraft):
        proof_manifest, proof_results = prove(patch)
        note = "" if got is None else f"Not the model's draft: {got}. This is the deterministic draft."
        return Proven(drafted, measure(drafted, proof_manifest, proof_results), note=note)
    written = write_model_draft(got, patch)
    proof_manifest, proof_results = prove(written)
    measured_draft = measured_as(drafted, patch, proof_manifest)
    if measured_draft is None:  # the run holds another patch: nothing of it is the model's
        raise InfraError("the patched run did not run the model's draft")
    theirs, added = measured_draft
    return Proven(
        theirs, measure(theirs, proof_manifest, proof_results),
        author=f"{got.provider}/{got.model}", what=adding(added), patch_name=written.name,
    )  # fmt: skip


class Placed(Frozen):
    """Where a ```suggestion block applies the patch: the head lines it replaces, and with what."""

    anchor: ReviewAnchor
    replacement: str

    @property
    def where(self) -> str:
        a = self.anchor
        lines = f"lines {a.start_line}-{a.line}" if a.start_line is not None else f"line {a.line}"
        return f"`{a.path}` {lines}"


def place(suggestion: Suggestion, hunks: Sequence[frozenset[int]]) -> Placed | None:
    """The head lines the patch's one hunk replaces (removed lines, or the line an addition
    follows: before it, else after it at the top of a file) when they all sit in one hunk of
    the PR's diff (`hunks`, head-side lines each), as GitHub requires of a review comment; the
    replacement is what the patch puts there. None for any other patch."""
    try:
        [patched] = PatchSet(suggestion.patch)
        [hunk] = patched
    except (UnidiffParseError, ValueError):
        return None
    if patched.path != suggestion.file:
        return None
    # The lines of either side: no "\ No newline at end of file" marker.
    lines = [line for line in hunk if line.is_added or line.is_removed or line.is_context]
    changed = [i for i, line in enumerate(lines) if line.is_added or line.is_removed]
    if not changed:
        return None
    first, last = changed[0], changed[-1]
    if not any(line.is_removed for line in lines[first : last + 1]):
        if first > 0:  # only additions: replace the line before with itself and them
            first -= 1
        elif last + 1 < len(lines):
            last += 1
        else:
            return None  # a new file: no line of head to hang it on
    region = lines[first : last + 1]
    replaced = [line.source_line_no for line in region if not line.is_added and line.source_line_no]
    start, end = min(replaced), max(replaced)
    if not any(start in h and end in h for h in hunks):
        return None
    replacement = "".join(line.value for line in region if not line.is_removed)
    if replacement and not replacement.endswith("\n"):
        replacement += "\n"  # the closing fence needs a line of its own
    anchor = ReviewAnchor(path=suggestion.file, line=end, start_line=start if start < end else None)
    return Placed(anchor=anchor, replacement=replacement)


def _fence(placed: Placed) -> str:
    """The ```suggestion block, its fence longer than any backtick run in the lines it holds."""
    longest = max((len(run) for run in re.findall(r"`+", placed.replacement)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}suggestion\n{placed.replacement}{ticks}"


def _drafted(proven: Proven) -> str:
    condition = proven.suggestion.condition
    note = f"{proven.note} " if proven.note else ""
    by = f"Written by {proven.author} from" if proven.author else "Drafted from"
    return f"{note}{by} the gold items {condition} missed, then run as `{condition},patched`."


def _claims(proven: Proven) -> str:
    """Every measurement, then the execution evidence for each stale command it replaces."""
    why = [f"- why: {r.evidence}\n" for r in proven.suggestion.replaced]
    return "".join(f"- {c}\n" for c in proven.claims) + "".join(why)


def offer(proven: Proven, placed: Placed | None, why: str = "") -> str:
    """The comment's folded section holding the change itself: the drafted change with its
    measured effect, or, when the patched run raised no task, only that it was tried. `why`
    says why it is here and not in a review comment on the PR's lines."""
    suggestion = proven.suggestion
    if not proven.raised:
        head = "Suggested fix: not offered, the patched run raised no task"
        said = f"{proven.note}\n\n" if proven.note else ""
        return f"<details><summary>{head}</summary>\n\n{said}{_claims(proven)}\n</details>\n"
    if placed is not None:
        where = f"{placed.where} (a review comment there with this block applies it)"
        block = _fence(placed)
    else:
        where = f"`{suggestion.file}` (`git apply` it: `{proven.patch_name}` in the run's artifacts)"
        block = f"```diff\n{suggestion.patch}```"
    note = f" {why}" if why else ""
    return (
        f"<details><summary>Suggested fix, measured: {proven.raised[0]}</summary>\n\n"
        f"{_drafted(proven)}{note} Suggested change to {where}:\n\n{block}\n\n"
        + _claims(proven)
        + "\n</details>\n"
    )


def head_mark(head_sha: str) -> str:
    """The hidden line naming the head a review comment's suggestion was proven on: a run that
    proves nothing about the suggestion (broken, stopped, an aggregate job) keeps that head's."""
    return f"<!-- docdelta-proven-on: {head_sha} -->"


def review_body(
    marker: str, proven: Proven, placed: Placed, head_sha: str, scorecard_url: str | None = None
) -> str:
    """The review comment: the marker, the claim, the ```suggestion block, every measurement,
    a link back to the scorecard comment, and the head it was proven on."""
    back = f" The [scorecard comment]({scorecard_url}) has the whole evaluation." if scorecard_url else ""
    return (
        f"{marker}\n**docdelta measured this change on `{head_sha[:12]}`:** {proven.raised[0]}\n\n"
        f"{_fence(placed)}\n\n{_drafted(proven)} *Commit suggestion* applies it.{back}\n\n"
        + _claims(proven)
        + f"\n{head_mark(head_sha)}\n"
    )


def posted_section(proven: Proven, placed: Placed, url: str) -> str:
    """The comment's folded section once the change is a review comment: a link to it."""
    return (
        f"<details><summary>Suggested fix, measured: {proven.raised[0]}</summary>\n\n"
        f"{_drafted(proven)} Posted as a [review comment on {placed.where}]({url}), where "
        "*Commit suggestion* applies it.\n\n" + _claims(proven) + "\n</details>\n"
    )


@dataclass(frozen=True)
class ReviewTarget:
    """Where the review comment goes: the PR, its real head commit, the config's marker.
    `post` False (`comment: false`): nothing is posted, only an older head's comment deleted."""

    port: GitHubPort
    number: int
    head_sha: str
    marker: str
    post: bool = True


@dataclass(frozen=True)
class Published:
    """The scorecard's suggestion section as first posted (None: no section), and `review`:
    given the posted scorecard's url, posts the review comment linking back to it and returns
    the section that replaces `section` (linking to the review comment, or saying why not).
    Scorecard first, then the review comment, then one edit of the scorecard: the fewest
    requests by which each links to the other."""

    section: str | None
    review: Callable[[str], str] | None = None


NO_PERMISSION = (
    "the token may not write pull-request review comments: add `pull-requests: write` to the "
    "workflow's `permissions:`"
)


NOT_IN_DIFF = "Its lines are not in the PR's diff, where GitHub takes review comments."
QUOTES_A_KEY = "It quotes a secret value, so it is not posted as a review comment."


def publish_suggestion(
    proven: Proven | None,
    hunks: Mapping[str, Sequence[frozenset[int]]],
    target: ReviewTarget | None,
    redact: Callable[[str], str],
    say: Callable[[str], None],
    warn: Callable[[str], None],
    settled: bool = True,
) -> Published:
    """The scorecard's suggestion section and the sticky review comment on `target` (None: no
    PR). A run that settled the question on this head (`settled`, `target.post`) deletes the
    earlier comment when it proves no placeable suggestion. One that did not (its evaluation or
    patched run broke or stopped, a job matrix's aggregate job, `comment: false`) deletes only a
    comment proven on another head, which would look current; one proven on this head stands.
    Whatever stops the review comment (its lines are not in the diff, it quotes a secret,
    GitHub refuses it) leaves the change in the section, which says why."""
    if target is not None and not (settled and target.post):
        _delete_stale(target, say, warn, keep=head_mark(target.head_sha))
        target = None
    placed = None
    if proven is not None and proven.raised:
        placed = place(proven.suggestion, hunks.get(proven.suggestion.file, []))
    if proven is None or placed is None or target is None:
        if target is not None:
            _delete_stale(target, say, warn)
        why = NOT_IN_DIFF if proven is not None and proven.raised and placed is None else ""
        return Published(None if proven is None else offer(proven, placed, why))
    if redact(body := review_body(target.marker, proven, placed, target.head_sha)) != body:
        # a changed block would no longer be the patch that was run
        warn(f"suggest: {QUOTES_A_KEY}")
        _delete_stale(target, say, warn)
        return Published(offer(proven, None, QUOTES_A_KEY))
    on = target

    def review(scorecard_url: str) -> str:
        body = review_body(on.marker, proven, placed, on.head_sha, scorecard_url)
        try:
            ref = on.port.upsert_review_comment(on.number, on.marker, on.head_sha, placed.anchor, body)
        except ApiError as exc:
            reason = NO_PERMISSION if exc.status == 403 else exc.message
            warn(f"suggest: no review comment ({reason}); the change is in the scorecard comment instead")
            return offer(proven, placed, f"docdelta could not post it as a review comment ({reason}).")
        moved = f" ({ref.removed} older one deleted: its anchor moved)" if ref.removed else ""
        done = "posted" if ref.created else "kept"
        say(f"suggest: review comment {done} on {placed.where}{moved}: {ref.url}")
        return posted_section(proven, placed, ref.url)

    return Published(offer(proven, placed), review)


def _delete_stale(
    target: ReviewTarget, say: Callable[[str], None], warn: Callable[[str], None], keep: str | None = None
) -> None:
    """No review comment this run: an earlier run's would claim what this head did not prove.
    `keep`: a comment holding it stands (proven on this head, by a run that did settle it)."""
    try:
        deleted = target.port.delete_review_comments(target.number, target.marker, keep=keep)
    except ApiError as exc:
        reason = NO_PERMISSION if exc.status == 403 else exc.message
        warn(f"suggest: could not delete the earlier suggestion's review comment: {reason}")
        return
    if deleted:
        old = " (proven on an older head)" if keep else ""
        say(f"suggest: the earlier suggestion's review comment was deleted{old} ({deleted})")


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
        next((e for e in sides if e.label is GoldLabel.target), sides[0])
        for sides in zip(*(a.tasks for a in audits), strict=True)
    ]
    return audit_markdown(audits[0].model_copy(update={"tasks": entries}))


def audit_markdown(audit: SuiteAudit) -> str:
    """A summary line of counts and a table of every shown task with what the audit found."""
    shown = [e for e in audit.tasks if not e.holdout]
    labels = {label: sum(e.label is label for e in audit.tasks) for label in GoldLabel}
    leaked = sum(i.leaked for e in audit.tasks for i in e.items)
    unattainable = sum(i.label is GoldLabel.unattainable for e in audit.tasks for i in e.items)
    saturated = sum(e.saturated is not None for e in audit.tasks)
    counts = ", ".join(f"{n} {label.value}" for label, n in labels.items() if n)
    head = (
        f"Task audit: {counts} · {leaked} leaked answer{'s' * (leaked != 1)} · "
        f"{unattainable} unattainable item{'s' * (unattainable != 1)} · {saturated} saturated"
    )
    rows = ["| task | measures | findings |", "| --- | --- | --- |"]
    for e in shown:
        found = [f"the prompt states {i.kind} `{i.expected}`" for i in e.items if i.leaked]
        found += [
            f"{i.kind} `{i.expected}` is in no doc" for i in e.items if i.label is GoldLabel.unattainable
        ]
        docs = sorted(
            {p for i in e.items if i.label is GoldLabel.control for p in i.found_in.get(FileKind.docs, [])}
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
