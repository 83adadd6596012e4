"""Proposed commands run in a fresh offline sandbox of the sealed checkout, under every provider.

The attacks come first: a proposal that tries to reach a server this test started, write
outside the checkout, leave a process behind or print a secret. Each is shown to fail, be
contained or be redacted. Then what the feature is for: a command that does not exist in
the project (a stale test module, a wrong flag) is a miss whose note carries the evidence,
and the same proposal that exists is a hit.

The commands use only `sh` and the system `python3` with its stdlib, which both the host
(bubblewrap) and the base image (Docker) have.
"""

from __future__ import annotations

import http.server
import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitrepo import GitRepo

from conformance.providers import PROVIDERS, ProviderFactory
from docdelta.agents.models import AgentAnswer
from docdelta.checkout.seal import SealedCheckout, seal
from docdelta.git import Repo
from docdelta.grading.answer import score_answer
from docdelta.grading.execute import REFUSED, execute_proposals
from docdelta.instructions.detect import InstructionMatcher, Overlay
from docdelta.redaction import REDACTED
from docdelta.results.grades import CommandsExecuted
from docdelta.sandbox import SandboxProvider, get_provider
from docdelta.sandbox.base import SandboxSpec
from docdelta.tasks.models import Gold, Task

TEST_CALC = "import unittest\n\n\nclass Calc(unittest.TestCase):\n    def test_add(self):\n        pass\n"
SECRET = "sk-planted-" + secrets.token_hex(12)


def _task(**execute: object) -> Task:
    gold = Gold(commands=["python3 -m unittest"], execute=execute or True)
    return Task(id="run-tests", prompt="How do I run the tests?", gold=gold)


@pytest.fixture(params=PROVIDERS.values())
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SandboxProvider]:
    factory: ProviderFactory = request.param
    made = factory(tmp_path)
    yield made
    made.close()


@pytest.fixture
def sealed(tmp_path: Path) -> SealedCheckout:
    repo = GitRepo.init(tmp_path / "src")
    files = {"tests/__init__.py": "", "tests/test_calc.py": TEST_CALC, ".env": f"OPENAI_API_KEY={SECRET}\n"}
    sha = repo.commit(files)
    return seal(Repo(repo.path), sha, Overlay(), tmp_path / "sealed", InstructionMatcher(), [])


def _run(
    sealed: SealedCheckout, provider: SandboxProvider, *commands: str, task: Task | None = None, **kw: object
) -> CommandsExecuted:
    answer = AgentAnswer(answer="see commands", commands=list(commands))
    return execute_proposals(task or _task(), sealed.path, answer, provider, spec=SandboxSpec(), **kw)  # type: ignore[arg-type]


class _Server(http.server.ThreadingHTTPServer):
    paths: list[str]


