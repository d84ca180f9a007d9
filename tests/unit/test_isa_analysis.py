"""Classification, jump/call targets, register use and program-level checks."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from bpfmux.errors import ParseError
from bpfmux.isa import Insn
from bpfmux.isa.analysis import (
    atomic_op,
    branch_targets,
    call_target,
    helper_id,
    is_alu,
    is_atomic,
    is_call,
    is_callx,
    is_cond_jump,
    is_exit,
    is_helper_call,
    is_jump,
    is_kfunc_call,
    is_ld_func,
    is_ld_map,
    is_lddw,
    is_legacy_load,
    is_load,
    is_may_goto,
    is_pseudo_call,
    is_signed_alu,
    is_store,
    is_uncond_jump,
    jump_offset,
    jump_target,
    mem_size,
    mnemonic,
    pseudo,
    slot_index,
    subprogram_entries,
)
from bpfmux.isa.asm import assemble
from bpfmux.isa.flow import regs_read, regs_written
from bpfmux.isa.opcodes import Atomic, Pseudo
from bpfmux.isa.strategies import valid_insns
from bpfmux.isa.validity import validate_program


def test_classes() -> None:
    (lddw, add, sdiv, ldx, ldxs, st, stx, xadd, ja, ja32, jeq, jset32, goto_may, call, local, kfunc, callx, ret) = (
        assemble(
            """
            lddw %r1, map_fd(3)
            add32 %r1, 2
            sdiv %r1, %r2
            ldxw %r0, [%r1+4]
            ldxsh %r0, [%r1+2]
            stb [%r10-1], 1
            stxdw [%r10-8], %r1
            lock fetch add32 [%r10-8], %r1
            ja +0
            ja32 +0
            jeq %r1, 0, +0
            jset32 %r1, %r2, +0
            may_goto +0
            call 5
            call local +0
            call runtime 77
            call %r3
            exit
            """
        )
    )
    assert is_lddw(lddw) and is_ld_map(lddw) and pseudo(lddw) == Pseudo.MAP_FD
    assert pseudo(add) is None and not is_ld_map(add)
    assert is_alu(add) and is_alu(sdiv) and not is_alu(ldx)
    assert is_signed_alu(sdiv) and not is_signed_alu(add)
    assert is_load(ldx) and is_load(ldxs) and not is_load(stx)
    assert is_store(st) and is_store(stx) and not is_store(xadd)
    assert is_atomic(xadd) and atomic_op(xadd) == Atomic.ADD and atomic_op(stx) is None
    assert [mem_size(i) for i in (ldx, ldxs, st, stx, xadd)] == [4, 2, 1, 8, 4]
    for i in (ja, ja32, jeq, jset32, goto_may):
        assert is_jump(i), i
    assert is_uncond_jump(ja) and is_uncond_jump(ja32) and not is_uncond_jump(jeq)
    assert is_cond_jump(jeq) and is_cond_jump(jset32) and not is_cond_jump(ja)
    assert is_may_goto(goto_may)
    for i in (call, local, kfunc, callx, ret):
        assert not is_jump(i), i
    assert is_call(call) and is_call(callx) and is_call(kfunc) and not is_call(ret)
    assert is_helper_call(call) and helper_id(call) == 5
    assert helper_id(local) is None and helper_id(kfunc) is None
    assert is_pseudo_call(local) and is_kfunc_call(kfunc) and is_callx(callx) and is_exit(ret)
    with pytest.raises(ParseError, match="does not access memory"):
        mem_size(add)
    with pytest.raises(ParseError, match="add32 .* is not a jump"):
        jump_offset(add)
    with pytest.raises(ParseError, match="not a bpf-to-bpf call"):
        call_target(call, 0)


def test_atomic_ops() -> None:
    for imm in (Atomic.XCHG, Atomic.CMPXCHG, Atomic.LOAD_ACQ, Atomic.STORE_REL):
        assert atomic_op(Insn(0xDB, 1, 2, 0, imm)) == imm
    assert atomic_op(Insn(0xDB, 1, 2, 0, Atomic.XOR | Atomic.FETCH)) == Atomic.XOR


def test_jump_targets_count_slots() -> None:
    insns = assemble(
        """
        jeq %r1, 0, over     # slot 0
        lddw %r2, 1          # slots 1-2
        over: ja32 last      # slot 3
        call local func      # slot 4
        lddw %r3, func(func) # slots 5-6
        last: exit           # slot 7
        func: exit           # slot 8
        """
    )
    slots = [0, 1, 3, 4, 5, 7, 8]
    assert slot_index(insns) == {s: i for i, s in enumerate(slots)}
    assert jump_target(insns[0], 0) == 3
    assert jump_offset(insns[2]) == 3 and jump_target(insns[2], 3) == 7
    assert call_target(insns[3], 4) == 8
    assert is_ld_func(insns[4]) and call_target(insns[4], 5) == 8
    assert branch_targets(insns) == [2, None, 5, 6, 6, None, None]
    assert subprogram_entries(insns) == [0, 6]
    validate_program(insns)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ja +1\nexit", "slot 0: ja targets slot 2, outside the program (2 slots)"),
        ("ja -2\nexit", "targets slot -1, outside"),
        ("ja +1\nlddw %r0, 1\nexit", "slot 0: ja targets slot 2, into the middle of an lddw"),
        ("call local +5\nexit", "slot 0: call targets slot 6"),
    ],
)
def test_bad_targets(text: str, message: str) -> None:
    insns = assemble(text)
    with pytest.raises(ParseError) as info:
        branch_targets(insns)
    assert message in str(info.value)
    with pytest.raises(ParseError):
        validate_program(insns)


def test_subprogram_entry_outside() -> None:
    with pytest.raises(ParseError, match="outside the program"):
        subprogram_entries(assemble("call local +9\nexit"))


def test_validate_program_names_slot() -> None:
    insns = [Insn(0x18, 1, 0, 0, 1), Insn(0x95, 1)]
    with pytest.raises(ParseError, match=r"slot 2: exit \(0x95\): reserved field dst=1"):
        validate_program(insns)


@pytest.mark.parametrize(
    ("text", "read", "written"),
    [
        ("mov %r1, 5", set(), {1}),
        ("mov32 %r1, %r2", {2}, {1}),
        ("add %r1, 5", {1}, {1}),
        ("sub %r1, %r2", {1, 2}, {1}),
        ("neg %r3", {3}, {3}),
        ("be16 %r3", {3}, {3}),
        ("movsx864 %r1, %r2", {2}, {1}),
        ("lddw %r4, 7", set(), {4}),
        ("ldxw %r1, [%r2+4]", {2}, {1}),
        ("stw [%r1+0], 3", {1}, set()),
        ("stxw [%r1+0], %r3", {1, 3}, set()),
        ("lock add [%r1+0], %r3", {1, 3}, set()),
        ("lock fetch or [%r1+0], %r3", {1, 3}, {3}),
        ("lock xchg [%r1+0], %r3", {1, 3}, {3}),
        ("lock cmpxchg [%r1+0], %r3", {0, 1, 3}, {0}),
        ("ldacqw %r4, [%r1+0]", {1}, {4}),
        ("streldw [%r1+0], %r3", {1, 3}, set()),
        ("jeq %r1, 2, +0", {1}, set()),
        ("jgt32 %r1, %r2, +0", {1, 2}, set()),
        ("ja +0", set(), set()),
        ("call 1", {1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}),
        ("call %r7", {1, 2, 3, 4, 5, 7}, {0, 1, 2, 3, 4, 5}),
        ("ldabsb 3", {6}, {0, 1, 2, 3, 4, 5}),
        ("ldindh %r7, 3", {6, 7}, {0, 1, 2, 3, 4, 5}),
        ("exit", {0}, set()),
    ],
)
def test_register_use(text: str, read: set[int], written: set[int]) -> None:
    insn = assemble(text + "\nexit")[0]
    assert regs_read(insn) == read
    assert regs_written(insn) == written


@settings(max_examples=1500, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(valid_insns())
def test_total_on_valid(insn: Insn) -> None:
    # the helpers never raise on valid input and agree with each other
    name = mnemonic(insn)
    assert not name.startswith("op ")
    assert regs_read(insn) <= set(range(11)) and regs_written(insn) <= set(range(11))
    if is_jump(insn):
        assert jump_target(insn, 100) == 101 + jump_offset(insn)
        assert not is_call(insn) and not is_exit(insn)
    if is_call(insn):
        assert name in ("call", "callx")
    if is_load(insn) or is_store(insn) or is_atomic(insn) or is_legacy_load(insn):
        assert mem_size(insn) in (1, 2, 4, 8)
    assert sum([is_alu(insn), is_jump(insn) or is_call(insn) or is_exit(insn), is_lddw(insn)]) <= 1


def test_mnemonic_of_unknown() -> None:
    assert mnemonic(Insn(0xFF)) == "op 0xff"
    assert mnemonic(Insn(0xDB, 1, 2, 0, 0x7)) == "lock ?"
