"""The PyGithub port driven over real HTTP against the fake GitHub server."""

from __future__ import annotations

import threading

import pytest
from fakegithub import FakeGitHub

from docdelta.errors import ConfigError, GitHubError
from docdelta.github.comment import marker, render_comment
from docdelta.github.port import Annotation, AnnotationLevel, CheckReport, Conclusion, GitHubPort, PrFile
from docdelta.github.pygithub import ApiError, PyGithubPort
from docdelta.instructions.models import FileStatus

NOW = 1_780_000_000.0
BASE, HEAD = "b" * 40, "h" * 40
MARK = marker("default")
SECONDARY = {"retry-after": "7"}


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def port(fake: FakeGitHub, sleeps: list[float]) -> PyGithubPort:
    return PyGithubPort(
        fake.token, fake.repo, api_url=fake.base_url, throttle=False, sleep=sleeps.append, clock=lambda: NOW
    )


def test_the_implementation_satisfies_the_port(port: PyGithubPort) -> None:
    as_port: GitHubPort = port
    assert as_port is port


# ----------------------------------------------------------------------- files
def test_pr_files_follow_every_page_and_map_statuses(fake: FakeGitHub, port: PyGithubPort) -> None:
    files = [(f"src/f{i}.py", "modified") for i in range(247)]
    pull = fake.add_pull(2, BASE, HEAD, [("AGENTS.md", "renamed"), ("CLAUDE.md", "removed"), *files])
    pull.files[0]["previous_filename"] = "docs/AGENTS.md"

    got = port.pr_files(2, BASE, HEAD)

    assert len(got) == 249
    stub = "@@ -1 +1 @@"  # the fake's patch of a PR whose commits the test did not add
    assert got[0] == PrFile(
        path="AGENTS.md", status=FileStatus.renamed, old_path="docs/AGENTS.md", patch=stub
    )
    assert got[1] == PrFile(path="CLAUDE.md", status=FileStatus.deleted, patch=stub)
    assert len(fake.requests("GET", r"/pulls/2/files")) == 3  # 100 per page


