"""Where the kernel refuses bubblewrap a user namespace, `docdelta run --sandbox local` stops
with the fix (exit 2, no traceback), never a weaker sandbox.

The refusal is real: the `bwrap` on PATH is a fake wrapper that runs the real bubblewrap
under a seccomp filter denying it new namespaces (tests/nonamespace.py), so bubblewrap
itself fails as it does on such a machine. AppArmor's restriction is simulated by pointing
the probe at a sysctl file of our own holding 1 (or 0), and, since the restriction never
applies to root and these tests may run as root, by judging the failure as a normal user's."""

from __future__ import annotations

import io
import json
import platform
import shutil
import sys
from pathlib import Path

import pytest
from fakegithub import FakeGitHub, event_path
from gitrepo import GitRepo

from docdelta.action import main as action_main
from docdelta.cli.main import main
from docdelta.demo import build_demo_repo, examples_dir
from docdelta.errors import ExitCode
from docdelta.sandbox import userns

pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "aarch64") or shutil.which("bwrap") is None,
    reason="needs bubblewrap and a seccomp filter for this architecture",
)


def _denied_bwrap(tmp_path: Path) -> Path:
    """A directory whose `bwrap` (a fake wrapper) execs the real one under the filter."""
    real = shutil.which("bwrap")
    helper = Path(__file__).resolve().parents[1] / "nonamespace.py"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "bwrap"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {helper} {real} "$@"\n')
    wrapper.chmod(0o755)
    return bin_dir


def _run(tmp_path: Path) -> int:
    demo = examples_dir()
    repo = GitRepo.init(tmp_path / "proj")
    shutil.copytree(demo / "repo", repo.path, dirs_exist_ok=True)
    repo.commit({}, message="base")
    repo.commit({"AGENTS.md": (demo / "head" / "AGENTS.md").read_text()}, message="head")
    return main([
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta" / "tasks"), "--workdir", str(tmp_path / "work"),
        "--repeats", "1", "--sandbox", "local",
    ])  # fmt: skip


@pytest.mark.parametrize("restricted", [True, False])
def test_a_refused_user_namespace_stops_the_run_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, restricted: bool
) -> None:
    monkeypatch.setenv("PATH", f"{_denied_bwrap(tmp_path)}:{Path(sys.executable).parent}:/usr/bin:/bin")
    sysctl = tmp_path / "apparmor_restrict_unprivileged_userns"
    sysctl.write_text("1\n" if restricted else "0\n")
    monkeypatch.setattr(userns, "APPARMOR_SYSCTL", sysctl)
    monkeypatch.setattr(userns, "privileged", lambda: False)  # judged as a normal user's bwrap would be

    assert _run(tmp_path) == ExitCode.BAD_INPUT

    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert any(words in err for words in userns.USERNS_DENIED)  # the real bubblewrap's words
    assert "--sandbox docker" in err
    if restricted:
        assert "AppArmor restricts unprivileged user namespaces" in err
        assert f"profile docdelta-bwrap {tmp_path / 'bin' / 'bwrap'} flags=(unconfined)" in err
        assert "sudo apparmor_parser -r /etc/apparmor.d/docdelta-bwrap" in err
    else:
        assert "AppArmor restricts" not in err
        assert "allow unprivileged user namespaces" in err


def test_in_the_action_the_fix_names_the_sandbox_input_not_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same refusal through the Action (real PyGithub against the fake GitHub server, the
    recorded pull_request payload on the demo's commits): its hint speaks in inputs."""
    monkeypatch.setenv("PATH", f"{_denied_bwrap(tmp_path)}:{Path(sys.executable).parent}:/usr/bin:/bin")
    sysctl = tmp_path / "apparmor_restrict_unprivileged_userns"
    sysctl.write_text("1\n")
    monkeypatch.setattr(userns, "APPARMOR_SYSCTL", sysctl)
    monkeypatch.setattr(userns, "privileged", lambda: False)
    demo = build_demo_repo(tmp_path / "ws" / "repo")
    payload = json.loads(event_path("pull_request.opened").read_text())
    payload["pull_request"]["base"]["sha"] = demo.base_sha  # EDIT: the demo's commits
    payload["pull_request"]["head"]["sha"] = demo.head_sha
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload))
    with FakeGitHub() as fake:
        fake.add_pull(2, demo.base_sha, demo.head_sha, [("AGENTS.md", "modified")])
        env = {
            "GITHUB_REPOSITORY": fake.repo,
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_WORKSPACE": str(demo.path),
            "GITHUB_API_URL": fake.base_url,
            "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
            "INPUT_GITHUB-TOKEN": fake.token,
            "INPUT_AGENT": "fake",
            "INPUT_SANDBOX": "local",
            "INPUT_RESULTS-PATH": str(tmp_path / "results"),
        }
        out = io.StringIO()
        assert action_main.main(env, out) == ExitCode.BAD_INPUT
        summary = fake.check_runs[-1]["output"]["summary"]
    assert "AppArmor restricts unprivileged user namespaces" in summary
    assert "`sandbox: docker`" in summary and "--sandbox" not in summary + out.getvalue()
    assert "Traceback" not in out.getvalue()
