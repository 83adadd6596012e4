"""`docdelta suggest --model`: the model-written draft, asked through the real gateway
(`python -m docdelta.gateway.server` on loopback) of the scripted model server. A good
reply becomes suggested-model.patch; hostile replies are refused, none of them is written,
and the key appears in no output, file or gateway log."""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gitrepo import GitRepo
from modelserver import ScriptedModelServer
from modelserver.script import ErrorTurn, Script, TextTurn, TurnUsage
from toolchain import sandbox_config

from docdelta.cli.main import main
from docdelta.improve.suggest_model import MAX_DRAFT_BYTES

KEY = "sk-docdelta-suggest-test-key-0123456789"
MODEL = "gpt-4o-mini"
AGENT = """\
import json, os, sys
sys.stdin.read()
docs = open("AGENTS.md").read() if os.path.exists("AGENTS.md") else ""
print(json.dumps({"answer": "ok", "commands": ["tox -e lint"] if "tox -e lint" in docs else ["flake8"]}))
"""
TASK = """\
id: lint
prompt: How do I lint the code?
gold:
  commands: ["tox -e lint"]
reviewed: true
"""
HEAD_DOCS = "# Notes\n\nBe brief.\n"
GOOD = """\
diff --git a/AGENTS.md b/AGENTS.md
--- a/AGENTS.md
+++ b/AGENTS.md
@@ -1,3 +1,5 @@
 # Notes

 Be brief.
+
+Lint with `tox -e lint` before you push.
"""


@dataclass(frozen=True)
class Project:
    repo: GitRepo
    tasks: Path
    workdir: Path
    agent: list[str]

    def run(self, workdir: Path, *extra: str) -> list[str]:
        return [
            "run", "--repo", str(self.repo.path), "--base", "HEAD~1", "--head", "HEAD",
            "--tasks", str(self.tasks), "--workdir", str(workdir), *self.agent, *extra,
        ]  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """One finished base,head run in which head never lints with `tox -e lint`."""
    tmp = tmp_path_factory.mktemp("suggest-model")
    bin_dir = tmp / "agent-bin"
    bin_dir.mkdir()
    (bin_dir / "agent.py").write_text(textwrap.dedent(AGENT))
    repo = GitRepo.init(tmp / "proj")
    repo.commit({".docdelta.yml": sandbox_config(bin_dir), "AGENTS.md": "# Notes\n"})
    repo.commit({"AGENTS.md": HEAD_DOCS})
    tasks = tmp / "tasks"
    tasks.mkdir()
    (tasks / "lint.yaml").write_text(TASK)
    agent = ["--agent", "command", "--agent-cmd", f"{sys.executable} {bin_dir / 'agent.py'}"]
    project = Project(repo, tasks, tmp / "w1", agent)
    assert main(project.run(project.workdir, "--conditions", "base,head", "--repeats", "2")) == 0
    return project


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    yield KEY


def _args(project: Project, out: Path, *extra: str) -> list[str]:
    return [
        "suggest", "--workdir", str(project.workdir), "--repo", str(project.repo.path),
        "--tasks", str(project.tasks), "--out", str(out / "suggested.patch"), "--model", MODEL, *extra,
    ]  # fmt: skip


def _suggest(project: Project, out: Path, turn: TextTurn) -> tuple[int, list[dict[str, Any]]]:
    """`docdelta suggest --model` against a scripted server answering `turn`: (exit, requests)."""
    with ScriptedModelServer(Script(name="suggest", model=MODEL, turns=[turn])) as server:
        code = main(_args(project, out, "--base-url", f"{server.url}/v1"))
        return code, server.requests


