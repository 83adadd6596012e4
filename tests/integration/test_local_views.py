"""What the local provider's copy-on-write views add to the shared contract (the attack on
them is tests/conformance/test_views.py): a run's workspace is an overlay, not a copy;
nothing the agent can read names the sealed checkout's host path (the overlay's mount
options are readable in /proc/mounts, and a path naming the condition would tell the agent
which arm it is in); one lower layer per checkout, reused by every run and removed with it.
"""

from __future__ import annotations

import shutil

from toolchain import CheckoutFactory

from docdelta.sandbox import SandboxSpec
from docdelta.sandbox.local import LocalProvider, LocalSandbox

FILES = {"README.md": "hello\n", "src/app.py": "print('hi')\n", "docs/keep.md": "keep\n"}


def test_a_run_writes_only_what_it_changes_and_cannot_see_where_the_checkout_lives(
    tmp_checkout: CheckoutFactory, view_provider: LocalProvider
) -> None:
    sealed = tmp_checkout(FILES, name="checkouts-0123abcd")
    with view_provider.create(sealed, SandboxSpec()) as sandbox:
        assert isinstance(sandbox, LocalSandbox)
        assert sandbox.exec(["sh", "-c", "echo changed > src/app.py"]).exit_code == 0
        assert not (sandbox.host_workspace / "docs" / "keep.md").exists(), "the view is not a copy"
        assert (sandbox.host_workspace / "src" / "app.py").read_bytes() == b"changed\n"
        mounts = sandbox.exec(["cat", "/proc/self/mounts"]).stdout.decode()
        assert "overlay /workspace/repo" in mounts
        assert sealed.name not in mounts and str(sealed) not in mounts
        assert sandbox.exec(["ls", str(sealed)]).exit_code != 0


def test_one_lower_layer_per_checkout_reused_and_removed_with_it(
    tmp_checkout: CheckoutFactory, view_provider: LocalProvider
) -> None:
    sealed = tmp_checkout(FILES)
    for _ in range(3):
        with view_provider.create(sealed, SandboxSpec()) as sandbox:
            sandbox.write_file("new/from-host.txt", b"written by docdelta")
            assert sandbox.exec(["cat", "new/from-host.txt"]).stdout == b"written by docdelta"
            assert sandbox.read_file("README.md") == b"hello\n"
    lowers = sorted(view_provider.root.glob("lower-*"))
    assert len(lowers) == 1, "one lower layer per checkout, reused by every run"
    grading = tmp_checkout({"x.txt": "x\n"}, name="grading")
    with view_provider.create(grading, SandboxSpec()):
        pass
    assert len(list(view_provider.root.glob("lower-*"))) == 2
    shutil.rmtree(grading)
    with view_provider.create(sealed, SandboxSpec()):
        pass
    assert sorted(view_provider.root.glob("lower-*")) == lowers, "a deleted checkout's layer is removed"
    view_provider.close()
    assert not list(view_provider.root.glob("lower-*"))
