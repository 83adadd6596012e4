"""Run a command under a seccomp filter that refuses it new namespaces (EPERM), as a kernel or
security module that forbids them does: `python nonamespace.py /usr/bin/bwrap ...` fails the way
bubblewrap fails on such a machine (unprivileged: no user namespace; as root: none of the
others either, which bwrap then unshares without one). Linux x86_64/aarch64."""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

ARCH = {  # AUDIT_ARCH_*, then the numbers of unshare, clone and clone3
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}
audit, unshare, clone, clone3 = ARCH[platform.machine()]
CLONE_NEW_ANY = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET."""
ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# Classic BPF over struct seccomp_data (nr at 0, arch at 4, args[0] at 16); jumps are relative.
prog = [
    (LD, 0, 0, 4),
    (JEQ, 0, 6, audit),
    (LD, 0, 0, 0),
    (JEQ, 5, 0, unshare),
    (JEQ, 5, 0, clone3),
    (JEQ, 0, 2, clone),
    (LD, 0, 0, 16),
    (JSET, 1, 0, CLONE_NEW_ANY),
    (RET, 0, 0, ALLOW),
    (RET, 0, 0, EPERM),
    (RET, 0, 0, ENOSYS),
]


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def main() -> None:
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = Fprog(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    filtered = libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 and (
        libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
    )
    if not filtered:
        sys.exit(f"seccomp: {os.strerror(ctypes.get_errno())}")
    os.execv(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
