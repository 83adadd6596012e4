"""The Action's `ablate` input end to end on a `workflow_dispatch` payload: `action_main.main` with
real PyGithub against the fake GitHub server, the bundled demo as the runner's checkout, the
fake agent and the local sandbox (tests/e2e/test_act.py runs the example workflow under act).

A dispatch has no pull request: the per-section table goes to the job summary and the
`ablation` output, nothing is posted, and the report is the one `docdelta ablate` writes for
the same request. A bad input fails the step (exit 2) naming the input, again posting nothing.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakegithub import FakeGitHub, event_path
from gitrepo import git

from docdelta.action import main as action_main
from docdelta.action.settings import input_variable
from docdelta.cli.main import main
from docdelta.demo import DemoRepo, build_demo_repo
from docdelta.improve.ablation import AblationReport
from docdelta.results.layout import ABLATION_FILE

pytestmark = pytest.mark.timeout(300)
TASKS = ".docdelta/ablate-tasks"
"""One of the demo's tasks (run-tests, which the `Checks` section carries): 8 runs, not 32."""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    demo = build_demo_repo(tmp_path_factory.mktemp("ws") / "repo")
    (demo.path / TASKS).mkdir()
    (demo.path / TASKS / "run-tests.yaml").write_bytes((demo.tasks_dir / "run-tests.yaml").read_bytes())
    git(demo.path, "add", TASKS)
    git(demo.path, "commit", "-q", "-m", "one task to ablate with")
    return demo


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


def _env(tmp: Path, demo: DemoRepo, fake: FakeGitHub, **inputs: str) -> dict[str, str]:
    event = inputs.pop("event", "workflow_dispatch")
    payload = {"workflow_dispatch": "workflow_dispatch", "pull_request_target": "pull_request.opened"}[event]
    return {
        "GITHUB_REPOSITORY": fake.repo,
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(event_path(payload)),
        "GITHUB_SHA": git(demo.path, "rev-parse", "HEAD").strip(),
        "GITHUB_WORKSPACE": str(demo.path),
        "GITHUB_API_URL": fake.base_url,
        "GITHUB_OUTPUT": str(tmp / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "INPUT_GITHUB-TOKEN": fake.token,
        "INPUT_AGENT": "fake",
        "INPUT_SANDBOX": "local",
        "INPUT_REPEATS": "1",
        "INPUT_TASKS": TASKS,
        "INPUT_ABLATE": "AGENTS.md",
        "INPUT_RESULTS-PATH": str(tmp / "results"),
    } | {input_variable(name): value for name, value in inputs.items()}


def _outputs(tmp: Path) -> dict[str, str]:
    lines = (tmp / "output.txt").read_text().splitlines()
    out, i = {}, 0
    while i < len(lines):
        name, _, delim = lines[i].partition("<<")
        end = lines.index(delim, i + 1)
        out[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    return out


def test_a_dispatched_ablation_writes_the_table_to_the_summary_and_output_as_the_cli_would_and_posts_nothing(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub
) -> None:
    out = io.StringIO()
    assert action_main.main(_env(tmp_path, demo, fake), out) == 0

    outputs = _outputs(tmp_path)
    assert outputs["activity"] == "ablate", out.getvalue()
    report = AblationReport.model_validate_json(outputs["ablation"])
    sections = [s.section.name for s in report.sections]
    assert sections == ["(preamble) Agent notes", "Checks", "Code layout", "Git"]
    assert (report.runs_done, report.single_runs) == (8, 20)  # 8 conditions x 1 task vs 5 x 4 x 1
    assert {s.section.name: s.lowers for s in report.sections if s.lowers} == {"Checks": ["run-tests"]}
    summary = (tmp_path / "summary.md").read_text()
    assert "## docdelta ablation of `AGENTS.md`" in summary and "(saved 60%)" in summary
    assert all(f"| {name} | " in summary for name in sections)
    assert "(8 ran, 0 reused)" in summary
    assert not fake.comments and not fake.check_runs  # no pull request, and an ablation is no gate
    results = Path(outputs["results-path"])
    (written,) = results.glob(f"ablate-*/results/{ABLATION_FILE}")  # what the artifact step uploads
    assert AblationReport.model_validate_json(written.read_text()) == report

    # `docdelta ablate` with the same request gives the same report.
    cli = tmp_path / "cli"
    args = ["ablate", "--repo", str(demo.path), "--file", "AGENTS.md", "--tasks", str(demo.path / TASKS)]
    args += ["--repeats", "1", "--agent", "fake", "--sandbox", "local"]
    assert main([*args, "--workdir", str(cli)]) == 0
    assert AblationReport.model_validate_json((cli / ABLATION_FILE).read_text()) == report


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"ablate": "README.md"}, "input 'ablate': README.md is no instruction file"),
        ({"ablate": "../AGENTS.md"}, "input 'ablate'"),
        ({"ablate-unit": "sentences"}, "input 'ablate-unit'"),
        ({"repeats": "auto"}, "input 'repeats'"),
        ({"plan": "true"}, "input 'plan' cannot be combined with `ablate`"),
        ({"receipt": "true"}, "input 'receipt' cannot be combined with `ablate`"),
        # the fork-safe workflow's event: the PR's tasks and config must not run beside the key
        ({"event": "pull_request_target"}, "input 'ablate' on pull_request_target"),
    ],
)
def test_a_bad_ablation_input_fails_the_step_naming_the_input_and_posts_nothing(
    tmp_path: Path, demo: DemoRepo, fake: FakeGitHub, inputs: dict[str, str], named: str
) -> None:
    out = io.StringIO()

    code = action_main.main(_env(tmp_path, demo, fake, **inputs), out)

    log = out.getvalue()
    assert code == 2 and named in log and "Traceback" not in log
    outputs = _outputs(tmp_path)
    assert outputs["activity"] == "error" and named in outputs["error"]
    assert named in (tmp_path / "summary.md").read_text()
    assert not fake.check_runs and not fake.comments
    assert not list((tmp_path / "results").glob("ablate-*/results/runs"))  # no agent ran
