"""One behaviour suite for the Sandbox contract, run against every provider in providers.py.

In-sandbox paths are only ever built from `workspace` and `tools_dir`, and state
is only ever observed through the sandbox itself, so the same tests hold for a
subprocess on this machine and for a container.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from toolchain import CheckoutFactory

from conformance.providers import ProviderFactory
from docdelta.errors import SandboxError
from docdelta.sandbox import Sandbox, SandboxProvider, SandboxSpec
from docdelta.sandbox.base import FileContent


@pytest.fixture
def checkout(tmp_checkout: CheckoutFactory) -> Path:
    return tmp_checkout({"README.md": "hello\n", "sub/data.txt": "42\n"}, name="checkout-head")


@pytest.fixture
def sandbox(provider: SandboxProvider, checkout: Path) -> Iterator[Sandbox]:
    with provider.create(checkout, SandboxSpec(env={"FROM_SPEC": "spec", "BOTH": "spec"})) as made:
        yield made


def _sh(sandbox: Sandbox, script: str, **kwargs: object) -> str:
    result = sandbox.exec(["sh", "-c", script], **kwargs)  # type: ignore[arg-type]
    assert result.exit_code == 0, result.stderr
    return result.stdout.decode()


def test_exit_codes_are_reported(sandbox: Sandbox) -> None:
    assert sandbox.exec(["true"]).exit_code == 0
    failed = sandbox.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (failed.exit_code, failed.stdout, failed.stderr) == (3, b"out\n", b"err\n")
    assert not failed.timed_out


def test_the_first_exec_and_those_after_it_report_alike(sandbox: Sandbox) -> None:
    """A provider may run a sandbox's first exec (the agent's) its own way (Docker runs it as
    its container's first process's command): its input, environment, working directory,
    both streams to their last unterminated byte and exit code are every later exec's."""
    argv = ["sh", "-c", 'cat; printf "%s" "$WHERE"; pwd >&2; printf tail >&2; exit 3']
    runs = [sandbox.exec(argv, stdin=b"in\\put %s\n", env={"WHERE": "it's\n%d"}, cwd="sub") for _ in "12"]
    expected = (3, b"in\\put %s\nit's\n%d", f"{sandbox.workspace}/sub\ntail".encode())
    assert [(r.exit_code, r.stdout, r.stderr) for r in runs] == [expected] * 2


def test_stdin_reaches_the_command(sandbox: Sandbox) -> None:
    data = b"line one\n\xff binary\n" * 1000
    assert sandbox.exec(["cat"], stdin=data).stdout == data


def test_runs_in_the_checkout_and_relative_cwd_is_under_it(sandbox: Sandbox) -> None:
    assert _sh(sandbox, "pwd; cat README.md") == f"{sandbox.workspace}\nhello\n"
    assert _sh(sandbox, "pwd; cat data.txt", cwd="sub") == f"{sandbox.workspace}/sub\n42\n"