@pytest.fixture
def loopback() -> Iterator[_Server]:
    """An HTTP server on this host's loopback that records every path it is asked for."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server.paths.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"reached\n")

        def log_message(self, *_: object) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    server.paths = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join()


def _fetch(url: str) -> str:
    return f"python3 -c \"import urllib.request; print(urllib.request.urlopen('{url}', timeout=10).read())\""


# ------------------------------------------------------------------ attacks
def test_a_proposal_cannot_reach_a_server_the_host_can(
    sealed: SealedCheckout, provider: SandboxProvider, loopback: _Server
) -> None:
    token = secrets.token_hex(8)
    url = f"http://127.0.0.1:{loopback.server_address[1]}/{token}"
    import urllib.request  # noqa: PLC0415

    assert urllib.request.urlopen(f"{url}-control", timeout=10).read() == b"reached\n"  # the control
    executed = _run(sealed, provider, _fetch(url))
    [run] = executed.commands
    assert run.exit_code not in (0, None), run
    assert run.first_error is not None and "Connection refused" in run.first_error
    assert loopback.paths == [f"/{token}-control"]  # the sandboxed request never arrived


def test_writes_outside_the_checkout_fail_and_one_proposal_cannot_break_the_next(
    sealed: SealedCheckout, provider: SandboxProvider, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    host.mkdir(mode=0o777)
    # it matches the gold command too, so it runs first (matching proposals run first)
    sabotage = f"python3 -m unittest; rm -rf tests; echo pwned > {host}/outside.txt; echo pwned > /usr/pwned"
    before = sorted(p.relative_to(sealed.path) for p in sealed.path.rglob("*"))
    executed = _run(sealed, provider, sabotage, "python3 -m unittest tests.test_calc")
    assert not (host / "outside.txt").exists()
    assert not Path("/usr/pwned").exists()
    assert sorted(p.relative_to(sealed.path) for p in sealed.path.rglob("*")) == before
    sabotaged, tests = executed.commands
    assert sabotaged.exit_code != 0
    assert tests.exit_code == 0, tests  # a fresh sandbox: the deleted tests are back


def _live(token: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes()
        except OSError:
            continue  # exited while we looked
        if token.encode() in args and b"pytest" not in args:
            found.append(args.decode(errors="replace"))
    return found


def test_nothing_a_proposal_starts_outlives_it(sealed: SealedCheckout, provider: SandboxProvider) -> None:
    token = secrets.token_hex(8)
    # Each daemon says it runs by creating a file; the proposal exits only once both have.
    daemon = f"python3 -c 'import sys, time; open(sys.argv[1], \"w\"); time.sleep(600)' {{}} {token}"
    detached = (
        f"setsid nohup {daemon.format('a')} >/dev/null 2>&1 & ({daemon.format('b')} &) ; "
        "until [ -e a ] && [ -e b ]; do :; done; echo both running"
    )
    executed = _run(sealed, provider, detached)
    assert executed.commands[0].exit_code == 0 and "both running" in executed.commands[0].output_tail
    assert _live(token) == []  # an exec returns only once everything it started is gone


def test_a_hanging_proposal_is_killed_at_its_timeout(
    sealed: SealedCheckout, provider: SandboxProvider
) -> None:
    executed = _run(
        sealed, provider, "python3 -m unittest tests.test_calc && sleep 600", task=_task(timeout_s=1)
    )
    [run] = executed.commands
    assert run.timed_out and run.exit_code is None
    assert run.first_error == "killed at the 1s limit (gold.execute.timeout_s)"
    score = score_answer(_task(), AgentAnswer(commands=[run.command]), Path("/nonexistent"), executed)
    assert score.value == 0.0 and "(timed out: killed at the 1s limit" in score.items[0].note


def test_secrets_are_out_of_reach_and_redacted_where_the_project_holds_one(
    sealed: SealedCheckout, provider: SandboxProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # the key the run holds, in docdelta's environment
    planted = tmp_path / "key.txt"
    planted.write_text(SECRET)
    planted.chmod(0o644)
    snoop = f'echo "env=$OPENAI_API_KEY"; cat {planted}; cat /proc/1/environ; env; false'
    leak = "cat .env; echo error: $(cat .env) >&2; false"
    executed = _run(sealed, provider, snoop, leak, secrets=[SECRET])
    snooped, project = executed.commands
    assert SECRET not in snooped.output_tail and "env=\n" in snooped.output_tail + "\n"
    assert project.output_tail.count(f"OPENAI_API_KEY={REDACTED}") == 2
    assert project.first_error == f"error: OPENAI_API_KEY={REDACTED}"
    assert SECRET not in executed.model_dump_json()


def test_the_none_provider_runs_nothing(sealed: SealedCheckout, tmp_path: Path) -> None:
    unisolated = get_provider("none", root=tmp_path / "none")
    marker = tmp_path / "ran"
    try:
        executed = _run(sealed, unisolated, f"touch {marker}; python3 -m unittest")
    finally:
        unisolated.close()
    assert executed.refused == REFUSED and executed.commands == []
    assert not marker.exists()
    answer = AgentAnswer(commands=[f"touch {marker}; python3 -m unittest"])
    [item] = score_answer(_task(), answer, sealed.path, executed).items
    assert item.hit and "not run" in item.note


# -------------------------------------------------------------- what it is for
def test_a_stale_test_module_and_a_wrong_flag_are_misses_with_evidence(
    sealed: SealedCheckout, provider: SandboxProvider
) -> None:
    stale = AgentAnswer(answer="Run `python3 -m unittest tests.test_ops`.", commands=["make tests"])
    executed = execute_proposals(_task(), sealed.path, stale, provider, spec=SandboxSpec())
    assert [c.command for c in executed.commands] == ["python3 -m unittest tests.test_ops", "make tests"]
    [item] = score_answer(_task(), stale, sealed.path, executed).items
    assert not item.hit
    assert item.note.startswith("given, but it failed in a fresh offline sandbox of the checkout:")
    assert (
        "`python3 -m unittest tests.test_ops` (exit 1: ImportError: Failed to import test module" in item.note
    )

    flag = AgentAnswer(commands=["python3 -m unittest --frobnicate"])
    executed = execute_proposals(_task(), sealed.path, flag, provider, spec=SandboxSpec())
    [item] = score_answer(_task(), flag, sealed.path, executed).items
    assert (
        not item.hit
        and "exit 2: python3 -m unittest: error: unrecognized arguments: --frobnicate" in item.note
    )

    good = AgentAnswer(commands=["python3 -m unittest tests.test_calc"])
    executed = execute_proposals(_task(), sealed.path, good, provider, spec=SandboxSpec())
    [item] = score_answer(_task(), good, sealed.path, executed).items
    assert item.hit and item.note.startswith("given, and `python3 -m unittest tests.test_calc` ran (exit 0, ")
    assert executed.isolation in ("bwrap", "docker-none")


def test_a_proposal_that_matches_nothing_is_shown_as_evidence_of_the_miss(
    sealed: SealedCheckout, provider: SandboxProvider
) -> None:
    answer = AgentAnswer(commands=["python3 tests/run_all.py"])
    executed = execute_proposals(_task(), sealed.path, answer, provider, spec=SandboxSpec())
    [item] = score_answer(_task(), answer, sealed.path, executed).items
    assert not item.hit
    assert item.note.startswith("never gave the command `python3 -m unittest`; what it proposed failed")
    assert "`python3 tests/run_all.py` (exit 2: " in item.note and "No such file" in item.note
    assert json.loads(executed.model_dump_json())["commands"][0]["exit_code"] == 2
