"""The scorecard comment and the annotated check as GitHub receives them: rendered from real
result models, posted through PyGithub to the fake GitHub server, read back from its record."""

from __future__ import annotations

from pathlib import Path

from factories import arm, detection, manifest
from fakegithub import FakeGitHub

from docdelta.agents.models import CommandRun
from docdelta.github.annotations import added_lines, line_annotations
from docdelta.github.comment import marker, render_comment
from docdelta.github.port import CheckReport, Conclusion
from docdelta.github.pygithub import PyGithubPort
from docdelta.report import render_comment_markdown
from docdelta.report.plain import SCORECARD_DOCS
from docdelta.report.render import SCREEN_LINES, TOP_TASKS
from docdelta.results.models import RunResult
from docdelta.scorecard.instruction_usage import docs_diff
from docdelta.scorecard.models import Summary
from docdelta.scorecard.summarize import summarize

BASE_SHA, HEAD_SHA = "b" * 40, "h" * 40
OLD_DOCS = "# Agents\n\nRun `python setup.py test`.\n"
NEW_DOCS = (
    "# Agents\n\nRun `make check` before you commit.\nNever run `git push --force`.\nSee `docs/style.md`.\n"
)
RUN_URL = "https://github.com/Codertocat/Hello-World/actions/runs/77"


def _ran(runs: list[RunResult], command: str) -> list[RunResult]:
    return [
        r.model_copy(
            update={
                "outcome": r.outcome.model_copy(
                    update={
                        "metrics": r.outcome.metrics.model_copy(
                            update={"commands": [CommandRun(command=command)]}
                        )
                    }
                )
            }
        )
        for r in runs
    ]


def _suite(tasks: int) -> Summary:
    """`tasks` tasks x base/head/none x 2 repeats: head helps the first third, the rest tie;
    head runs run `make check`, base runs the old `python setup.py test`."""
    ids = [f"task-{i:02d}" for i in range(tasks)]
    runs: list[RunResult] = []
    for i, t in enumerate(ids):
        better = i < tasks // 3
        runs += _ran(arm(t, "base", [0.0, 0.0] if better else [1.0, 0.0], cost=0.010), "python setup.py test")
        runs += _ran(arm(t, "head", [1.0, 1.0] if better else [1.0, 0.0], cost=0.013), "make check")
        runs += arm(t, "none", [0.0, 0.0])
    refs = docs_diff([("AGENTS.md", OLD_DOCS, NEW_DOCS)])
    return summarize(manifest(ids, repeats=2), detection(), runs, docs=refs)


def _post(fake: FakeGitHub, summary: Summary) -> tuple[str, int]:
    """Post the comment and the annotated check the way the Action does; (body, check run id)."""
    fake.add_commit(BASE_SHA, {"AGENTS.md": OLD_DOCS.encode()})
    fake.add_commit(HEAD_SHA, {"AGENTS.md": NEW_DOCS.encode()})
    fake.add_pull(2, BASE_SHA, HEAD_SHA, [("AGENTS.md", "modified")])
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)
    files_url = f"https://github.com/{fake.repo}/pull/2/files"
    body = render_comment_markdown(
        summary,
        diff_links={"AGENTS.md": f"{files_url}#diff-x"},
        artifacts_url=f"{RUN_URL}#artifacts",
        files_url=files_url,
    )
    port.upsert_comment(2, marker("docdelta"), render_comment("docdelta", body, full_report_url=RUN_URL))
    notes = line_annotations(
        summary.instruction_usage, added_lines(port.pr_files(2, BASE_SHA, HEAD_SHA)), alpha=0.05
    )
    ref = port.publish_check(
        CheckReport(
            name="docdelta", head_sha=HEAD_SHA, conclusion=Conclusion.success, title="t", summary=body,
            annotations=tuple(notes),
        )
    )  # fmt: skip
    return fake.comments[0]["body"], ref.id or 0


def _before_fold(body: str) -> list[str]:
    return body.split("<details>", 1)[0].strip().splitlines()[1:]


def test_a_30_task_suite_comment_stays_under_one_screen_and_names_what_changed(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    body, run_id = _post(fake, _suite(30))
    (tmp_path / "comment-30.md").write_text(body)  # kept for review with the test's output

    top = _before_fold(body)
    assert len(top) <= SCREEN_LINES and "```" not in "\n".join(top)
    rows = [line for line in top if line.startswith("| task-")]
    assert len(rows) == TOP_TASKS  # the rest are folded
    assert "25 more tasks in *Every task and arm* below." in top
    lead = [line for line in top if line.startswith("- ")]
    assert 2 <= len(lead) <= 4
    assert (
        "**10 of 30 tasks got better** with [`AGENTS.md`](https://github.com/Codertocat/Hello-World/pull/2/"
        "files#diff-x) (runs passed, base → head): *task-00* 0/2 → 2/2, *task-01* 0/2 → 2/2, "
        "*task-02* 0/2 → 2/2 and 7 more; 20 unchanged." in lead[0]
    )
    assert "cost $0.010 → $0.013 per run (+30%, +$0.0030)" in lead[2]
    # every task is in the folded table
    assert all(f"| task-{i:02d} |" in body for i in range(30))
    # the check's annotations: one per added line that names something, on the PR's added lines
    notes = fake.annotations(run_id)
    assert sorted(a["start_line"] for a in notes) == [3, 4, 5]
    by_line = {a["start_line"]: a for a in notes}
    assert "`make check`: named or used in 60/60 head runs, 0/60 base runs" in by_line[3]["message"]
    assert by_line[3]["annotation_level"] == "warning"  # significant: 60/60 against 0/60
    assert "candidate to cut" in by_line[4]["message"] and by_line[4]["annotation_level"] == "notice"


def test_the_demo_sized_comment_puts_every_task_above_the_fold(fake: FakeGitHub) -> None:
    body, _ = _post(fake, _suite(4))
    top = _before_fold(body)
    assert len(top) <= SCREEN_LINES
    assert sum(line.startswith("| task-") for line in top) == 4
    assert "in *Every task and arm* below" not in "\n".join(top)


STATISTICS_WORDS = ("Holm", "hypothes", "look", "noise band", "significant", "interval", "alpha", "p =")
"""Statistics vocabulary: in the comment's folds, never in what a reader sees unfolded."""


def test_the_visible_comment_is_verdict_counts_sureness_cost_and_no_statistics_vocabulary(
    fake: FakeGitHub,
) -> None:
    body, _ = _post(fake, _suite(30))

    top = "\n".join(_before_fold(body))
    heading = body.splitlines()[1]
    assert heading == "## docdelta scorecard: improved"
    assert "**10 of 30 tasks got better**" in top and "20 unchanged" in top
    assert "**How sure:** confident" in top and "5% of PRs" in top
    assert "cost $0.010 → $0.013 per run" in top
    assert not [w for w in STATISTICS_WORDS if w in top]
    # the statistics are one click away, with the page that defines their terms
    assert f'<a href="{SCORECARD_DOCS}">what the terms mean</a>' in body
    assert SCORECARD_DOCS.startswith("https://github.com/") and "Holm" in body
    assert "bench/" not in body and "README.md#" not in body
