"""``bpf_probe_read_{kernel,user}{,_str}`` and the legacy ``bpf_probe_read*``.

Kernel reads come from the VM's address space, user reads from the current
task's :attr:`~bpfmux.emu.vm.runtime.Task.memory`. A read that fails zeroes the
destination and returns ``-EFAULT``, as in the kernel; a bad *destination*
is a program fault (the verifier guarantees it is valid).
"""

from __future__ import annotations

import errno

from ....uapi import HelperId as H
from ..memory import AddressSpace
from ..runtime import RunState
from .table import helper

#: Addresses below this are user addresses for the legacy helpers (x86-64
#: ``TASK_SIZE_MAX``).
TASK_SIZE = 0x0000_7FFF_FFFF_F000


def _user(rs: RunState) -> AddressSpace | None:
    return rs.task.memory


def _destination(rs: RunState, dst: int, size: int) -> None:
    """Check that ``size`` bytes at ``dst`` are writable before anything of
    that size is read or made (``size`` comes from the program: up to 4 GiB).

    :raises EmulatorFault: they are not.
    """
    if size:
        rs.space.check(dst, size, True, rs.pc)


def _read(rs: RunState, space: AddressSpace | None, dst: int, size: int, src: int) -> int:
    size &= 0xFFFFFFFF
    _destination(rs, dst, size)
    data = space.try_read(src, size) if space is not None else None
    if data is None:
        rs.write(dst, bytes(size))
        return -errno.EFAULT
    rs.write(dst, data)
    return 0


def _read_str(rs: RunState, space: AddressSpace | None, dst: int, size: int, src: int) -> int:
    size &= 0xFFFFFFFF
    if size == 0:
        return 0
    _destination(rs, dst, size)
    data = space.try_read_str(src, size) if space is not None else None
    if data is None:
        rs.write(dst, bytes(size))
        return -errno.EFAULT
    rs.write(dst, data)
    return len(data)


@helper(H.probe_read_kernel, "probe_read_kernel")
def probe_read_kernel(rs: RunState, dst: int, size: int, src: int, *_: int) -> int:
    """``long bpf_probe_read_kernel(dst, size, unsafe_ptr)``."""
    return _read(rs, rs.space, dst, size, src)


@helper(H.probe_read_user, "probe_read_user")
def probe_read_user(rs: RunState, dst: int, size: int, src: int, *_: int) -> int:
    """``long bpf_probe_read_user(dst, size, unsafe_ptr)``."""
    return _read(rs, _user(rs), dst, size, src)


@helper(H.probe_read_kernel_str, "probe_read_kernel_str")
def probe_read_kernel_str(rs: RunState, dst: int, size: int, src: int, *_: int) -> int:
    """``long bpf_probe_read_kernel_str(dst, size, unsafe_ptr)``: length
    including the NUL, or ``-EFAULT``."""
    return _read_str(rs, rs.space, dst, size, src)


@helper(H.probe_read_user_str, "probe_read_user_str")
def probe_read_user_str(rs: RunState, dst: int, size: int, src: int, *_: int) -> int:
    """``long bpf_probe_read_user_str(dst, size, unsafe_ptr)``."""
    return _read_str(rs, _user(rs), dst, size, src)


@helper(H.probe_read, "probe_read")
def probe_read(rs: RunState, dst: int, size: int, src: int, *_: int) -> int:
    """Legacy ``bpf_probe_read``: user memory below ``TASK_SIZE``, else kernel."""
    return _read(rs, _user(rs) if src < TASK_SIZE else rs.space, dst, size, src)


@helper(H.probe_read_str, "probe_read_str")
def probe_read_str(rs: RunState, dst: int, size: int, src: int, *_: int) -> int:
    """Legacy ``bpf_probe_read_str``."""
    return _read_str(rs, _user(rs) if src < TASK_SIZE else rs.space, dst, size, src)