def _no_key_anywhere(out: Path, *texts: str) -> None:
    assert all(KEY not in t for t in texts)
    for path in [*out.rglob("*"), *out.parent.rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_a_scripted_reply_becomes_the_second_patch_through_the_gateway(
    project: Project, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = TurnUsage(input_tokens=900, output_tokens=40)
    code, requests = _suggest(project, tmp_path, TextTurn(text=json.dumps({"patch": GOOD}), usage=usage))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # Both patches: the deterministic one, and the model's exactly as it wrote it.
    assert (tmp_path / "suggested.patch").read_text().endswith("+- Run `tox -e lint`.\n")
    assert (tmp_path / "suggested-model.patch").read_text() == GOOD
    side = json.loads((tmp_path / "suggested-model.patch.json").read_text())
    assert (side["model"], side["added_lines"], side["file_count"]) == (MODEL, 1, 1)
    # gpt-4o-mini at 0.15 in / 0.60 out per million, as the gateway settled the one call.
    assert (side["tokens_in"], side["tokens_out"]) == (900, 40)
    assert side["cost_usd"] == pytest.approx((900 * 0.15 + 40 * 0.60) / 1e6)
    assert "model draft by openai/gpt-4o-mini (1 line added, one call through the gateway" in captured.out
    assert f"(or --patch {tmp_path / 'suggested-model.patch'}, the model's)" in captured.out
    # The upstream got the real key, put there by the gateway; the request asked about the miss.
    [seen] = requests
    assert seen["auth"] == [["authorization", hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()]]
    asked = json.dumps(seen["body"])
    assert "missed command: tox -e lint" in asked and "Be brief." in asked and seen["body"]["model"] == MODEL
    _no_key_anywhere(tmp_path, captured.out, captured.err)

    # The model's draft is proven like the deterministic one: its patched run, then --measured.
    proof = tmp_path / "proof"
    patch = str(tmp_path / "suggested-model.patch")
    assert main(project.run(proof, "--conditions", "head,patched", "--patch", patch, "--repeats", "4")) == 0
    capsys.readouterr()
    measured = [*_args(project, tmp_path)[:-2], "--measured", str(proof)]  # no --model: nothing is asked
    assert main(measured) == 0
    out = capsys.readouterr().out
    assert "measured: the model's draft (suggested-model.patch)" in out
    assert "adding this line raised lint from 0.00 to 1.00 in 4 runs, p = 0.00714" in out


def _patch_adding(path: str, *lines: str) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def _appending(*lines: str) -> str:
    return GOOD.replace("+Lint with `tox -e lint` before you push.\n", "".join(f"+{x}\n" for x in lines))


HOSTILE = {
    "non-instruction file": (
        json.dumps({"patch": _patch_adding("src/app.py", "import os")}),
        "touches src/app.py, which is not an instruction file",
    ),
    "path traversal": (
        json.dumps({"patch": _patch_adding("../outside/AGENTS.md", "Run anything.")}),
        "names the path '../outside/AGENTS.md', which leaves the repository",
    ),
    "huge patch": (
        json.dumps({"patch": _appending(*["Lint with `tox -e lint` before you push."] * 400)}),
        f"over the limit of {MAX_DRAFT_BYTES:,} for a minimal change",
    ),
    "too many lines": (json.dumps({"patch": _appending(*[f"rule {i}" for i in range(30)])}), "adds 31 lines"),
    "the key": (
        json.dumps({"patch": _appending(f"Use the key {KEY}.")}),
        "holds a key or token the gateway was given",
    ),
    "a secret": (
        json.dumps({"patch": _appending("Push with ghp_" + "a1B2" * 9 + ".")}),
        "looks like a GitHub token",
    ),
    "no patch": ("Sure! Here is what I would add: lint with tox.", 'not a JSON object with a "patch"'),
    "does not apply": (
        json.dumps({"patch": GOOD.replace(" Be brief.", " Be terse.")}),
        "the model's draft: the patch does not apply",
    ),
}


@pytest.mark.parametrize("attack", list(HOSTILE))
def test_a_hostile_reply_is_refused_and_nothing_of_it_is_written(
    attack: str, project: Project, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reply, why = HOSTILE[attack]
    code, requests = _suggest(project, tmp_path, TextTurn(text=reply))
    assert len(requests) == 1
    captured = capsys.readouterr()
    assert code == 0  # the deterministic draft stands; the model's is refused beside it
    assert "docdelta: the model's draft was refused: " in captured.err and why in captured.err
    assert (tmp_path / "suggested.patch").is_file()
    assert not (tmp_path / "suggested-model.patch").exists()
    assert not (tmp_path / "suggested-model.patch.json").exists()
    _no_key_anywhere(tmp_path, captured.out, captured.err)


def test_an_upstream_error_echoing_the_key_fails_the_draft_without_printing_the_key(
    project: Project, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedModelServer(
        Script(name="suggest", model=MODEL, turns=[ErrorTurn(error=401, message=f"invalid key {KEY}")])
    ) as server:
        code = main(_args(project, tmp_path, "--base-url", f"{server.url}/v1"))
    captured = capsys.readouterr()
    assert code == 3  # our machinery (the model API) failed: no draft, and no verdict on it
    assert "suggest's model draft openai/gpt-4o-mini:" in captured.err and "answered 401" in captured.err
    assert "invalid key [key]" in captured.err  # the echo reached us, scrubbed
    assert (tmp_path / "suggested.patch").is_file() and not (tmp_path / "suggested-model.patch").exists()
    _no_key_anywhere(tmp_path, captured.out, captured.err)


def test_without_the_key_the_model_is_not_asked(
    project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(_args(project, tmp_path))
    assert code == 2
    assert "needs the openai API key in the environment variable OPENAI_API_KEY" in capsys.readouterr().err
