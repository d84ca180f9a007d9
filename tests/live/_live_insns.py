"""Tiny hand-assembled programs for the live-backend tests (no ELF needed)."""

from __future__ import annotations

from bpfmux.isa.insn import Insn, encode

MOV64_IMM = 0xB7
MOV64_REG = 0xBF
ADD64_IMM = 0x07
LDDW = 0x18
ST_W = 0x62
STX_DW = 0x7B
LDX_DW = 0x79
ATOMIC_DW = 0xDB
CALL = 0x85
EXIT = 0x95
JEQ_IMM = 0x15
JNE_IMM = 0x55
JA = 0x05


def ret(value: int) -> bytes:
    """``r0 = value; exit``."""
    return encode([Insn(MOV64_IMM, 0, 0, 0, value), Insn(EXIT)])


def count_into(map_fd: int, slot: int, ret_value: int = 0) -> bytes:
    """Atomically add 1 to u64 slot ``slot`` of an array map, then return ``ret_value``."""
    return encode(
        [
            Insn(ST_W, 10, 0, -4, slot),  # *(u32 *)(fp - 4) = slot
            Insn(LDDW, 1, 1, 0, map_fd),  # r1 = map (pseudo map fd)
            Insn(MOV64_REG, 2, 10),
            Insn(ADD64_IMM, 2, 0, 0, -4),
            Insn(CALL, 0, 0, 0, 1),  # bpf_map_lookup_elem
            Insn(JEQ_IMM, 0, 0, 2, 0),
            Insn(MOV64_IMM, 1, 0, 0, 1),
            Insn(ATOMIC_DW, 0, 1, 0, 0),  # lock *(u64 *)(r0) += r1
            Insn(MOV64_IMM, 0, 0, 0, ret_value),
            Insn(EXIT),
        ]
    )


def ringbuf_output(map_fd: int, value: int, times: int = 1) -> bytes:
    """``bpf_ringbuf_output(map, &value, 8, 0)`` ``times`` times (unrolled), return 0."""
    out = [Insn(LDDW, 1, 0, 0, value), Insn(STX_DW, 10, 1, -8, 0)]
    for _ in range(times):
        out += [
            Insn(LDDW, 1, 1, 0, map_fd),
            Insn(MOV64_REG, 2, 10),
            Insn(ADD64_IMM, 2, 0, 0, -8),
            Insn(MOV64_IMM, 3, 0, 0, 8),
            Insn(MOV64_IMM, 4, 0, 0, 0),
            Insn(CALL, 0, 0, 0, 130),  # bpf_ringbuf_output
        ]
    out += [Insn(MOV64_IMM, 0, 0, 0, 0), Insn(EXIT)]
    return encode(out)
