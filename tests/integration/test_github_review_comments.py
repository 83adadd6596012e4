"""The sticky review comment (the proven ```suggestion) through the PyGithub port, over real
HTTP against the fake GitHub server, which places review comments as GitHub does: only on a
line of the PR's diff (else GitHub's 422), following or outdating them when the head moves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakegithub import FakeGitHub
from fakegithub.recordings import exchanges
from fakegithub.server import BOT

from docdelta.github.port import ReviewAnchor
from docdelta.github.pygithub import ApiError, PyGithubPort

BASE, HEAD, MOVED = "b" * 40, "h" * 40, "m" * 40
MARK = "<!-- docdelta-suggestion:default -->"
OLD = "".join(f"line {n}\n" for n in range(1, 21))
# Line 10 changed: the PR's one hunk shows head lines 7-13.
NEW = OLD.replace("line 10\n", "line ten\n")
MALLORY = {"login": "mallory", "id": 666, "type": "User"}


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.add_commit(BASE, {"AGENTS.md": OLD.encode()})
        server.add_commit(HEAD, {"AGENTS.md": NEW.encode()})
        server.add_pull(2, BASE, HEAD, [("AGENTS.md", "modified")])
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def port(fake: FakeGitHub, sleeps: list[float]) -> PyGithubPort:
    return PyGithubPort(fake.token, fake.repo, api_url=fake.base_url, throttle=False, sleep=sleeps.append)


def _body(text: str) -> str:
    return f"{MARK}\n{text}"


def test_requests_and_answers_have_the_shapes_pygithub_recorded_against_github(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    ref = port.upsert_review_comment(
        2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=11, start_line=10), _body("a")
    )
    port.upsert_review_comment(
        2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=11, start_line=10), _body("b")
    )
    assert port.delete_review_comments(2, MARK) == 1

    [create] = [
        e for e in exchanges("PullRequest.testCreateMultilineReviewCommentChoosingSide") if e.method == "POST"
    ]
    [edit] = exchanges("PullRequestComment.testEdit")
    [delete] = exchanges("PullRequestComment.testDelete")
    [listed] = exchanges("PullRequest.testGetReviewComments")
    posted = fake.requests("POST", r"/pulls/2/comments")[0]
    assert sorted(posted.body) == sorted(create.request)
    assert posted.body == {
        "body": _body("a"), "commit_id": HEAD, "path": "AGENTS.md",
        "line": 11, "side": "RIGHT", "start_line": 10, "start_side": "RIGHT",
    }  # fmt: skip
    [patched] = fake.requests("PATCH", rf"/pulls/comments/{ref.id}")
    assert sorted(patched.body) == sorted(edit.request)
    [deleted] = fake.requests("DELETE", rf"/pulls/comments/{ref.id}")
    assert (deleted.status, delete.status) == (204, 204)
    # What the fake lists carries every field GitHub lists.
    fake.add_review_comment(2, _body("c"), BOT, "AGENTS.md", 9)
    answer = fake._list_review_comments("2", query={}, body=None)[1][0]
    assert set(listed.body[0]) <= set(answer)
    assert ref.url == f"https://github.com/{fake.repo}/pull/2#discussion_r{ref.id}"


def test_a_suggestion_is_posted_on_its_lines_then_edited_in_place_never_duplicated(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    anchor = ReviewAnchor(path="AGENTS.md", line=10)
    first = port.upsert_review_comment(2, MARK, HEAD, anchor, _body("run 1"))
    second = port.upsert_review_comment(2, MARK, HEAD, anchor, _body("run 2"))
    third = port.upsert_review_comment(2, MARK, HEAD, anchor, _body("run 2"))

    assert first.created and not second.created and not third.created
    assert first.id == second.id == third.id
    [comment] = fake.review_comments
    assert (comment["body"], comment["line"], comment["start_line"]) == (_body("run 2"), 10, None)
    assert len(fake.requests("POST", r"/pulls/2/comments")) == 1
    assert len(fake.requests("PATCH")) == 1  # the third body was the same: nothing sent


def test_a_line_outside_the_diff_is_githubs_422_and_nothing_is_posted(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    with pytest.raises(ApiError, match="must be part of the diff") as err:
        port.upsert_review_comment(2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=20), _body("x"))
    assert err.value.status == 422 and not fake.review_comments
    with pytest.raises(ApiError, match="same hunk"):
        port.upsert_review_comment(
            2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=8, start_line=2), _body("x")
        )


def test_when_the_anchor_moves_the_old_comment_is_deleted_and_one_posted_where_it_now_applies(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    old = port.upsert_review_comment(2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=10), _body("on 10"))
    # A push inserts a line above: GitHub moves the comment with its line, to 11.
    fake.add_commit(MOVED, {"AGENTS.md": ("line 0\n" + NEW).encode()})
    fake.push(2, MOVED)
    assert fake.review_comments[0]["line"] == 11

    same = port.upsert_review_comment(2, MARK, MOVED, ReviewAnchor(path="AGENTS.md", line=11), _body("on 11"))
    moved = port.upsert_review_comment(
        2, MARK, MOVED, ReviewAnchor(path="AGENTS.md", line=12), _body("on 12")
    )

    assert (same.id, same.created, same.removed) == (old.id, False, 0)
    assert moved.created and moved.removed == 1 and moved.id != old.id
    [comment] = fake.review_comments
    assert (comment["id"], comment["line"], comment["commit_id"]) == (moved.id, 12, MOVED)
    assert len(fake.requests("DELETE", rf"/pulls/comments/{old.id}")) == 1


def test_a_comment_github_outdated_is_replaced_even_on_the_same_line_number(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    old = port.upsert_review_comment(2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=10), _body("x"))
    fake.add_commit(MOVED, {"AGENTS.md": NEW.replace("line ten", "line TEN").encode()})
    fake.push(2, MOVED)
    assert fake.review_comments[0]["line"] is None  # its line changed: outdated

    new = port.upsert_review_comment(2, MARK, MOVED, ReviewAnchor(path="AGENTS.md", line=10), _body("x"))

    assert new.created and new.id != old.id
    assert [c["id"] for c in fake.review_comments] == [new.id]


def test_someone_elses_marked_review_comment_is_never_edited_or_deleted(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    theirs = fake.add_review_comment(2, _body("I am the suggestion now"), MALLORY, "AGENTS.md", 10)

    ref = port.upsert_review_comment(2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=10), _body("ours"))
    assert port.delete_review_comments(2, MARK) == 1

    assert ref.created and ref.id != theirs
    assert [(c["id"], c["body"]) for c in fake.review_comments] == [
        (theirs, _body("I am the suggestion now"))
    ]
    assert not fake.requests("PATCH") and not fake.requests("DELETE", rf"/pulls/comments/{theirs}")


def test_without_pull_requests_write_posting_is_a_403_api_error_naming_the_permission(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    fake.deny_review_comments = True
    with pytest.raises(ApiError) as err:
        port.upsert_review_comment(2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=10), _body("x"))
    assert err.value.status == 403 and "permissions" in err.value.hint
    assert "review comment" in err.value.message and not fake.review_comments


def test_a_review_comment_created_before_a_502_is_found_not_posted_again(
    fake: FakeGitHub, port: PyGithubPort, sleeps: list[float]
) -> None:
    fake.fail_next("POST", r"/pulls/2/comments", status=502, after=True)

    ref = port.upsert_review_comment(2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=10), _body("x"))

    [comment] = fake.review_comments
    assert ref.id == comment["id"] and ref.created
    assert len(fake.requests("POST", r"/pulls/2/comments")) == 1 and sleeps == [1.0]


def test_a_body_that_does_not_start_with_its_marker_is_refused(fake: FakeGitHub, port: PyGithubPort) -> None:
    with pytest.raises(ValueError, match="marker"):
        port.upsert_review_comment(2, MARK, HEAD, ReviewAnchor(path="AGENTS.md", line=10), "no marker")
    assert fake.log == []


def test_deleting_with_keep_spares_only_the_bots_comments_holding_it(
    fake: FakeGitHub, port: PyGithubPort
) -> None:
    """A run that proved nothing keeps the suggestion proven on its own head (its body names
    that head), and deletes the bot's others; anyone else's is never touched."""
    here = fake.add_review_comment(2, _body(f"a\n<!-- on {HEAD} -->"), BOT, "AGENTS.md", 11)
    older = fake.add_review_comment(2, _body(f"b\n<!-- on {MOVED} -->"), BOT, "AGENTS.md", 12)
    theirs = fake.add_review_comment(2, _body("c"), MALLORY, "AGENTS.md", 12)

    assert port.delete_review_comments(2, MARK, keep=f"<!-- on {HEAD} -->") == 1

    assert [c["id"] for c in fake.review_comments] == [here, theirs]
    assert [r.path for r in fake.requests("DELETE")] == [f"/pulls/comments/{older}"]


def test_editing_a_comment_by_id_is_one_request(fake: FakeGitHub, port: PyGithubPort) -> None:
    """The scorecard's second write (to link the review comment) costs one PATCH, no lookup."""
    first = port.upsert_comment(2, "<!-- docdelta:default -->", "<!-- docdelta:default -->\nfirst")
    before = len(fake.log)

    ref = port.edit_comment(2, first.id, "<!-- docdelta:default -->\nlinked")

    assert [(r.method, r.path) for r in fake.log[before:]] == [("PATCH", f"/issues/comments/{first.id}")]
    assert ref.url == first.url and fake.comments[0]["body"] == "<!-- docdelta:default -->\nlinked"
