"""Tiny programs for emulated-kernel tests, built with bpfmux's own builder."""

from __future__ import annotations

from collections.abc import Sequence

from bpfmux.emu.kernel.emulator import Emulator
from bpfmux.isa.build import R0, R1, R2, R6, R7, R10, Asm
from bpfmux.uapi import HelperId, MapType, ProgType


def counter_prog(emu: Emulator, prog_type: ProgType, counts, slot: int, name: str, rv: int = 0, **kw):
    """A program that adds 1 to ``counts[slot]`` (an array map) and returns ``rv``."""
    a = Asm()
    a.mov(R1, slot).stxw(R10, -4, R1)
    a.ld_map_fd(R1, "counts").mov(R2, R10).add(R2, -4).call(HelperId.map_lookup_elem)
    a.jeq(R0, 0, "out").mov(R1, 1).atomic_add(R0, 0, R1)
    a.label("out").mov(R0, rv).exit()
    insns = a.assemble().resolve({"counts": counts.fd})
    return emu.load_program(insns, prog_type, name=name, **kw)


def ctx_dump_prog(emu: Emulator, prog_type: ProgType, offsets: Sequence[int], name: str = "dump", **kw):
    """A program that copies u64 ctx words at ``offsets`` into element 0 of a
    fresh array map (value = the words in order). Returns (program, map)."""
    m = emu.vm.create_map(MapType.ARRAY, 4, 8 * len(offsets), 1, name=f"{name}_out")
    a = Asm()
    a.mov(R6, R1).mov(R1, 0).stxw(R10, -4, R1)
    a.ld_map_fd(R1, "out").mov(R2, R10).add(R2, -4).call(HelperId.map_lookup_elem)
    a.jeq(R0, 0, "out")
    for i, off in enumerate(offsets):
        a.ldxdw(R7, R6, off).stxdw(R0, 8 * i, R7)
    a.label("out").mov(R0, 0).exit()
    insns = a.assemble().resolve({"out": m.fd})
    return emu.load_program(insns, prog_type, name=name, **kw), m


def words(m, n: int) -> list[int]:
    """The ``n`` u64 words of element 0 of array map ``m``."""
    raw = bytes(m.storage[0][: 8 * n])
    return [int.from_bytes(raw[i : i + 8], "little") for i in range(0, 8 * n, 8)]
