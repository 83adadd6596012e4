"""The seccomp filter of the local sandbox: the kernel calls an agent has no use for.

Runs of one evaluation must not share kernel state, and the one kernel store a namespace
does not separate is the keyring: as root every run is dropped to the same `nobody`, and
as a normal user every run inherits docdelta's session keyring, so a head run could leave
a note with `add_key` that the base and none runs read (and read a secret in docdelta's
own keyring). bwrap's namespaces cannot hide it; a filter refusing the keyring calls can.

The list is Docker's default profile's unconditional denials (so an agent meets the same
kernel under both providers), less the calls Docker allows on current kernels or by
capability and that debuggers or runtimes use (`ptrace`, `process_vm_readv/writev`,
`personality`, the NUMA policy calls). Each refused call fails with EPERM, as under
Docker, so a program that probes for it carries on.

The BPF program is built by libseccomp (through `pyseccomp`, its ctypes binding) for the
machine's own architecture, rather than by hand: syscall numbers and the architecture
check differ per platform and libseccomp is what Docker, systemd and Flatpak use.
"""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

DENIED_SYSCALLS = (
    # kernel keyrings: shared across runs by uid and session
    "add_key",
    "request_key",
    "keyctl",
    # namespaces and mounts: a way around the sandbox's own
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "open_by_handle_at",
    "name_to_handle_at",
    # the kernel, its modules, clock and swap: host state
    "acct",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "settimeofday",
    "create_module",
    "delete_module",
    "finit_module",
    "init_module",
    "get_kernel_syms",
    "query_module",
    "kexec_file_load",
    "kexec_load",
    "reboot",
    "swapon",
    "swapoff",
    "quotactl",
    "nfsservctl",
    "lookup_dcookie",
    "perf_event_open",
    "sysfs",
    "_sysctl",
    "ustat",
    "uselib",
    "userfaultfd",
    "vm86",
    "vm86old",
    "iopl",
    "ioperm",
    "kcmp",
)
"""Refused with EPERM. Names the native architecture lacks (e.g. `vm86` off 32-bit x86)
are skipped."""


def bpf_program(directory: Path) -> Path:
    """Compile the filter for this machine into a file under `directory` (bwrap reads it
    from a file descriptor with `--seccomp FD`); raises OSError when libseccomp is missing."""
    try:
        import pyseccomp  # noqa: PLC0415 - loads libseccomp, only when a local sandbox starts
    except RuntimeError as exc:  # pyseccomp raises it when libseccomp.so is not installed
        raise OSError(f"libseccomp is not installed: {exc}") from exc
    flt = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
        except OSError:
            continue
        if number < 0:  # libseccomp's pseudo-number: not a call of this architecture
            continue
        flt.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=directory, prefix="seccomp-", suffix=".bpf", delete=False) as out:
        flt.export_bpf(out)
    return Path(out.name)
