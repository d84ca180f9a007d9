"""Programs the kernel accepts (checked on Linux 6.18) that bpfmux's verifier must accept too,
and the facts it reports."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data" / "verifier"))

from verifier_corpus import (
    ADD,
    ALU64_IMM,
    ALU64_REG,
    AND,
    ARRAY,
    CALL,
    DW,
    EXIT,
    HASH,
    JEQ,
    JLT,
    JMP_IMM,
    LD_MAP,
    LDX,
    LOOKUP,
    MOV64_IMM,
    MOV64_REG,
    RET0,
    RINGBUF,
    ST,
    STX,
    W,
    _rand,
)

from bpfmux.emu.verifier.core import MapInfo, verify
from bpfmux.errors import VerifierError
from bpfmux.uapi import HelperId as H
from bpfmux.uapi import ProgType as P


def _maps(*defs):
    return {i: MapInfo(m.type, m.key_size, m.value_size, m.max_entries, m.flags) for i, m in enumerate(defs)}


def test_bounded_loop_accepted_and_reported() -> None:
    prog = [MOV64_IMM(1, 0), MOV64_IMM(0, 0), ALU64_REG(ADD, 0, 1), ALU64_IMM(ADD, 1, 1), JMP_IMM(JLT, 1, 100, -3),
            EXIT()]
    r = verify(prog, P.KPROBE)
    assert r.has_loops
    assert r.insns_processed > 300  # every iteration is interpreted


def test_checked_lookup_and_bounded_index() -> None:
    prog = [*_rand(6), ALU64_IMM(AND, 6, 7), *LOOKUP(), JMP_IMM(JEQ, 0, 0, 2), ALU64_REG(ADD, 0, 6),
            LDX(DW, 0, 0, 0), *RET0]
    r = verify(prog, P.KPROBE, maps=_maps(ARRAY))
    assert r.helpers == {H.get_prandom_u32, H.map_lookup_elem}
    assert r.maps == {0}
    assert r.stack_depth[0] == 4


def test_array_lookup_with_constant_key_is_not_null() -> None:
    # Linux >= 6.14: a constant in-range key of an array map needs no null check
    prog = [*LOOKUP(), LDX(DW, 0, 0, 0), *RET0]
    verify(prog, P.KPROBE, maps=_maps(ARRAY))
    with pytest.raises(VerifierError):
        verify(prog, P.KPROBE, maps=_maps(HASH))


def test_ringbuf_reserve_submit() -> None:
    prog = [LD_MAP(1, 0), MOV64_IMM(2, 16), MOV64_IMM(3, 0), CALL(H.ringbuf_reserve), JMP_IMM(JEQ, 0, 0, 5),
            ST(DW, 0, 8, 1), MOV64_REG(1, 0), MOV64_IMM(2, 0), CALL(H.ringbuf_submit), *RET0]
    verify(prog, P.KPROBE, maps=_maps(RINGBUF))


def test_spill_and_fill_keeps_bounds() -> None:
    prog = [*_rand(1), ALU64_IMM(AND, 1, 7), STX(DW, 10, 1, -16), *LOOKUP(), JMP_IMM(JEQ, 0, 0, 3),
            LDX(DW, 1, 10, -16), ALU64_REG(ADD, 0, 1), LDX(DW, 0, 0, 0), *RET0]
    verify(prog, P.KPROBE, maps=_maps(ARRAY))


def test_uninitialized_stack_read_allowed_for_root() -> None:
    verify([LDX(DW, 0, 10, -8), EXIT()], P.KPROBE)


def test_log_level_2_traces_every_instruction() -> None:
    r = verify([MOV64_IMM(0, 0), EXIT()], P.KPROBE, log_level=2)
    assert "0: (b7) r0 = 0" in r.log and "1: (95) exit" in r.log


def test_error_carries_log_and_errno() -> None:
    with pytest.raises(VerifierError) as exc:
        verify([ST(W, 10, -4, 0), LDX(DW, 0, 1, 200), EXIT()], P.KPROBE, name="p")
    e = exc.value
    assert e.errno == errno.EACCES and isinstance(e, PermissionError)
    assert e.program == "p"
    lines = e.log.splitlines()
    assert lines[-2] == "invalid bpf_context access off=200 size=8"
    assert any("r0 = *(u64 *)(r1 +200)" in line for line in lines)


def test_complexity_limit_is_a_parameter() -> None:
    prog = [MOV64_IMM(1, 10), ALU64_IMM(ADD, 1, 1), JMP_IMM(0x20, 1, 5, -2), *RET0]
    with pytest.raises(VerifierError) as exc:
        verify(prog, P.KPROBE, max_insns=5000)
    assert exc.value.errno == errno.E2BIG
