"""What the local provider adds to the shared contract: hiding, confinement, refusal."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import CheckoutFactory

from docdelta.errors import ConfigError, SandboxError
from docdelta.sandbox import SandboxSpec, get_provider
from docdelta.sandbox.local import LocalProvider


@pytest.fixture
def checkout(tmp_checkout: CheckoutFactory) -> Path:
    return tmp_checkout({"README.md": "hello\n"})


def test_unknown_provider_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown sandbox 'podman'") as err:
        get_provider("podman")
    assert "local" in err.value.hint
    with pytest.raises(ConfigError, match="bad options"):
        get_provider("local", colour="red")


def test_hidden_directories_are_empty_inside_and_cannot_be_unmounted(tmp_path: Path, checkout: Path) -> None:
    user_repo = tmp_path / "user-repo"
    (user_repo / ".docdelta").mkdir(parents=True)
    (user_repo / ".docdelta" / "gold.yaml").write_text("verdict: no\n")
    provider = LocalProvider(root=tmp_path / "sb", hide=[user_repo])
    with provider.create(checkout, SandboxSpec()) as sb:
        assert sb.isolation == "netns+mounts"
        listing = sb.exec(["sh", "-c", f"ls -A {user_repo}; umount {user_repo}; ls -A {user_repo}"])
        assert listing.stdout == b"", "the hidden repository must look empty, even after umount"
    assert (user_repo / ".docdelta" / "gold.yaml").exists(), "hiding must not touch the host directory"


def test_paths_outside_the_sandbox_are_refused(tmp_path: Path, checkout: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    with LocalProvider(root=tmp_path / "sb").create(checkout, SandboxSpec()) as sb:
        Path(sb.workspace, "link").symlink_to(outside)
        for bad in ("../../../secret.txt", str(outside), "link", "/etc/passwd"):
            with pytest.raises(SandboxError, match="outside the sandbox"):
                sb.read_file(bad)
        with pytest.raises(SandboxError, match="outside the sandbox"):
            sb.write_file("../../escape.txt", b"x")
        with pytest.raises(SandboxError, match="outside the sandbox"):
            sb.exec(["true"], cwd="/")
    assert not (tmp_path / "sb" / "escape.txt").exists()


def test_without_namespaces_it_refuses_unless_network_is_allowed(tmp_path: Path, checkout: Path) -> None:
    broken = str(tmp_path / "no-unshare-here")
    with pytest.raises(SandboxError, match="cannot isolate") as err:
        LocalProvider(root=tmp_path / "a", unshare=broken).create(checkout, SandboxSpec())
    assert "--allow-network" in err.value.hint
    with LocalProvider(root=tmp_path / "b", unshare=broken, allow_network=True).create(
        checkout, SandboxSpec()
    ) as sb:
        assert sb.isolation == "none"
        assert sb.exec(["cat", "README.md"]).stdout == b"hello\n"


def test_network_modes_other_than_none_need_allow_network(tmp_path: Path, checkout: Path) -> None:
    with pytest.raises(SandboxError, match="'open'"):
        LocalProvider(root=tmp_path / "a").create(checkout, SandboxSpec(network="open"))
    with LocalProvider(root=tmp_path / "b", allow_network=True).create(
        checkout, SandboxSpec(network="open")
    ) as sb:
        assert sb.isolation == "none"


def test_a_detached_grandchild_dies_with_the_pid_namespace(tmp_path: Path, checkout: Path) -> None:
    with LocalProvider(root=tmp_path / "sb").create(checkout, SandboxSpec()) as sb:
        script = "setsid sh -c 'sleep 1; echo alive > escaped.txt' & sleep 30"
        assert sb.exec(["sh", "-c", script], timeout=0.5).timed_out
        time.sleep(1.5)
        assert not Path(sb.workspace, "escaped.txt").exists()


def test_default_root_is_outside_the_repo_and_slots_are_separate(checkout: Path) -> None:
    a, b = LocalProvider(slot=7), LocalProvider(slot=8)
    with a.create(checkout, SandboxSpec()) as sa, b.create(checkout, SandboxSpec()) as sbx:
        assert sa.workspace.endswith("/slot-7/repo") and sbx.workspace.endswith("/slot-8/repo")
        assert not Path(sa.workspace).is_relative_to(Path(__file__).parents[2])
        with pytest.raises(SandboxError, match="already holds a live sandbox"):
            a.create(checkout, SandboxSpec())
    assert not Path(sa.workspace).exists()


def test_root_inside_a_hidden_directory_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    with pytest.raises(ConfigError, match="must not see"):
        LocalProvider(root=tmp_path / "work" / "sandboxes", hide=[tmp_path / "work"])


def test_a_stale_slot_from_a_crashed_run_is_replaced(tmp_path: Path, checkout: Path) -> None:
    stale = tmp_path / "sb" / "slot-0" / "repo"
    stale.mkdir(parents=True)
    (stale / "old.txt").write_text("stale")
    stale.chmod(0o500)
    with LocalProvider(root=tmp_path / "sb").create(checkout, SandboxSpec()) as sb:
        assert sb.exec(["ls"]).stdout == b"README.md\n"
