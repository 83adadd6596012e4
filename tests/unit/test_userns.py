"""The AppArmor user-namespace restriction, told apart from other bwrap failures, with the
restriction simulated by a sysctl file of our own (the real one is read by default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docdelta.sandbox import userns

DENIED = "bwrap: setting up uid map: Permission denied"


@pytest.fixture(autouse=True)
def _unprivileged(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a normal user (the restriction never applies to root; these tests may run as root)."""
    monkeypatch.setattr(userns, "privileged", lambda: False)


def _sysctl(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "apparmor_restrict_unprivileged_userns"
    path.write_text(value)
    return path


def test_under_the_restriction_the_error_names_it_and_gives_the_profile_for_this_binary(
    tmp_path: Path,
) -> None:
    bwrap = tmp_path / "venv" / "bwrap"
    bwrap.parent.mkdir()
    bwrap.write_text("")
    error = userns.explain(str(bwrap), DENIED, _sysctl(tmp_path, "1\n"))
    assert error is not None
    assert "AppArmor restricts unprivileged user namespaces" in error.message
    assert DENIED in error.message  # bwrap's own words, for a search engine
    assert error.hint.startswith("use --sandbox docker")  # the Action rewrites this to its input
    assert f"profile docdelta-bwrap {bwrap} flags=(unconfined) {{\n  userns,\n" in error.hint
    assert "sudo apparmor_parser -r /etc/apparmor.d/docdelta-bwrap" in error.hint
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in error.hint
    assert error.exit_code == 2


def test_root_is_never_told_about_the_restriction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(userns, "privileged", lambda: True)  # e.g. root in a container without namespaces
    assert userns.explain("/usr/bin/bwrap", DENIED, _sysctl(tmp_path, "1\n")) is None


@pytest.mark.parametrize(
    ("sysctl", "error"),
    [
        ("0\n", DENIED),  # no restriction: some other cause, the generic hint applies
        (None, DENIED),  # a kernel without AppArmor
        ("1\n", "bwrap: execvp /usr/bin/true: No such file or directory"),  # not a namespace refusal
    ],
)
def test_anything_else_is_left_to_the_generic_error(tmp_path: Path, sysctl: str | None, error: str) -> None:
    path = _sysctl(tmp_path, sysctl) if sysctl is not None else tmp_path / "absent"
    assert userns.explain("/usr/bin/bwrap", error, path) is None