def test_environment_is_built_from_scratch(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCDELTA_TEST_API_KEY", "sk-secret-must-not-leak")
    out = _sh(sandbox, "env", env={"FROM_EXEC": "exec", "BOTH": "exec"})
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert "sk-secret-must-not-leak" not in out
    assert (env["FROM_SPEC"], env["FROM_EXEC"], env["BOTH"]) == ("spec", "exec", "exec")
    assert env["LANG"] == "C.UTF-8"
    assert {"PATH", "HOME", "TMPDIR"} <= env.keys()
    _sh(sandbox, 'touch "$HOME/h" "$TMPDIR/t"')  # both are writable


def test_timeout_kills_the_command_and_everything_it_started(sandbox: Sandbox) -> None:
    """What the command started in the background is gone once the timed-out exec returns:
    the background process says it runs (started.txt) before the command answers, and no
    `sleep 30` of it is listed afterwards. Nothing here waits on the clock: a command that
    ran to its end (30 s) instead of being killed is told apart by the bound below."""
    started = time.monotonic()
    background = "sh -c 'echo up > started.txt; exec sleep 30' &"
    script = f"{background} until [ -s started.txt ]; do sleep 0.01; done; echo started; sleep 30"
    result = sandbox.exec(["sh", "-c", script], timeout=5)
    assert result.timed_out and result.exit_code is None
    assert result.stdout == b"started\n"
    assert time.monotonic() - started < 25, "the exec ended at its timeout, not the command's end"
    # Every process's command line, from /proc (the Docker base image has no ps).
    listing = "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done 2>/dev/null; true"
    listed = [line.strip() for line in _sh(sandbox, listing).splitlines()]
    assert "sleep 30" not in listed and any(line.startswith("sh -c") for line in listed), listed
    assert _sh(sandbox, "ls") == "README.md\nstarted.txt\nsub\n", "the workspace is kept"


def test_output_beyond_the_cap_is_cut_and_flagged(provider: SandboxProvider, checkout: Path) -> None:
    with provider.create(checkout, SandboxSpec(max_output_bytes=1000)) as sb:
        big = sb.exec(["sh", "-c", "head -c 200000 /dev/zero; echo done"])
        assert big.exit_code == 0 and big.truncated
        assert big.stdout == b"\0" * 1000
        small = sb.exec(["echo", "fits"])
        assert small.stdout == b"fits\n" and not small.truncated


def test_files_written_and_read_both_ways(sandbox: Sandbox) -> None:
    sandbox.write_file("new/dir/note.txt", b"from host\n")
    sandbox.write_file(f"{sandbox.tools_dir}/tool.sh", b"#!/bin/sh\necho tool ran\n", mode=0o755)
    assert _sh(sandbox, f"cat new/dir/note.txt; {sandbox.tools_dir}/tool.sh; echo made > made.txt") == (
        "from host\ntool ran\n"
    )
    assert sandbox.read_file("made.txt") == b"made\n"
    assert sandbox.read_file(f"{sandbox.workspace}/sub/data.txt") == b"42\n"
    assert "tool.sh" not in _sh(sandbox, "ls -a"), "the tools dir must lie outside the workspace"


def test_changed_files_replace_what_was_there_and_removed_ones_are_gone(
    provider: SandboxProvider, checkout: Path
) -> None:
    """What hidden-test grading puts on top of a checkout: a file written over a link is
    the file (the link's target untouched), a removed folder goes with its files, a new
    one comes with its folders and mode; the checkout on the host never changes."""
    (checkout / "link.txt").symlink_to("README.md")
    with provider.create(checkout, SandboxSpec()) as sandbox:
        sandbox.change_files(
            {
                "link.txt": FileContent(b"over the link\n"),
                "README.md": FileContent(b"changed\n"),
                "new/deep/run.sh": FileContent(b"#!/bin/sh\necho ran\n", 0o755),
            },
            remove=["sub", "absent.txt"],
        )
        listing = _sh(sandbox, "find . -path ./.git -prune -o -print | sort")
        shown = _sh(sandbox, "cat link.txt README.md; test -L link.txt || echo no-link; new/deep/run.sh")
    assert listing.split() == [".", "./README.md", "./link.txt", "./new", "./new/deep", "./new/deep/run.sh"]
    assert shown == "over the link\nchanged\nno-link\nran\n"
    assert (checkout / "README.md").read_text() == "hello\n"
    assert (checkout / "sub/data.txt").read_text() == "42\n"
    assert (checkout / "link.txt").is_symlink()


def test_reading_a_missing_file_is_a_sandbox_error(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError, match=r"nope\.txt"):
        sandbox.read_file("nope.txt")


def test_no_network_when_spec_says_none(sandbox: Sandbox) -> None:
    probe = (
        "import json, socket\n"
        "names = [n for _, n in socket.if_nameindex()]\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=2); reached = True\n"
        "except OSError:\n"
        "    reached = False\n"
        "print(json.dumps({'names': names, 'reached': reached}))\n"
    )
    seen = json.loads(_sh(sandbox, f'python3 -c "{probe}"'))
    assert seen == {"names": ["lo"], "reached": False}


def test_workspace_path_is_stable_and_never_names_the_checkout(
    provider: SandboxProvider, tmp_checkout: CheckoutFactory
) -> None:
    paths = []
    for name in ("cond-base", "cond-none"):
        with provider.create(tmp_checkout({"f.txt": name}, name=name), SandboxSpec()) as sb:
            paths.append(sb.workspace)
            assert sb.read_file("f.txt") == name.encode()
            assert "cond" not in sb.workspace and "cond" not in sb.tools_dir
    assert paths[0] == paths[1]


def test_close_is_idempotent_and_removes_state(provider: SandboxProvider, checkout: Path) -> None:
    first = provider.create(checkout, SandboxSpec())
    first.write_file("leftover.txt", b"x")
    first.close()
    first.close()
    with pytest.raises(SandboxError):
        first.exec(["true"])
    with provider.create(checkout, SandboxSpec()) as second:
        with pytest.raises(SandboxError):
            second.read_file("leftover.txt")
        assert second.read_file("README.md") == b"hello\n"


def test_toolchain_paths_are_shown_read_only_and_nothing_beside_them(
    provider_factory: ProviderFactory, tmp_path: Path, checkout: Path
) -> None:
    tool = tmp_path / "toolchain"
    (tool / "bin").mkdir(parents=True)
    (tool / "bin" / "project-tool").write_text("#!/bin/sh\necho tool ran\n")
    (tool / "bin" / "project-tool").chmod(0o755)
    (tmp_path / "beside.txt").write_text("not named")
    tool.chmod(0o755)
    env = {"PATH": f"{tool}/bin:/usr/bin:/bin", "PROJECT_FLAG": "on"}
    made = provider_factory(tmp_path, ro_paths=[str(tool)], env=env)
    try:
        with made.create(checkout, SandboxSpec()) as sb:
            assert _sh(sb, 'project-tool; echo "$PROJECT_FLAG"') == "tool ran\non\n"
            assert sb.exec(["sh", "-c", f"touch {tool}/bin/x"]).exit_code != 0, "toolchains are read-only"
            assert sb.exec(["cat", str(tmp_path / "beside.txt")]).exit_code != 0
    finally:
        made.close()
