"""`.docdelta.yml`: read from a commit (the trusted base), defaults, and errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import GitRepo
from pydantic import ValidationError

from docdelta.config import (
    ProjectConfig,
    SandboxConfig,
    check_exposure,
    load_config_file,
    load_model,
    load_project_config,
    matcher,
)
from docdelta.errors import ConfigError
from docdelta.git import Repo


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "p")
    sha = g.commit({"README.md": "r\n"})
    config = load_project_config(Repo(g.path), sha)
    assert config == ProjectConfig()
    assert config.tasks == ".docdelta/tasks"


def test_config_is_read_at_the_given_commit_not_the_work_tree(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "p")
    base = g.commit({".docdelta.yml": "tasks: eval/tasks\ninstructions:\n  include: ['docs/ai/*.md']\n"
                                      "  exclude: ['vendor/**']\nstrip: ['hidden/**']\n"})  # fmt: skip
    g.commit({".docdelta.yml": "tasks: pr/controls/this\n"})
    g.write({".docdelta.yml": "garbage: ["})
    config = load_project_config(Repo(g.path), base)
    assert config.tasks == "eval/tasks"
    assert config.strip == ["hidden/**"]
    m = matcher(config)
    assert m.families("docs/ai/x.md") == ["custom"]
    assert m.families("vendor/AGENTS.md") == []
    assert "/eval/tasks/**" in config.checkout_strip and "hidden/**" in config.checkout_strip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "tasks: t\n\ninstrutions:\n  include: []\n",
            r"\.docdelta\.yml \(at \w+\):3: field 'instrutions': unknown",
        ),
        (
            "instructions:\n  include: nope-not-a-list\n",
            r":2: field 'instructions\.include': Input should be a valid list",
        ),
        ("strip:\n  - ok/**\n  - ''\n", r":3: field 'strip\[1\]': Value error, empty glob"),
        ("tasks: ../outside\n", r":1: field 'tasks': .*inside the repository"),
        ("tasks: [unclosed\n", r"\.docdelta\.yml \(at \w+\):2: invalid YAML"),
        ("sandbox:\n  paths: [/opt/ok, relative/venv]\n", r":2: field 'sandbox\.paths': .*absolute path"),
        ("sandbox:\n  env: {'BAD NAME': x}\n", r":2: field 'sandbox\.env': .*not an environment variable"),
        ("sandbox:\n  mounts: [/opt]\n", r":2: field 'sandbox\.mounts': unknown"),
        ("sandbox:\n  pids: 2\n", r":2: field 'sandbox\.pids': .*greater than or equal to 16"),
    ],
)
def test_malformed_config_names_file_field_and_line(tmp_path: Path, text: str, message: str) -> None:
    g = GitRepo.init(tmp_path / "p")
    sha = g.commit({".docdelta.yml": text})
    with pytest.raises(ConfigError, match=message) as info:
        load_project_config(Repo(g.path), sha)
    assert ".docdelta.yml" in info.value.hint


@pytest.mark.parametrize(
    "text", ["[" * 50_000 + "]" * 50_000, "a: " + "{b: " * 20_000 + "1" + "}" * 20_000, "- " * 30_000 + "x"]
)
def test_deeply_nested_yaml_is_a_clear_error_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ConfigError, match=r"\.docdelta\.yml: nested too deeply"):
        load_model(text, ProjectConfig, source=".docdelta.yml", error=ConfigError, hint="h")


def test_an_oversized_file_is_refused_before_it_is_parsed() -> None:
    huge = "k: v\n" + "".join(f"x{i}: {i}\n" for i in range(200_000))
    with pytest.raises(ConfigError, match=r"characters, over the 1,000,000"):
        load_model(huge, ProjectConfig, source=".docdelta.yml", error=ConfigError, hint="h")


def test_sandbox_paths_expand_home_and_may_not_show_protected_directories(tmp_path: Path) -> None:
    config = SandboxConfig(paths=["~/.cache/uv", str(tmp_path / "venv")])
    assert config.host_paths() == [Path.home().resolve() / ".cache/uv", (tmp_path / "venv").resolve()]
    check_exposure(config, {"repository": tmp_path / "repo"})  # a sibling is fine
    for protected in (tmp_path / "venv", tmp_path / "venv" / "sub", tmp_path):
        with pytest.raises(ConfigError, match=r"field 'sandbox\.paths\[1\]' .* the workdir") as err:
            check_exposure(config, {"workdir": protected})
        assert "outside the repository" in err.value.hint


def test_sandbox_limits_reach_every_runs_spec(tmp_path: Path) -> None:
    g = GitRepo.init(tmp_path / "p")
    sha = g.commit({".docdelta.yml": "sandbox:\n  memory_mb: 256\n  pids: 64\n  workspace_mb: 100\n"})
    spec = load_project_config(Repo(g.path), sha).sandbox.spec("gateway")
    assert (spec.network, spec.memory_mb, spec.pids, spec.workspace_mb) == ("gateway", 256, 64, 100)
    default = load_project_config(Repo(g.path), g.commit({".docdelta.yml": "tasks: t\n"})).sandbox.spec(
        "none"
    )
    assert (default.memory_mb, default.pids, default.workspace_mb) == (2048, 512, 1024)


def test_the_noise_band_is_a_project_setting_within_0_and_1() -> None:
    assert ProjectConfig.model_validate({"noise_band": 0.1}).noise_band == 0.1
    assert ProjectConfig().noise_band is None  # the CLI's and the Action's default then
    with pytest.raises(ValidationError, match="noise_band"):
        ProjectConfig.model_validate({"noise_band": 1.5})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("noise_bnad: 0.1\n", r":1: field 'noise_bnad': unknown field; did you mean 'noise_band'\?"),
        ("sandbox:\n  pathz: [/opt]\n", r":2: field 'sandbox\.pathz': unknown field; did you mean 'paths'\?"),
        (
            "sandbox:\n  zzz: 1\n",
            r":2: field 'sandbox\.zzz': unknown field; the fields here: "
            r"paths, env, workspace, memory_mb, pids, workspace_mb\n",
        ),
    ],
)
def test_a_misspelt_field_names_the_field_it_resembles(tmp_path: Path, text: str, message: str) -> None:
    g = GitRepo.init(tmp_path / "p")
    sha = g.commit({".docdelta.yml": text})
    with pytest.raises(ConfigError, match=message):
        load_project_config(Repo(g.path), sha)


def test_a_wrong_type_deep_in_the_config_gets_no_list_of_top_level_fields(tmp_path: Path) -> None:
    """The error line names the field and what it needs; a hint listing `tasks, docker, ...`
    says nothing about `gateway.prices.my-llm.input`: the hint points to every field's docs."""
    path = tmp_path / "c.yml"
    path.write_text("gateway:\n  prices:\n    my-llm: {input: cheap, output: 0}\n")
    with pytest.raises(
        ConfigError, match=r":3: field 'gateway\.prices\.my-llm\.input': .*valid number"
    ) as err:
        load_config_file(path)
    assert "fields:" not in err.value.hint and "docs/configuration.md" in err.value.hint
