"""Check-run annotations on the changed instruction lines: what the runs did with each one.

The way coverage tools mark uncovered lines, each added line of an instruction file that
names a command or a path (`instruction_usage`) gets a note in the PR's "Files changed"
view: "named or used in 6/8 head runs, 0/8 base runs", or "never used in 8 head runs:
candidate to cut". Only lines in the PR's own diff are annotated (GitHub shows no other,
and the docs diff docdelta ran may differ from it when base moved), read from the patch
GitHub lists for the file, parsed with unidiff. Removed lines have no place on the head
side and are left to the comment.

Certainty uses the scorecard's vocabulary: a line is `significant` when head and base used
it differently under Fisher's test with Holm's correction over every changed reference
(`decision.holm`, as the verdict's tasks are), and only then is it a warning; otherwise a
notice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from docdelta.github.port import Annotation, AnnotationLevel, PrFile
from docdelta.scorecard.decision import holm
from docdelta.scorecard.models import InstructionRef
from docdelta.vocabulary import BASE, HEAD

TITLE = "docdelta: what the runs did with this line"


def added_lines(files: Iterable[PrFile]) -> dict[str, set[int]]:
    """Per path, the head-side line numbers the PR's diff adds (GitHub's `patch` of each file)."""
    return _head_lines(files, context=False)


def diff_hunks(files: Iterable[PrFile]) -> dict[str, list[frozenset[int]]]:
    """Per path, each hunk of the PR's diff as the head-side lines it shows, added or context:
    the lines a review comment (and so a ```suggestion block) can be placed on, a multi-line
    one within one hunk."""
    return {
        path: [frozenset(hunk_lines) for hunk_lines in hunks]
        for path, hunks in _head_hunks(files, context=True).items()
    }


def _head_lines(files: Iterable[PrFile], *, context: bool) -> dict[str, set[int]]:
    return {path: set().union(*hunks) for path, hunks in _head_hunks(files, context=context).items()}


def _head_hunks(files: Iterable[PrFile], *, context: bool) -> dict[str, list[set[int]]]:
    out: dict[str, list[set[int]]] = {}
    for f in files:
        if not f.patch:
            continue
        text = f"--- a/{f.path}\n+++ b/{f.path}\n{f.patch}\n"
        try:
            patch = PatchSet(text)
        except UnidiffParseError:
            continue  # a patch we cannot read annotates nothing rather than the wrong lines
        out[f.path] = [
            {
                line.target_line_no
                for line in hunk
                if (line.is_added or (context and line.is_context)) and line.target_line_no is not None
            }
            for pf in patch
            for hunk in pf
        ]
    return out


def _arm(ref: InstructionRef, condition: str) -> tuple[int, int] | None:
    use = ref.arms.get(condition)
    return None if use is None else (use.used, use.runs)


def _message(refs: Sequence[InstructionRef], significant: bool) -> str:
    parts = []
    for r in refs:
        head, base = _arm(r, HEAD), _arm(r, BASE)
        what = f"`{r.ref}`"
        if head is not None and head[0] == 0 and (base is None or base[0] == 0):
            runs = head[1] + (base[1] if base else 0)
            parts.append(f"{what}: never used in {runs} runs (head and base): candidate to cut")
            continue
        counts = ", ".join(
            f"{got[0]}/{got[1]} {arm} runs" for arm, got in ((HEAD, head), (BASE, base)) if got
        )
        parts.append(f"{what}: named or used in {counts}")
    verdict = "significant" if significant else "not significant"
    return "\n".join(parts) + f"\n(head vs base: {verdict}, Fisher's test with Holm over all changed lines)"


def line_annotations(
    refs: Sequence[InstructionRef], diff_lines: Mapping[str, set[int]], *, alpha: float
) -> list[Annotation]:
    """One annotation per added instruction line in the PR's diff that names something.

    A line is a warning when any reference on it is significant (Holm-adjusted Fisher p <=
    alpha over every reference of the docs diff), else a notice."""
    tested = {i: r.p_value for i, r in enumerate(refs) if r.p_value is not None}
    adjusted = holm({str(i): p for i, p in tested.items()})
    lines: dict[tuple[str, int], list[tuple[InstructionRef, bool]]] = defaultdict(list)
    for i, r in enumerate(refs):
        for at in r.lines:
            if at.change == "added" and at.line in diff_lines.get(at.file, set()):
                lines[(at.file, at.line)].append((r, adjusted.get(str(i), 1.0) <= alpha))
    out = []
    for (path, line), found in sorted(lines.items()):
        significant = any(sig for _, sig in found)
        out.append(
            Annotation(
                path=path,
                start_line=line,
                end_line=line,
                level=AnnotationLevel.warning if significant else AnnotationLevel.notice,
                title=TITLE,
                message=_message([r for r, _ in found], significant),
            )
        )
    return out
