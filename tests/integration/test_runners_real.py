"""Change tasks graded through the test runners real projects use, each run for real.

Every case is a small project with a bug, a hidden test, a reference fix and the command
its own docs would give (`uv run --frozen pytest`, `poetry run pytest`, `hatch run pytest`,
`python3 -m pytest`, `vitest run`, `vp test run`, `jest`, `go test ./...`, `gotestsum`, `cargo test`,
`cargo nextest run`). `docdelta selftest` must hold every leg with `.docdelta.yml`'s
environment: the reference passes, the untouched and the tampered checkouts fail with
tests that ran, and the leg notes name the runner that counted them.

The tools come from PyPI (uv, poetry, hatch, cargo-nextest), npm (vitest, vite-plus,
jest, jest-junit) and Debian (go, gotestsum), installed under .runners/ by
scripts/provision-runners.sh; cargo is the machine's. A missing tool skips its case,
and FAILS under DOCDELTA_REQUIRE_RUNNERS=1 (set by .ci/run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import yaml
from gitrepo import GitRepo, git

from docdelta.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
RUNNERS = Path(os.environ.get("DOCDELTA_RUNNERS", ROOT / ".runners"))
PY_TOOLS = RUNNERS / "py"  # uv, poetry, hatch, cargo-nextest
PY_ENV = RUNNERS / "pyenv"  # the project's environment: Debian's python3 + pytest
NODE_MODULES = RUNNERS / "node" / "node_modules"
VP_MODULES = RUNNERS / "vp" / "node_modules"  # vite-plus 0.2.1 + vitest 4.1.9, as logfire-js pins
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
OWN_PYTHON = sorted({sys.prefix, sys.base_prefix})
"""poetry and hatch are Python programs of this interpreter's installation."""


def need(*paths: Path | str | None) -> None:
    """Skip unless every tool is there; under DOCDELTA_REQUIRE_RUNNERS=1, fail instead."""
    missing = [str(p) for p in paths if p is None or not Path(p).exists()]
    if not missing:
        return
    why = f"missing {', '.join(missing)}: run scripts/provision-runners.sh"
    if os.environ.get("DOCDELTA_REQUIRE_RUNNERS") == "1":
        pytest.fail(f"DOCDELTA_REQUIRE_RUNNERS=1 but {why}", pytrace=False)
    pytest.skip(why)


@dataclass(frozen=True)
class Case:
    """One project: `buggy`/`fixed` map the one source file that differs; `config` is the
    `.docdelta.yml` environment (sandbox paths and env, docker base)."""

    command: str
    files: Mapping[str, str]
    hidden: Mapping[str, str]
    source: str
    fixed: str
    runner: str
    config: Mapping[str, object] = field(default_factory=dict)


