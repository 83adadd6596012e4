"""The history in a results store: members merged on read, race-safe on the real data branch.

Two `BranchStore`s on two clones of one bare repository (GitHub's stand-in) push to
`docdelta-results` at once: held at a barrier after each fetched the same tip, so one push
is rejected and must be laid on the other's commit. Neither record may be lost.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from docdelta.git import run_git
from docdelta.results.backends import BranchStore, DirectoryStore
from docdelta.scorecard.history import (
    HISTORY_DIR,
    History,
    HistoryArm,
    HistoryRecord,
    comment_section,
    content_digest,
)
from docdelta.scorecard.models import VerdictSummary

pytestmark = pytest.mark.timeout(120)


def _git(cwd: Path, *args: str) -> str:
    proc = run_git(cwd, *args)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode().strip()


def _record(n: int, agents: bytes, *, head_score: float = 1.0, pr: int | None = None) -> HistoryRecord:
    """A record whose head arm held AGENTS.md with `agents` as its bytes."""
    arms = [
        HistoryArm(
            condition="base", files={}, overlay_sha256="b" * 64, runs=4, mean_score=0.25, cost_usd=None
        ),
        HistoryArm(
            condition="head",
            files={"AGENTS.md": content_digest(agents)},
            overlay_sha256=f"{n:064x}",
            runs=4,
            mean_score=head_score,
            cost_usd=None,
        ),
    ]
    return HistoryRecord.model_validate(
        {
            "experiment": f"{n:064x}",
            "recorded_at": datetime(2026, 12, 1, 12, n, tzinfo=UTC),
            "repo": "octo/demo",
            "base_sha": "1" * 40,
            "head_sha": f"{n:040x}",
            "source_sha": f"{n:040x}",
            "docdelta_version": "0",
            "agent": {"name": "fake", "version": "1"},
            "tasks": {"t": "c" * 64},
            "arms": [a.model_dump() for a in arms],
            "task_scores": {},
            "verdict": None,
            "verdict_refused": "too few runs",
            "cost_usd": None,
            "pr": pr,
        }
    )


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(origin.git, clone one, clone two) of a one-commit repository."""
    src = tmp_path / "src"
    src.mkdir()
    _git(src, "init", "--quiet", "-b", "main")
    (src / "README.md").write_text("hi\n")
    _git(src, "add", "README.md")
    _git(src, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "-m", "one")
    origin = tmp_path / "origin.git"
    _git(tmp_path, "clone", "--quiet", "--bare", str(src), str(origin))
    for name in ("one", "two"):
        _git(tmp_path, "clone", "--quiet", str(origin), str(tmp_path / name))
    return origin, tmp_path / "one", tmp_path / "two"


class _HeldStore(BranchStore):
    """A real data-branch store whose write waits at a barrier right after it fetched the tip:
    both writers hold the same tip before either pushes (the race, made sure)."""

    def __init__(self, root: Path, barrier: threading.Barrier) -> None:
        super().__init__(root, "docdelta-results")
        self.barrier = barrier
        self.holding = False

    def _fetch(self) -> bool:
        found = super()._fetch()
        if self.holding:
            self.holding = False
            self.barrier.wait(timeout=60)
        return found

    def add(self, files: dict[str, bytes], message: str) -> None:  # type: ignore[override]
        self.holding = True
        super().add(files, message)