def test_at_the_3000_file_cap_the_trees_of_merge_base_and_head_are_compared(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    merge_base = "m" * 40
    common = {f"src/f{i}.py": b"x" for i in range(10)}
    fake.add_commit(merge_base, {**common, "AGENTS.md": b"old rules", "old.md": b"gone"})
    fake.add_commit(
        BASE, {**common, "AGENTS.md": b"old rules", "old.md": b"gone", "base-only.md": b"moved on"}
    )
    fake.add_commit(HEAD, {**common, "AGENTS.md": b"new rules", "CLAUDE.md": b"added"})
    fake.merge_bases[(BASE, HEAD)] = merge_base
    fake.add_pull(2, BASE, HEAD, [(f"gen/{i}.txt", "added") for i in range(3500)])

    got = port.pr_files(2, BASE, HEAD)

    assert got == [
        PrFile(path="AGENTS.md", status=FileStatus.modified),
        PrFile(path="CLAUDE.md", status=FileStatus.added),
        PrFile(path="old.md", status=FileStatus.deleted),
    ]
    assert {r.path for r in fake.requests("GET", r"/git/trees/.*")} == {
        f"/git/trees/{merge_base}",
        f"/git/trees/{HEAD}",
    }


def test_read_file_returns_bytes_at_a_ref_and_none_when_absent(fake: FakeGitHub, port: PyGithubPort) -> None:
    fake.add_commit(HEAD, {".github/copilot-instructions.md": "Use ünïcode\n".encode()})

    assert port.read_file(".github/copilot-instructions.md", HEAD) == "Use ünïcode\n".encode()
    assert port.read_file("AGENTS.md", HEAD) is None


def test_a_vanished_head_commit_is_a_clear_error_without_the_token(
    port: PyGithubPort, fake: FakeGitHub
) -> None:
    with pytest.raises(ApiError) as caught:
        port.read_file("AGENTS.md", "deadbeef")

    assert caught.value.status == 404
    assert "read AGENTS.md at deadbeef" in caught.value.message
    assert "No commit found" in caught.value.message
    assert "force-push" in caught.value.hint
    assert fake.token not in str(caught.value)


def test_a_bad_token_is_a_github_error_naming_the_operation(fake: FakeGitHub, sleeps: list[float]) -> None:
    port = PyGithubPort("wrong-token", fake.repo, api_url=fake.base_url, throttle=False, sleep=sleeps.append)
    with pytest.raises(GitHubError, match=r"list the labels of PR #2 failed \(HTTP 401: Bad credentials\)"):
        port.pr_labels(2)
    assert sleeps == []


def test_a_missing_token_is_a_config_error(fake: FakeGitHub) -> None:
    with pytest.raises(ConfigError, match="no GitHub token"):
        PyGithubPort("", fake.repo, api_url=fake.base_url)


def test_the_actions_environment_selects_the_api_url_and_repository(fake: FakeGitHub) -> None:
    fake.add_pull(2, BASE, HEAD, [], labels=("docs",))
    env = {"GITHUB_REPOSITORY": fake.repo, "GITHUB_API_URL": fake.base_url}

    assert PyGithubPort.from_actions_env(fake.token, env).pr_labels(2) == ["docs"]
    with pytest.raises(ConfigError, match="GITHUB_REPOSITORY"):
        PyGithubPort.from_actions_env(fake.token, {})


# --------------------------------------------------------------------- comment
def test_a_body_that_does_not_start_with_its_marker_is_refused(port: PyGithubPort, fake: FakeGitHub) -> None:
    with pytest.raises(ValueError, match="marker"):
        port.upsert_comment(2, MARK, "no marker here")
    assert fake.log == []


def test_second_upsert_edits_the_same_comment(fake: FakeGitHub, port: PyGithubPort) -> None:
    fake.comments.append(
        {"id": 1, "issue": 2, "body": f"> {MARK}\nquoting the bot", "created_at": "", "updated_at": ""}
    )

    first = port.upsert_comment(2, MARK, f"{MARK}\nrun 1")
    second = port.upsert_comment(2, MARK, f"{MARK}\nrun 2")

    assert first.created and not second.created
    assert first.id == second.id
    ours = [c for c in fake.comments if c["body"].startswith(MARK)]
    assert [c["body"] for c in ours] == [f"{MARK}\nrun 2"]
    assert fake.comments[0]["body"].startswith("> ")  # someone quoting the marker is left alone
    assert len(fake.requests("POST", r"/issues/\d+/comments")) == 1
    assert len(fake.requests("PATCH")) == 1
    assert second.url.endswith(f"#issuecomment-{first.id}")


MALLORY = {"login": "mallory", "id": 666, "type": "User"}


def test_a_participant_who_posts_the_marker_first_does_not_get_their_comment_edited(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    theirs = fake.add_comment(2, f"{MARK}\nI am the scorecard now", MALLORY)

    first = port.upsert_comment(2, MARK, f"{MARK}\nrun 1")
    second = port.upsert_comment(2, MARK, f"{MARK}\nrun 2")

    assert first.created and first.id != theirs
    assert (second.id, second.created) == (first.id, False)
    bodies = {c["id"]: c["body"] for c in fake.comments}
    assert bodies == {theirs: f"{MARK}\nI am the scorecard now", first.id: f"{MARK}\nrun 2"}
    assert not fake.requests("PATCH", rf"/issues/comments/{theirs}")
    assert len(fake.requests("POST", "/graphql")) == 1  # who we are is asked once per port


def test_when_github_will_not_say_who_the_token_is_no_comment_is_touched(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    theirs = fake.add_comment(2, f"{MARK}\nplanted", MALLORY)
    fake.fail_next("POST", "/graphql", status=401, message="Bad credentials")

    with pytest.raises(ApiError, match="whom the token belongs to") as err:
        port.upsert_comment(2, MARK, f"{MARK}\nrun 1")

    assert err.value.status == 401 and "github-token" in err.value.hint
    assert [c["id"] for c in fake.comments] == [theirs] and not fake.requests("PATCH")


def test_with_a_personal_token_the_owners_marked_comment_is_the_sticky_one(fake: FakeGitHub) -> None:
    owner = {"login": "Octo-Maintainer", "id": 7, "type": "User"}
    fake.identity = owner
    mine = fake.add_comment(2, f"{MARK}\nold", {**owner, "login": "octo-maintainer"})  # logins ignore case
    fake.add_comment(2, f"{MARK}\nbot's", {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"})
    port = PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False)

    ref = port.upsert_comment(2, MARK, f"{MARK}\nnew")

    assert (ref.id, ref.created) == (mine, False)
    assert [c["body"] for c in fake.comments] == [f"{MARK}\nnew", f"{MARK}\nbot's"]
    assert port.login() == "Octo-Maintainer"


def test_a_comment_created_before_a_502_is_found_not_posted_again(
    fake: FakeGitHub, port: PyGithubPort, sleeps: list[float]
) -> None:
    fake.fail_next("POST", r"/issues/2/comments", status=502, after=True)

    ref = port.upsert_comment(2, MARK, f"{MARK}\nscorecard")

    assert len(fake.comments) == 1
    assert ref.id == fake.comments[0]["id"]
    assert len(fake.requests("POST", r"/issues/\d+/comments")) == 1
    assert sleeps == [1.0]


def test_a_comment_rejected_by_a_secondary_rate_limit_is_posted_once_after_retry_after(
    fake: FakeGitHub, port: PyGithubPort, sleeps: list[float]
) -> None:
    fake.fail_next(
        "POST",
        r"/issues/2/comments",
        status=403,
        headers=SECONDARY,
        message="You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
    )

    ref = port.upsert_comment(2, MARK, f"{MARK}\nscorecard")

    assert ref.created
    assert [c["body"] for c in fake.comments] == [f"{MARK}\nscorecard"]
    assert [r.status for r in fake.requests("POST", r"/issues/\d+/comments")] == [403, 201]
    assert sleeps == [7.0]


def test_an_edit_is_retried_after_a_5xx(fake: FakeGitHub, port: PyGithubPort, sleeps: list[float]) -> None:
    port.upsert_comment(2, MARK, f"{MARK}\nold")
    fake.fail_next("PATCH", r"/issues/comments/\d+", count=2, status=503)

    port.upsert_comment(2, MARK, f"{MARK}\nnew")

    assert [c["body"] for c in fake.comments] == [f"{MARK}\nnew"]
    assert [r.status for r in fake.requests("PATCH")] == [503, 503, 200]
    assert sleeps == [1.0, 2.0]


def test_primary_rate_limit_waits_until_the_reset_time(
    fake: FakeGitHub, port: PyGithubPort, sleeps: list[float]
) -> None:
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 30)}
    fake.fail_next("GET", r"/issues/2/comments", status=403, headers=reset, message="API rate limit exceeded")

    port.upsert_comment(2, MARK, f"{MARK}\nx")

    assert sleeps == [31.0]
    assert len(fake.comments) == 1


def test_a_rate_limit_longer_than_the_cap_fails_clearly(fake: FakeGitHub, sleeps: list[float]) -> None:
    port = PyGithubPort(
        fake.token, fake.repo, api_url=fake.base_url, throttle=False, sleep=sleeps.append, max_wait_s=60
    )
    fake.fail_next("GET", r"/issues/2/labels", status=429, headers={"retry-after": "3600"})

    with pytest.raises(ApiError, match="rate-limited for another 3600 s"):
        port.pr_labels(2)
    assert sleeps == []


def test_persistent_5xx_gives_up_after_the_attempts(fake: FakeGitHub, port: PyGithubPort) -> None:
    fake.add_pull(2, BASE, HEAD, [])
    fake.fail_next("GET", r"/issues/2/labels", count=10, status=500, message="boom")

    with pytest.raises(ApiError) as caught:
        port.pr_labels(2)

    assert caught.value.status == 500
    assert len(fake.requests("GET", r"/issues/2/labels")) == 4
    assert fake.token not in str(caught.value)


def test_a_huge_scorecard_is_posted_trimmed_under_the_limit(fake: FakeGitHub, port: PyGithubPort) -> None:
    body = render_comment("default", "| row |\n" * 25_000, full_report_url="https://example.test/summary")

    port.upsert_comment(2, MARK, body)

    stored = fake.comments[0]["body"]
    assert len(stored) <= 65_536
    assert "https://example.test/summary" in stored


# ----------------------------------------------------------------------- check
def report(conclusion: Conclusion | None, title: str = "docdelta") -> CheckReport:
    return CheckReport(
        name="docdelta / default",
        head_sha=HEAD,
        conclusion=conclusion,
        title=title,
        summary="## Scorecard",
        details_url="https://example.test/run",
    )


def test_a_check_run_is_created_then_updated_under_one_name(fake: FakeGitHub, port: PyGithubPort) -> None:
    started = port.publish_check(report(None, "running"))
    assert fake.check_runs[0]["status"] == "in_progress"

    for conclusion in Conclusion:
        done = port.publish_check(report(conclusion, f"verdict {conclusion}"))
        assert done.id == started.id
        assert fake.check_runs[0]["conclusion"] == conclusion.value

    assert len(fake.check_runs) == 1
    run = fake.check_runs[0]
    assert run["status"] == "completed"
    assert run["output"] == {"title": "verdict action_required", "summary": "## Scorecard"}
    assert run["details_url"] == "https://example.test/run"
    assert done.kind == "check_run" and done.note == ""


def _evaluation(fake: FakeGitHub, run_key: str | None = None) -> PyGithubPort:
    """The port of one Action run: a run of its own unless `run_key` names a workflow run attempt."""
    return PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False, run_key=run_key)


def test_a_second_evaluation_of_a_commit_never_reopens_the_completed_check(fake: FakeGitHub) -> None:
    first, again = _evaluation(fake), _evaluation(fake)
    done = first.publish_check(report(None, "running"))
    first.publish_check(report(Conclusion.success, "improved"))

    started = again.publish_check(report(None, "running again"))

    assert started.id != done.id
    assert [(r["id"], r["status"]) for r in fake.check_runs] == [
        (done.id, "completed"),
        (started.id, "in_progress"),
    ]
    finished = again.publish_check(report(Conclusion.failure, "regressed"))
    assert finished.id == started.id
    assert [r["conclusion"] for r in fake.check_runs] == ["success", "failure"]


def test_two_concurrent_evaluations_of_one_commit_each_complete_their_own_check(fake: FakeGitHub) -> None:
    both_started = threading.Barrier(2, timeout=60)
    refs: dict[str, tuple[int | None, int | None]] = {}

    def evaluate(name: str, conclusion: Conclusion) -> None:
        port = _evaluation(fake)
        started = port.publish_check(report(None, f"{name} running"))
        both_started.wait()  # both are in progress before either completes
        done = port.publish_check(report(conclusion, f"{name} done"))
        refs[name] = (started.id, done.id)

    threads = [
        threading.Thread(target=evaluate, args=("a", Conclusion.success)),
        threading.Thread(target=evaluate, args=("b", Conclusion.failure)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert refs["a"][0] == refs["a"][1] and refs["b"][0] == refs["b"][1] and refs["a"][0] != refs["b"][0]
    by_id = {r["id"]: r for r in fake.check_runs}
    assert len(by_id) == 2
    assert [r["status"] for r in fake.check_runs] == ["completed", "completed"]
    assert by_id[refs["a"][0]]["output"]["title"] == "a done"
    assert by_id[refs["b"][0]]["output"]["title"] == "b done"


def test_a_matrix_aggregate_job_completes_the_check_its_plan_job_started(fake: FakeGitHub) -> None:
    other = _evaluation(fake, "docdelta-7.1")
    other.publish_check(report(None, "another workflow run"))
    plan = _evaluation(fake, "docdelta-9.1").publish_check(report(None, "planned"))

    done = _evaluation(fake, "docdelta-9.1").publish_check(report(Conclusion.success, "improved"))

    assert done.id == plan.id
    assert [(r["external_id"], r["status"]) for r in fake.check_runs] == [
        ("docdelta-7.1", "in_progress"),
        ("docdelta-9.1", "completed"),
    ]
    # a later evaluation under the same key (act numbers every run 1) leaves that one as it was
    later = _evaluation(fake, "docdelta-9.1").publish_check(report(Conclusion.failure, "regressed"))
    assert later.id != done.id and fake.check_runs[1]["conclusion"] == "success"


def _notes(n: int) -> tuple[Annotation, ...]:
    return tuple(
        Annotation(
            path="AGENTS.md",
            start_line=i,
            end_line=i,
            level=AnnotationLevel.notice,
            title="t",
            message=f"m{i}",
        )
        for i in range(1, n + 1)
    )


def test_annotations_are_posted_at_most_50_a_request_and_all_arrive_in_order(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    port.publish_check(report(None, "running"))
    ref = port.publish_check(report(Conclusion.success).model_copy(update={"annotations": _notes(120)}))

    got = fake.annotations(ref.id or 0)
    assert [a["message"] for a in got] == [f"m{i}" for i in range(1, 121)]
    assert got[0] == {
        "path": "AGENTS.md",
        "start_line": 1,
        "end_line": 1,
        "annotation_level": "notice",
        "title": "t",
        "message": "m1",
    }
    writes = [r for r in fake.requests("PATCH", r"/check-runs/\d+") if "annotations" in r.body["output"]]
    assert [len(r.body["output"]["annotations"]) for r in writes] == [50, 50, 20]
    assert fake.check_runs[0]["conclusion"] == "success"  # the first batch rode on the final update
    assert len(fake.check_runs) == 1


def test_the_fake_refuses_51_annotations_in_one_request_as_github_does(fake: FakeGitHub) -> None:
    notes = [{"path": "a", "start_line": 1, "end_line": 1, "annotation_level": "notice", "message": "m"}] * 51
    body = {"name": "x", "head_sha": HEAD, "output": {"title": "t", "summary": "s", "annotations": notes}}
    status, payload, _ = fake.handle("POST", f"{fake.prefix}/repos/{fake.repo}/check-runs", {
        "authorization": f"token {fake.token}"}, body)  # fmt: skip
    assert status == 422 and "50" in payload["errors"][0]


def test_a_rerun_on_an_annotated_check_run_starts_a_new_run_instead_of_doubling_its_annotations(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    first = port.publish_check(report(Conclusion.success).model_copy(update={"annotations": _notes(3)}))
    again = port.publish_check(report(Conclusion.success).model_copy(update={"annotations": _notes(3)}))
    assert again.id != first.id
    assert len(fake.annotations(first.id or 0)) == len(fake.annotations(again.id or 0)) == 3


def test_a_check_run_created_before_a_502_is_not_duplicated(
    fake: FakeGitHub, port: PyGithubPort, sleeps: list[float]
) -> None:
    fake.fail_next("POST", r"/check-runs", status=502, after=True)

    ref = port.publish_check(report(Conclusion.success))

    assert len(fake.check_runs) == 1
    assert ref.id == fake.check_runs[0]["id"]
    assert fake.check_runs[0]["conclusion"] == "success"
    assert len(fake.requests("POST", r"/check-runs")) == 1


def test_without_checks_permission_a_commit_status_is_posted_and_says_so(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    fake.deny_checks = True

    ref = port.publish_check(report(Conclusion.action_required, "a maintainer must approve this fork PR"))

    assert ref.kind == "status"
    assert "checks: write" in ref.note
    assert fake.check_runs == []
    [status] = fake.statuses
    assert status["sha"] == HEAD
    assert status["context"] == "docdelta / default"
    assert status["state"] == "pending"
    assert status["description"] == "Action required: a maintainer must approve this fork PR"
    assert status["target_url"] == "https://example.test/run"


@pytest.mark.parametrize(
    ("conclusion", "state"),
    [(Conclusion.success, "success"), (Conclusion.failure, "failure"), (Conclusion.neutral, "success")],
)
def test_status_fallback_maps_conclusions_to_states(
    fake: FakeGitHub, port: PyGithubPort, conclusion: Conclusion, state: str
) -> None:
    fake.deny_checks = True
    port.publish_check(report(conclusion, "x" * 300))
    assert fake.statuses[0]["state"] == state
    assert len(fake.statuses[0]["description"]) == 140


# ---------------------------------------------------------------------- labels
def test_a_label_counts_as_approval_only_from_someone_with_write_access(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    fake.add_pull(7, BASE, HEAD, [], labels=("bug",))
    fake.permissions.update(maintainer="write", drive_by="read")

    assert port.label_approver(7, "docdelta:approved") is None
    fake.apply_label(7, "docdelta:approved", "drive_by")
    assert port.label_approver(7, "docdelta:approved") is None
    fake.apply_label(7, "docdelta:approved", "maintainer")
    assert port.label_approver(7, "docdelta:approved") == "maintainer"
    assert port.pr_labels(7) == ["bug", "docdelta:approved"]

    assert port.remove_label(7, "docdelta:approved") is True
    assert port.remove_label(7, "docdelta:approved") is False
    assert port.pr_labels(7) == ["bug"]
    assert port.label_approver(7, "docdelta:approved") is None
