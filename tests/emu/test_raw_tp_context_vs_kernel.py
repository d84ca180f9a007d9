"""A raw tracepoint's context in the emulated kernel against this kernel's:
one u64 slot per ``TP_PROTO`` argument (``raw_syscalls:sys_enter`` has two,
``regs`` and ``id``), so a program reading ``ctx[1]`` sees the syscall number
in both; a wrong count of arguments or an unknown field is refused, naming
the prototype's arguments."""

from __future__ import annotations

import ctypes
import os

import pytest

from bpfmux.emu import Emulator
from bpfmux.errors import BpfmuxError
from bpfmux.isa.build import R0, R1, R2, R6, R7, R10, Asm
from bpfmux.live import LiveKernel
from bpfmux.uapi import MapType, ProgType

NR_GETPPID = 110  # x86-64
HITS = 3


def _ids_prog(kernel, tgid: int):
    """On each sys_enter of ``tgid``: ``seen[0] += 1`` when ctx[1] (the syscall number) is getppid's, and
    ``seen[1] = ctx[1]``; returns (program, map)."""
    seen = kernel.create_map(MapType.ARRAY, 4, 8, 2, name="seen")
    a = Asm()
    a.mov(R6, R1).call(14).rsh(R0, 32).jne(R0, tgid, "out")  # bpf_get_current_pid_tgid
    a.ldxdw(R7, R6, 8).jne(R7, NR_GETPPID, "out")  # ctx[1]: the id argument
    a.stw(R10, -4, 0).ld_map_fd(R1, "seen").mov(R2, R10).add(R2, -4).call(1).jeq(R0, 0, "out")
    a.mov(R1, 1).atomic_add(R0, 0, R1)
    a.stw(R10, -4, 1).ld_map_fd(R1, "seen").mov(R2, R10).add(R2, -4).call(1).jeq(R0, 0, "out")
    a.stxdw(R0, 0, R7)
    a.label("out").mov(R0, 0).exit()
    prog = kernel.load_program(a.assemble().resolve({"seen": seen.fd}), ProgType.RAW_TRACEPOINT, name="ids")
    return prog, seen


def _read(seen) -> list[int]:
    return [int.from_bytes(bytes(seen[i]), "little") for i in range(2)]


@pytest.fixture
def live():
    if os.geteuid() != 0:
        pytest.skip("loading into the live kernel needs root")
    k = LiveKernel()
    yield k
    k.close()


def test_sys_enter_id_slot_matches_the_kernel(live) -> None:
    prog, seen = _ids_prog(live, os.getpid())
    libc = ctypes.CDLL(None, use_errno=True)
    with prog.attach("sys_enter"):
        for _ in range(HITS):
            libc.syscall(NR_GETPPID)
    live_seen = _read(seen)

    with Emulator() as emu:
        eprog, eseen = _ids_prog(emu, emu.vm.task.pid)
        with eprog.attach("sys_enter"):
            emu.syscall("getppid")  # positional slots: regs and id
            emu.fire("raw_syscalls:sys_enter", id=NR_GETPPID)  # by name; regs is 0
            emu.fire("sys_enter", 0, NR_GETPPID)
        emu_seen = _read(eseen)
    assert live_seen == emu_seen == [HITS, NR_GETPPID]


def test_wrong_count_and_unknown_field_name_the_arguments() -> None:
    with Emulator() as emu:
        prog, _ = _ids_prog(emu, emu.vm.task.pid)
        with prog.attach("sys_enter"):
            with pytest.raises(BpfmuxError, match=r"takes 2 argument\(s\) \(regs, id\), 1 given"):
                emu.fire("raw_syscalls:sys_enter", NR_GETPPID)
            with pytest.raises(BpfmuxError, match=r"takes 2 argument\(s\) \(regs, id\), 3 given"):
                emu.fire("raw_syscalls:sys_enter", 0, NR_GETPPID, 7)
            with pytest.raises(BpfmuxError, match="no argument or field 'nr'.*regs, id"):
                emu.fire("raw_syscalls:sys_enter", nr=NR_GETPPID)
            assert emu.fire("raw_syscalls:sys_enter", id=1, args=[0] * 6) == 1  # a format field is no error