def run_selftest(
    tmp_path: Path, case: Case, sandbox: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """Build the project, write the task, run `docdelta selftest`: (exit code, output)."""
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({**case.files, ".docdelta.yml": yaml.safe_dump(dict(case.config))})
    (repo.path / case.source).write_text(case.fixed)
    reference = git(repo.path, "diff")
    git(repo.path, "checkout", "--", case.source)
    tasks = tmp_path / "tasks"
    for path, text in case.hidden.items():
        (tasks / "fix" / "hidden" / path).parent.mkdir(parents=True, exist_ok=True)
        (tasks / "fix" / "hidden" / path).write_text(text)
    (tasks / "fix" / "reference.patch").write_text(reference)
    task = {
        "id": "fix",
        "kind": "change",
        "prompt": "The tests fail. Fix the code.",
        "gold": {"validation": {"hidden": sorted(case.hidden), "command": case.command, "timeout_s": 300}},
        "reviewed": True,
    }
    (tasks / "fix.yaml").write_text(yaml.safe_dump(task))
    args = ["selftest", "--repo", str(repo.path), "--tasks", str(tasks), "--flake-runs", "1"]
    code = main([*args, "--sandbox", sandbox])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def selftest(tmp_path: Path, case: Case, sandbox: str, capsys: pytest.CaptureFixture[str]) -> str:
    """`run_selftest`, every leg of which must hold."""
    code, out = run_selftest(tmp_path, case, sandbox, capsys)
    assert code == 0, out
    assert out.startswith("ok   fix\n"), out
    assert "FAIL" not in out, out
    return out


def assert_counted(out: str, runner: str, *, passed: int, failed: int) -> None:
    """The reference leg passed and the untouched leg failed, both counted by `runner`."""
    assert f"reference passes: grader said pass (wanted pass); {runner}: {passed} passed, 0 failed" in out
    assert f"untouched checkout fails: grader said fail (wanted fail); {runner}: " in out
    assert f"{runner}: {passed - failed} passed, {failed} failed" in out, out


# ------------------------------------------------------------------- python
PY_FILES = {
    "pyproject.toml": textwrap.dedent("""\
        [project]
        name = "calc"
        version = "0.1"
        requires-python = ">=3.11"

        [tool.pytest.ini_options]
        pythonpath = ["."]

        [tool.hatch.envs.default]
        skip-install = true
        """),
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a - b\n",
}
PY_HIDDEN = {
    "tests/test_ops.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
}
PY_ENVIRONMENT = {
    "sandbox": {
        "paths": [str(PY_TOOLS), str(PY_ENV), *OWN_PYTHON],
        "env": {
            "PATH": f"{PY_TOOLS}/bin:{SYSTEM_PATH}",
            # The sandbox is offline: the project's environment is built outside and shown
            # read-only; each launcher is pointed at it and told not to sync.
            "UV_PROJECT_ENVIRONMENT": str(PY_ENV),
            "UV_NO_SYNC": "1",
            "UV_OFFLINE": "1",
            "VIRTUAL_ENV": str(PY_ENV),
            "HATCH_ENV_TYPE_VIRTUAL_PATH": str(PY_ENV),
        },
    },
    "docker": {"base": os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")},
}


def python_case(command: str) -> Case:
    return Case(
        command=command,
        files=PY_FILES,
        hidden=PY_HIDDEN,
        source="calc/ops.py",
        fixed="def add(a, b):\n    return a + b\n",
        runner="pytest",
        config=PY_ENVIRONMENT,
    )


@pytest.mark.parametrize(
    "command",
    [
        "uv run --frozen pytest -q tests/test_ops.py",
        "poetry run pytest -q tests",
        "hatch run pytest -q tests",
        f"{PY_ENV}/bin/python -m pytest -q",
        "python3 -m pytest -p no:cacheprovider",
    ],
)
def test_pytest_behind_its_launchers_is_graded_by_junit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    launcher = command.split(maxsplit=1)[0]
    need(PY_ENV / "bin" / "pytest", *([PY_TOOLS / "bin" / launcher] if "/" not in launcher else []))
    case = python_case(command)
    if command.startswith("python3"):  # the environment's interpreter comes first on PATH
        env = {"PATH": f"{PY_ENV}/bin:{SYSTEM_PATH}"}
        case = replace(case, config={"sandbox": {"paths": [str(PY_ENV)], "env": env}})
    out = selftest(tmp_path, case, "local", capsys)
    assert_counted(out, "pytest", passed=2, failed=1)


@pytest.mark.parametrize(
    ("sandbox", "says"),
    [
        ("local", "uv: No such file or directory"),
        pytest.param("docker", "uv: No such file or directory", marks=pytest.mark.docker),
    ],
)
def test_a_missing_launcher_is_named_and_fails_the_selftest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sandbox: str, says: str
) -> None:
    """The sandbox has no uv: no test runs in any leg, so the must-fail legs do not hold
    (they once said `ok`), and the message quotes why the command could not run."""
    base = {"docker": {"base": os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")}}
    case = replace(python_case("uv run --frozen pytest -q"), config=base)
    code, out = run_selftest(tmp_path, case, sandbox, capsys)
    assert code == 2, out
    assert "FAIL untouched checkout fails: no test ran, so this leg proves nothing" in out
    assert "FAIL reference passes: grader said fail (wanted pass)" in out
    assert "last lines of output:\n" in out
    assert says in out, out


def test_a_command_that_starts_no_known_runner_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make test` could run anything: with no declared report, no test it runs could be
    counted, so the task is refused before any sandbox starts (exit 2, saying what to do)."""
    code, out = run_selftest(tmp_path, replace(python_case("make test"), config={}), "local", capsys)
    assert code == 2, out
    assert "gold.validation.command 'make test' starts no test runner docdelta recognises" in out
    assert "gold.validation.report" in out


# ----------------------------------------------------------------------- js
def js_config(modules: Path = NODE_MODULES) -> dict[str, object]:
    return {
        "sandbox": {
            "paths": [str(modules)],
            # node_modules lives outside the checkout: on PATH for the binaries, NODE_PATH
            # for the modules the tests and reporters require.
            "env": {"PATH": f"{modules}/.bin:{SYSTEM_PATH}", "NODE_PATH": str(modules)},
        }
    }


def test_vitest_is_graded_by_its_junit_reporter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need(NODE_MODULES / ".bin" / "vitest", shutil.which("node"))
    case = Case(
        command="vitest run --globals",
        files={"package.json": '{"name": "calc", "private": true}\n', "src/calc.mjs": JS_BUGGY_ESM},
        hidden={"src/calc.test.mjs": JS_TEST_ESM},
        source="src/calc.mjs",
        fixed=JS_BUGGY_ESM.replace("a - b", "a + b"),
        runner="vitest",
        config=js_config(),
    )
    assert_counted(selftest(tmp_path, case, "local", capsys), "vitest", passed=2, failed=1)


def test_vite_plus_vp_test_is_graded_as_vitest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """logfire-js runs its tests with Vite+ (`vp test`), which is Vitest with its options."""
    need(VP_MODULES / ".bin" / "vp", shutil.which("node"))
    case = Case(
        command="vp test run --globals",
        files={"package.json": '{"name": "calc", "private": true}\n', "src/calc.mjs": JS_BUGGY_ESM},
        hidden={"src/calc.test.mjs": JS_TEST_ESM},
        source="src/calc.mjs",
        fixed=JS_BUGGY_ESM.replace("a - b", "a + b"),
        runner="vitest",
        config=js_config(VP_MODULES),
    )
    assert_counted(selftest(tmp_path, case, "local", capsys), "vitest", passed=2, failed=1)


def test_jest_is_graded_by_jest_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need(NODE_MODULES / ".bin" / "jest", NODE_MODULES / "jest-junit", shutil.which("node"))
    case = Case(
        command="jest --ci",
        files={"package.json": '{"name": "calc", "private": true}\n', "src/calc.js": JS_BUGGY_CJS},
        hidden={"src/calc.test.js": JS_TEST_CJS},
        source="src/calc.js",
        fixed=JS_BUGGY_CJS.replace("a - b", "a + b"),
        runner="jest",
        config=js_config(),
    )
    assert_counted(selftest(tmp_path, case, "local", capsys), "jest", passed=2, failed=1)


JS_BUGGY_ESM = "export function add(a, b) {\n  return a - b;\n}\n"
JS_TEST_ESM = (
    'import { add } from "./calc.mjs";\n\n'
    'test("adds", () => {\n  expect(add(2, 3)).toBe(5);\n});\n'
    'test("zero", () => {\n  expect(add(0, 0)).toBe(0);\n});\n'
)
JS_BUGGY_CJS = "exports.add = function (a, b) {\n  return a - b;\n};\n"
JS_TEST_CJS = JS_TEST_ESM.replace('import { add } from "./calc.mjs";', 'const { add } = require("./calc");')


# ----------------------------------------------------------------------- go
def go_root() -> Path | None:
    found = shutil.which("go")
    return Path(found).resolve().parents[1] if found else None


def go_case(command: str) -> Case:
    root = go_root()
    assert root is not None
    return Case(
        command=command,
        files={"go.mod": "module example.com/calc\n\ngo 1.19\n", "calc.go": GO_BUGGY},
        hidden={"calc_test.go": GO_TEST},
        source="calc.go",
        fixed=GO_BUGGY.replace("a - b", "a + b"),
        runner=command.split(maxsplit=1)[0] if command.startswith("gotestsum") else "go test",
        config={
            # The same environment serves both sandboxes: Debian's toolchain, shown read-only
            # at its own path, and caches on the sandbox's own /tmp.
            "sandbox": {
                # Debian's GOROOT links src/ and pkg/ to /usr/share/go-*: both are named.
                "paths": sorted({str(root), str((root / "src").resolve().parent)}),
                "env": {
                    "PATH": f"{root}/bin:{SYSTEM_PATH}",
                    "GOROOT": str(root),
                    "GOCACHE": "/tmp/go-cache",
                    # The container's /tmp is noexec: test binaries are built in the tools dir.
                    "GOTMPDIR": "/workspace/tools",
                    "GOPATH": "/tmp/go-path",
                    "GOPROXY": "off",
                    "GOFLAGS": "-mod=mod",
                },
            },
            "docker": {"base": os.environ.get("DOCDELTA_TEST_IMAGE", "docdelta-base:latest")},
        },
    )


GO_BUGGY = "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"
GO_TEST = (
    'package calc\n\nimport "testing"\n\n'
    "func TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n\n"
    "func TestZero(t *testing.T) {\n\tif Add(0, 0) != 0 {\n\t\tt.Fatal(Add(0, 0))\n\t}\n}\n"
)


def test_go_test_is_graded_by_its_json_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need(go_root())
    out = selftest(tmp_path, go_case("go test ./..."), "local", capsys)
    assert_counted(out, "go test", passed=2, failed=1)


def test_gotestsum_is_graded_by_its_junitfile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need(go_root(), shutil.which("gotestsum"))
    case = go_case("gotestsum --format standard-verbose -- ./...")
    assert_counted(selftest(tmp_path, case, "local", capsys), "gotestsum", passed=2, failed=1)


# -------------------------------------------------------------------- cargo
def cargo_config() -> dict[str, object]:
    cargo = shutil.which("cargo")
    assert cargo is not None
    rustup_home = Path(os.environ.get("RUSTUP_HOME", Path.home() / ".rustup"))
    return {
        "sandbox": {
            "paths": [str(Path(cargo).parent), str(rustup_home), str(PY_TOOLS / "bin")],
            "env": {
                "PATH": f"{Path(cargo).parent}:{PY_TOOLS}/bin:{SYSTEM_PATH}",
                "RUSTUP_HOME": str(rustup_home),
                "CARGO_HOME": "/tmp/cargo-home",
                "CARGO_NET_OFFLINE": "true",
            },
        }
    }


def cargo_case(command: str, runner: str) -> Case:
    return Case(
        command=command,
        files={
            "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": RUST_BUGGY,
        },
        hidden={"tests/hidden.rs": RUST_TEST},
        source="src/lib.rs",
        fixed=RUST_BUGGY.replace("a - b", "a + b"),
        runner=runner,
        config=cargo_config(),
    )


RUST_BUGGY = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n"
RUST_TEST = (
    "use calc::add;\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n}\n\n"
    "#[test]\nfn zero() {\n    assert_eq!(add(0, 0), 0);\n}\n"
)


def test_cargo_test_is_graded_by_libtest_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need(shutil.which("cargo"))
    out = selftest(tmp_path, cargo_case("cargo test", "cargo test"), "local", capsys)
    assert_counted(out, "cargo test", passed=2, failed=1)


def test_cargo_nextest_is_graded_by_its_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need(shutil.which("cargo"), PY_TOOLS / "bin" / "cargo-nextest")
    out = selftest(tmp_path, cargo_case("cargo nextest run --no-fail-fast", "cargo nextest"), "local", capsys)
    assert_counted(out, "cargo nextest", passed=2, failed=1)


# ------------------------------------------------------------------- docker
@pytest.mark.docker
def test_one_environment_serves_both_sandboxes_for_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need(go_root())
    case = go_case("go test ./...")
    for sandbox in ("local", "docker"):
        out = selftest(tmp_path / sandbox, case, sandbox, capsys)
        assert_counted(out, "go test", passed=2, failed=1)


@pytest.mark.docker
def test_uv_run_pytest_in_the_docker_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The project environment (Debian's python3 + pytest, under .runners/) and uv, shown
    read-only at their host paths in the container, as the local sandbox shows them."""
    need(PY_TOOLS / "bin" / "uv", PY_ENV / "bin" / "pytest")
    case = python_case("uv run --frozen pytest -q tests/test_ops.py")
    out = selftest(tmp_path, case, "docker", capsys)
    assert_counted(out, "pytest", passed=2, failed=1)


def test_provisioned_python_environment_uses_the_system_interpreter() -> None:
    """The project environment must run in both sandboxes: its interpreter is Debian's
    /usr/bin/python3, which the local sandbox's /usr and the base image both hold."""
    need(PY_ENV / "bin" / "python")
    real = subprocess.run(
        [str(PY_ENV / "bin" / "python"), "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert real.stdout.strip() == "/usr"