def test_two_runs_recording_on_the_data_branch_at_once_both_keep_their_record_and_receipt(
    clones: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    origin, one, two = clones
    barrier = threading.Barrier(2)
    records = [_record(1, b"# Agents\nUse tox.\n", pr=7), _record(2, b"# Agents\nUse nox.\n", pr=8)]
    added: list[bool] = []
    threads = [
        threading.Thread(target=lambda s=s, r=r: added.append(History(s, HISTORY_DIR).append(r)))
        for s, r in zip((_HeldStore(one, barrier), _HeldStore(two, barrier)), records, strict=True)
    ]
    with caplog.at_level(logging.WARNING, logger="docdelta.results.backends"):
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert added == [True, True]
    assert "was rejected" in caplog.text  # one push lost the race and was laid on the other's commit
    fresh = History(BranchStore(one, "docdelta-results"), HISTORY_DIR)
    got, skipped = fresh.records()
    assert [r.pr for r in got] == [7, 8] and skipped == 0
    for record in records:
        digest = record.arms[1].files["AGENTS.md"]
        receipt = fresh.receipt(digest)
        assert receipt is not None and [e.pr for e in receipt.evaluations] == [record.pr]
    listed = _git(origin, "ls-tree", "-r", "--name-only", "refs/heads/docdelta-results").split()
    assert len([n for n in listed if n.startswith("history/records/")]) == 2
    assert len([n for n in listed if n.startswith("history/receipts/")]) == 2


def test_a_rerun_adds_no_record_and_a_duplicate_member_is_read_once(tmp_path: Path) -> None:
    """The same experiment with the same runs is one record: append refuses it, and should two
    reruns at once both write it (under two times), the read still shows it once."""
    history = History(DirectoryStore(tmp_path), HISTORY_DIR)
    record = _record(3, b"# Agents\n")
    assert history.append(record) is True
    assert history.append(record) is False
    later = record.model_copy(update={"recorded_at": datetime(2026, 12, 2, tzinfo=UTC)})
    twin = f"{HISTORY_DIR}/records/20261202T000000000000Z-{record.key[:32]}.json"
    DirectoryStore(tmp_path).add({twin: later.model_dump_json().encode()}, "a second writer")
    assert len(list((tmp_path / HISTORY_DIR / "records").iterdir())) == 2
    got, _ = history.records()
    assert len(got) == 1
    more_runs = _record(3, b"# Agents\n").model_copy(
        update={"arms": [a.model_copy(update={"runs": 8}) for a in record.arms]}
    )
    assert history.append(more_runs) is True  # the same experiment after more rounds: a new record
    assert len(history.records()[0]) == 2


def test_the_comment_section_shows_a_files_last_evaluations_newest_first_and_its_receipt(
    tmp_path: Path,
) -> None:
    """Seven earlier evaluations of AGENTS.md: five rows, newest first, the rest counted; head's
    content passed before, so it already has a receipt. No earlier evaluation: no section."""
    history = History(DirectoryStore(tmp_path), HISTORY_DIR)
    head = b"# Agents\nUse tox.\n"
    passed = _record(1, head, pr=11).model_copy(update={"verdict_refused": None})
    improved = VerdictSummary.model_validate(
        {
            "treatment": "head", "control": "base", "kind": "improved", "estimate": 0.75, "ci_low": None,
            "ci_high": None, "confidence": None, "p_value": 0.01, "threshold": 0.05, "exact": True,
            "alpha": 0.05, "band": 0.1, "tasks": 1, "design": "fixed 4 repeats", "rounds": 4,
            "reason": "head beat base",
        }
    )  # fmt: skip
    history.append(passed.model_copy(update={"verdict": improved}))
    for n in range(2, 8):
        history.append(_record(n, f"# Agents\nversion {n}\n".encode(), head_score=0.5, pr=10 + n))
    current = _record(9, head, pr=20)

    section = comment_section(
        history, [("AGENTS.md", content_digest(head))], current, saved=True, policy="regression"
    )

    assert section.startswith("<details><summary>History of AGENTS.md (7 earlier evaluation(s))</summary>")
    rows = [line for line in section.splitlines() if line.startswith("| 2026")]
    assert [row.split(" | ")[1].split(" ")[0] for row in rows] == ["#17", "#16", "#15", "#14", "#13"]
    assert rows[0].endswith("| no verdict (too few runs) | +0.25 | 8 |")
    assert "2 older evaluation(s) not shown: `docdelta history --file AGENTS.md`." in section
    assert (
        f"Head's content `{content_digest(head)[:12]}` already has a receipt: it passed "
        "`fail-on: regression` in 1 earlier evaluation(s), latest PR #11 on 2026-12-01."
    ) in section
    assert section.endswith("</details>")
    assert comment_section(history, [("CLAUDE.md", "d" * 64)], current, saved=True, policy="regression") == ""
