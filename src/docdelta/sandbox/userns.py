"""Why bubblewrap cannot start here, when the reason is AppArmor's user-namespace restriction.

Ubuntu 23.10 and later (24.04 is GitHub's `ubuntu-latest` and many laptops) set
`kernel.apparmor_restrict_unprivileged_userns = 1`: an unprivileged program may create a
user namespace only if an AppArmor profile grants it `userns`. Ubuntu ships such profiles
for a few programs but not for every bwrap (a pip-installed one never has one), so bwrap
dies with "setting up uid map: Permission denied" or "No permissions to create new
namespace", and the generic "allow unprivileged user namespaces" hint sends users to a
sysctl that is already 1. The local provider stops with the exact fix instead (exit 2):
a profile for that bwrap binary, or `--sandbox docker`, or the machine-wide sysctl.

No weaker sandbox is started in its place (see `docdelta.sandbox.local`): a Landlock +
seccomp fallback would not give the agent its own PID, mount and network namespaces.
"""

from __future__ import annotations

import os
from pathlib import Path

from docdelta.errors import SandboxError

APPARMOR_SYSCTL = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
"""1 when AppArmor restricts unprivileged user namespaces to programs with a `userns` rule."""
USERNS_DENIED = (
    "setting up uid map: Permission denied",
    "No permissions to create new namespace",
    "Creating new namespace failed",
)
"""How bubblewrap says the kernel refused it a user namespace."""
PROFILE_DIR = Path("/etc/apparmor.d")


def apparmor_restricts(sysctl: Path = APPARMOR_SYSCTL) -> bool:
    """True when the AppArmor restriction is on (the file holds 1); False without it."""
    try:
        return sysctl.read_text().strip() == "1"
    except OSError:
        return False


def profile_text(bwrap: str) -> str:
    """The AppArmor profile that lets this bwrap binary create user namespaces: Ubuntu's
    own pattern for programs that need them (an unconfined profile with a `userns` rule)."""
    return (
        "abi <abi/4.0>,\n"
        "include <tunables/global>\n\n"
        f"profile docdelta-bwrap {bwrap} flags=(unconfined) {{\n"
        "  userns,\n"
        "  include if exists <local/docdelta-bwrap>\n"
        "}\n"
    )


def privileged() -> bool:
    """Root: the restriction does not apply (bwrap then needs no user namespace), so a root
    bwrap that fails, e.g. in a container whose seccomp profile forbids namespaces, fails
    for another reason even on a host with the restriction on."""
    return os.geteuid() == 0


def explain(bwrap: str, error: str, sysctl: Path | None = None) -> SandboxError | None:
    """The error to stop with when bwrap's failure (`error`) is the AppArmor restriction;
    None when it is anything else (the caller's generic error applies)."""
    if privileged() or not any(marker in error for marker in USERNS_DENIED):
        return None
    if not apparmor_restricts(APPARMOR_SYSCTL if sysctl is None else sysctl):
        return None
    binary = os.path.realpath(bwrap)
    profile = PROFILE_DIR / "docdelta-bwrap"
    return SandboxError(
        f"bubblewrap ({binary}) cannot build a sandbox: AppArmor restricts unprivileged user "
        f"namespaces on this machine (kernel.apparmor_restrict_unprivileged_userns = 1) and no "
        f"profile allows them to this binary ({error.strip()})",
        hint=(
            "use --sandbox docker, or give this bwrap an AppArmor profile (needs root; the path "
            f"is the binary docdelta runs):\n\nsudo tee {profile} <<'EOF'\n{profile_text(binary)}EOF\n"
            f"sudo apparmor_parser -r {profile}\n\n"
            "or lift the restriction for every program (weaker): "
            "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
        ),
    )
