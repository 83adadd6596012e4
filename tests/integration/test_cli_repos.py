"""`docdelta run --repos FILE`: two small repositories through the real CLI, the fake agent in
the local sandbox; each gets its workdir and scorecard, the suite its pooled verdict, and a
rerun reuses every finished run. Bad files are refused before anything runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from gitrepo import GitRepo, demo_repo

from docdelta.cli.main import main
from docdelta.demo import examples_dir
from docdelta.errors import ExitCode
from docdelta.results.layout import MANIFEST_FILE, SUITE_FILE
from docdelta.scorecard.models import SuiteRepoState, SuiteSummary

FLAGS = ("--conditions", "base,head", "--repeats", "2")


def _old_docs_repo(path: Path) -> GitRepo:
    """The demo project at its old AGENTS.md, one commit: a template has something to change."""
    source = examples_dir() / "repo"
    repo = GitRepo.init(path)
    repo.commit({p.relative_to(source).as_posix(): p.read_bytes() for p in source.rglob("*") if p.is_file()})
    return repo


def _template(tmp_path: Path) -> Path:
    template = tmp_path / "template"
    template.mkdir()
    shutil.copyfile(examples_dir() / "head" / "AGENTS.md", template / "AGENTS.md")
    return template


def _run(repos: Path, workdir: Path, *more: str) -> int:
    return main(["run", "--repos", str(repos), "--workdir", str(workdir), *FLAGS, *more])


def test_a_template_over_two_repositories_scores_each_pools_them_and_a_rerun_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo_repo(tmp_path / "alpha", {})  # two commits: old docs, then the demo's better ones
    _old_docs_repo(tmp_path / "beta")
    _template(tmp_path)
    repos = tmp_path / "repos.yml"
    repos.write_text(
        "template: template\nrepos:\n"
        "  - {path: alpha, base: HEAD~1}\n"  # the template replaces alpha's old docs, not its new ones
        "  - {name: beta-svc, path: beta}\n"
    )
    workdir = tmp_path / "work"
    assert _run(repos, workdir) == ExitCode.OK
    first = capsys.readouterr()
    for name in ("alpha", "beta-svc"):  # each repository: its own plan and scorecard
        assert (workdir / name / MANIFEST_FILE).is_file()
        assert f"# {name}\n" in first.out
        assert f"results: {workdir / name} (16 ran, 0 reused)" in first.err
    assert first.out.count("docdelta scorecard") == 2
    suite = SuiteSummary.model_validate_json((workdir / SUITE_FILE).read_text())
    assert [(r.name, r.state, r.tasks) for r in suite.repos] == [
        ("alpha", SuiteRepoState.evaluated, 4),
        ("beta-svc", SuiteRepoState.evaluated, 4),
    ]
    assert all(r.verdict is not None for r in suite.repos)
    assert suite.pooled is not None and suite.pooled.tasks == 8  # every task of both, one family
    assert "## All repositories" in first.out and "**Pooled: " in first.out
    manifest = json.loads((workdir / "alpha" / MANIFEST_FILE).read_text())
    assert manifest["source_sha"] == manifest["base_sha"] != manifest["head_sha"]  # the code is alpha's own

    assert _run(repos, workdir) == ExitCode.OK  # the template's commit is the same: the plan resumes
    again = capsys.readouterr()
    for name in ("alpha", "beta-svc"):
        assert f"results: {workdir / name} (0 ran, 16 reused)" in again.err
    assert SuiteSummary.model_validate_json((workdir / SUITE_FILE).read_text()) == suite


def test_refs_per_repository_and_one_without_a_change_stays_out_of_the_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo_repo(tmp_path / "alpha", {})
    _old_docs_repo(tmp_path / "beta")
    repos = tmp_path / "repos.yml"
    repos.write_text(
        "repos:\n  - {path: alpha, base: HEAD~1, head: HEAD}\n  - {path: beta, base: HEAD, head: HEAD}\n"
    )
    workdir = tmp_path / "work"
    assert _run(repos, workdir, "--task", "run-tests") == ExitCode.OK
    out = capsys.readouterr().out
    assert "nothing to evaluate: no agent instruction file changed" in out
    suite = SuiteSummary.model_validate_json((workdir / SUITE_FILE).read_text())
    assert [(r.name, r.state) for r in suite.repos] == [
        ("alpha", SuiteRepoState.evaluated),
        ("beta", SuiteRepoState.no_change),
    ]
    assert suite.pooled is not None and suite.pooled.tasks == 1
    assert "| beta | nothing to evaluate (no instruction file changed) |" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("repos:\n  - {path: alpha, bsae: HEAD}\n", ":2: field 'repos[0].bsae': unknown field"),
        ("repos:\n  - {path: gamma, head: HEAD}\n", "repos[0]: path 'gamma' is no git repository"),
        ("repos: []\n", "field 'repos'"),
        ("repos:\n  - {path: alpha}\n", "repos[0] (alpha): has no head, and the file no template"),
        (
            "template: template\nrepos:\n  - {path: alpha, head: HEAD}\n",
            "repos[0] (alpha): has head, and the file a template",
        ),
        ("template: nowhere\nrepos:\n  - {path: alpha}\n", "template 'nowhere' is not a directory"),
        ("repos:\n  - {path: alpha, head: nope}\n", "repos[0] (alpha): "),
        ("repos:\n  - {path: alpha, head: HEAD, tasks: none}\n", "repos[0] (alpha): tasks directory"),
        ("repos:\n  - {path: alpha, head: HEAD}\n  - {path: ./alpha, head: HEAD}\n", "name 'alpha' is taken"),
    ],
)
def test_a_bad_repos_file_is_refused_naming_the_file_and_field_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    demo_repo(tmp_path / "alpha", {})
    _template(tmp_path)
    repos = tmp_path / "repos.yml"
    repos.write_text(text)
    workdir = tmp_path / "work"
    assert _run(repos, workdir) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"docdelta: error: --repos {repos}" in err and message in err
    assert "Traceback" not in err
    assert not workdir.exists()


def test_a_missing_file_and_flags_of_one_repository_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = tmp_path / "work"
    assert _run(tmp_path / "none.yml", workdir) == ExitCode.BAD_INPUT
    assert f"--repos {tmp_path / 'none.yml'}: no such file" in capsys.readouterr().err
    assert _run(tmp_path / "none.yml", workdir, "--base", "main", "--tasks", "t") == ExitCode.BAD_INPUT
    assert "--base, --tasks cannot go with it" in capsys.readouterr().err
    assert (
        main(["run", "--workdir", str(workdir), "--base", "HEAD~1", "--head", "HEAD"]) == ExitCode.BAD_INPUT
    )
    assert "--tasks is required" in capsys.readouterr().err
