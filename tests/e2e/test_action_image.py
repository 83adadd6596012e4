"""The action image: `docker build` from the Dockerfile, then `docdelta action` inside it.

The container gets what the Actions runner gives a Docker action: the workspace
mounted at /github/workspace, the event payload, `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY`
files, and `INPUT_*` variables as the runner spells them. It talks to the fake GitHub
server on the host's loopback (host network). The agent is the fake one in the Docker
sandbox: with the daemon's socket mounted, as on a GitHub runner, its containers are
siblings of the action's, and the checkout reaches them through the Docker API (an archive
on the container's attached stdin), never by a bind mount of a path the daemon could not see.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from actionimage import BASE_IMAGE, IMAGE, build_action_image, container_args, runner_env, runner_home
from fakegithub import FakeGitHub, event_path
from gitrepo import demo_repo

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


def test_the_image_builds_and_runs_the_action_against_the_fake_server(tmp_path: Path) -> None:
    build_action_image()
    # The sandbox image: the Action's default must be pullable on GitHub, so name the local one.
    demo = demo_repo(tmp_path / "workspace", {".docdelta.yml": f"docker: {{base: '{BASE_IMAGE}'}}\n"})
    payload = json.loads(event_path("pull_request.opened").read_text())
    payload["pull_request"]["base"]["sha"] = demo.base_sha  # EDIT: the demo repository's commits
    payload["pull_request"]["head"]["sha"] = demo.head_sha
    home = tmp_path / "home"
    runner_home(home, payload)

    with FakeGitHub() as fake:
        fake.add_pull(2, demo.base_sha, demo.head_sha, [("AGENTS.md", "modified")])
        env = runner_env(
            fake,
            {
                "INPUT_AGENT": "fake",
                "INPUT_API-KEY": "sk-image-test-secret",
                "INPUT_REPEATS": "1",
                "INPUT_SANDBOX": "docker",
                "INPUT_RESULTS-PATH": "/github/home/results",
            },
        )
        args = container_args(demo.path, home)
        for key in env:
            args += ["-e", key]
        proc = subprocess.run(
            [*args, IMAGE],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, log[-3000:]
        assert "Traceback" not in log and log.count("sk-image-test-secret") == 1  # only in ::add-mask::
        assert len(fake.comments) == 1 and fake.comments[0]["body"].startswith("<!-- docdelta:docdelta -->")
        check = fake.check_runs[-1]
        assert check["status"] == "completed" and check["conclusion"] in ("success", "neutral", "failure")
        outputs = (home / "output").read_text()
        assert "verdict<<" in outputs and "comment-url<<" in outputs
        assert "docdelta scorecard" in (home / "summary.md").read_text()
        assert "isolation: docker-none" in fake.comments[0]["body"]
