"""``BPF_PROG_TEST_RUN`` of tracing programs in the emulated kernel: the
kernel's test functions (``net/bpf/test_run.c``) called through their
trampolines, with the kernel's checks of their results."""

from __future__ import annotations

import errno
import struct
from typing import TYPE_CHECKING

from ...errors import BpfError
from ...uapi import AttachType, ProgType

if TYPE_CHECKING:  # pragma: no cover
    from .emulator import Emulator
    from .objects import EmulatedProgram

__all__ = ["test_run_tracing"]


def test_run_tracing(emu: Emulator, prog: EmulatedProgram) -> int:
    """What ``BPF_PROG_TEST_RUN`` does for a fentry/fexit/fmod_ret program:
    call the kernel's test functions (``net/bpf/test_run.c``) through
    their trampolines; returns the test run's ``retval``.

    :raises BpfError: ``EINVAL`` not a tracing program; ``EFAULT`` a test
        function returned the wrong value (as the kernel reports it).
    """
    at = prog.attach_type
    if prog.prog_type != ProgType.TRACING:
        raise BpfError(errno.EINVAL, f"{prog.name} is not a tracing program")
    if at in (AttachType.TRACE_FENTRY, AttachType.TRACE_FEXIT, AttachType.TRACE_FENTRY_MULTI,
              AttachType.TRACE_FEXIT_MULTI):
        arg = emu.alloc(8, "bpf_fentry_test_t")
        retval = emu.alloc(4, "retval")
        checks = [
            ("bpf_fentry_test1", (1,), 2), ("bpf_fentry_test2", (2, 3), 5), ("bpf_fentry_test3", (4, 5, 6), 15),
            ("bpf_fentry_test4", (7, 8, 9, 10), 34), ("bpf_fentry_test5", (11, 12, 13, 14, 15), 65),
            ("bpf_fentry_test6", (16, 17, 18, 19, 20, 21), 111), ("bpf_fentry_test7", (0,), 0),
            ("bpf_fentry_test8", (arg,), 0), ("bpf_fentry_test9", (retval,), 0),
        ]
        if "bpf_fentry_test10" in emu.functions and emu.functions["bpf_fentry_test10"].btf_id:
            checks.append(("bpf_fentry_test10", (0,), 0))
        for name, args, want in checks:
            if emu.call(name, *args) != want:
                raise BpfError(errno.EFAULT, f"{name}{args} did not return {want}")
        return 0
    if at == AttachType.MODIFY_RETURN:
        b = emu.alloc(struct.pack("<i", 2), "b")
        side_effect = 0
        ret = emu.call("bpf_modify_return_test", 1, b) & 0xFFFF
        if struct.unpack("<i", emu.read(b, 4))[0] != 2:
            side_effect += 1
        emu.write(b, struct.pack("<i", 2))
        ret = (ret + emu.call("bpf_modify_return_test2", 1, b, 3, 4, 5, 6, 7)) & 0xFFFF
        if struct.unpack("<i", emu.read(b, 4))[0] != 2:
            side_effect += 1
        return ((side_effect & 0xFFFF) << 16) | ret
    raise BpfError(errno.EINVAL, f"{prog.name}: test runs of attach type {at} are not supported")
