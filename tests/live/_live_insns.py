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


def ringbuf_counted(map_fd: int, drops_fd: int, times: int, value: int = 7) -> bytes:
    """``times`` x ``bpf_ringbuf_output(map, &{value, i}, 16, 0)``; each failure adds 1 to
    u64 slot 0 of array map ``drops_fd``. Returns 0."""
    out = [Insn(MOV64_IMM, 6, 0, 0, 0)]  # r6 = i
    for _ in range(times):
        out += [
            Insn(LDDW, 1, 0, 0, value),
            Insn(STX_DW, 10, 1, -16, 0),
            Insn(STX_DW, 10, 6, -8, 0),
            Insn(ADD64_IMM, 6, 0, 0, 1),
            Insn(LDDW, 1, 1, 0, map_fd),
            Insn(MOV64_REG, 2, 10),
            Insn(ADD64_IMM, 2, 0, 0, -16),
            Insn(MOV64_IMM, 3, 0, 0, 16),
            Insn(MOV64_IMM, 4, 0, 0, 0),
            Insn(CALL, 0, 0, 0, 130),  # bpf_ringbuf_output
            Insn(JEQ_IMM, 0, 0, 9, 0),  # success: skip the drop count (9 slots; lddw takes 2)
            Insn(ST_W, 10, 0, -20, 0),
            Insn(LDDW, 1, 1, 0, drops_fd),
            Insn(MOV64_REG, 2, 10),
            Insn(ADD64_IMM, 2, 0, 0, -20),
            Insn(CALL, 0, 0, 0, 1),  # bpf_map_lookup_elem
            Insn(JEQ_IMM, 0, 0, 2, 0),
            Insn(MOV64_IMM, 1, 0, 0, 1),
            Insn(ATOMIC_DW, 0, 1, 0, 0),
        ]
    out += [Insn(MOV64_IMM, 0, 0, 0, 0), Insn(EXIT)]
    return encode(out)


def ringbuf_reserve_discard(map_fd: int) -> bytes:
    """Reserve 8 bytes and discard them; return 0."""
    return encode(
        [
            Insn(LDDW, 1, 1, 0, map_fd),
            Insn(MOV64_IMM, 2, 0, 0, 8),
            Insn(MOV64_IMM, 3, 0, 0, 0),
            Insn(CALL, 0, 0, 0, 131),  # bpf_ringbuf_reserve
            Insn(JEQ_IMM, 0, 0, 3, 0),
            Insn(MOV64_REG, 1, 0),
            Insn(MOV64_IMM, 2, 0, 0, 0),
            Insn(CALL, 0, 0, 0, 133),  # bpf_ringbuf_discard
            Insn(MOV64_IMM, 0, 0, 0, 0),
            Insn(EXIT),
        ]
    )


def perf_output(map_fd: int, value: int) -> bytes:
    """``bpf_perf_event_output(ctx, map, BPF_F_CURRENT_CPU, &value, 8)``; return 0."""
    return encode(
        [
            Insn(MOV64_REG, 6, 1),
            Insn(LDDW, 1, 0, 0, value),
            Insn(STX_DW, 10, 1, -8, 0),
            Insn(MOV64_REG, 1, 6),
            Insn(LDDW, 2, 1, 0, map_fd),
            Insn(LDDW, 3, 0, 0, 0xFFFFFFFF),
            Insn(MOV64_REG, 4, 10),
            Insn(ADD64_IMM, 4, 0, 0, -8),
            Insn(MOV64_IMM, 5, 0, 0, 8),
            Insn(CALL, 0, 0, 0, 25),  # bpf_perf_event_output
            Insn(MOV64_IMM, 0, 0, 0, 0),
            Insn(EXIT),
        ]
    )
