"""How a failed system call becomes an exception: the :class:`~bpfmux.errors.BpfError`
message (what failed, and what to do about it) for a kernel errno.

Commands with their own advice for an errno pass it as ``hint``; otherwise
:data:`HINTS` has the general advice for that errno, if any.
"""

from __future__ import annotations

import errno as _errno

from ...errors import ENOTSUPP, BpfError

__all__ = ["HINTS", "error"]

#: General advice per errno, used when the command has none of its own.
HINTS: dict[int, str] = {
    _errno.EPERM: "run as root (CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN); check kernel.unprivileged_bpf_disabled and lockdown",
    _errno.EACCES: "permission denied by the kernel (capabilities, LSM or verifier); run as root",
    _errno.ENOSYS: "this kernel has no bpf(2) (CONFIG_BPF_SYSCALL is off)",
    _errno.E2BIG: "an argument exceeds a kernel limit, or this kernel does not know a non-zero field bpfmux set",
    _errno.ENOMEM: "the kernel is out of memory for this object (memcg limit or RLIMIT_MEMLOCK on old kernels)",
    _errno.EBADF: "a file descriptor passed to the kernel is closed or of the wrong kind",
    _errno.EOPNOTSUPP: "this kernel does not support the operation",
    ENOTSUPP: "this kernel does not support the operation",  # kernel-internal, leaks out of bpf(2)
}


def error(what: str, err: int, hint: str = "") -> BpfError:
    """The exception for ``what`` failing with errno ``err`` (not raised here).

    :param hint: advice for this errno; empty takes the one in :data:`HINTS`.
    :returns: a :class:`~bpfmux.errors.BpfError` (a ``PermissionError`` for
        ``EPERM``, …) whose message is ``"<what> failed: <hint>"``.
    """
    hint = hint or HINTS.get(err, "")
    msg = f"{what} failed" + (f": {hint}" if hint else "")
    return BpfError(err, msg)
