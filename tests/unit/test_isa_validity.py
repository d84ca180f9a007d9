"""The one instruction validator (:mod:`bpfmux.isa.validity`) and how the VM and the verifier word its flaws."""

from __future__ import annotations

import errno

import pytest

from bpfmux.emu.verifier.core import verify
from bpfmux.emu.vm.machine import runnable
from bpfmux.errors import VerifierError
from bpfmux.isa import Insn
from bpfmux.isa.opcodes import Atomic
from bpfmux.isa.validity import Family, FlawKind, first_flaw, flaws
from bpfmux.uapi import ProgType

RET0 = [Insn(0xB7, 0, 0, 0, 0), Insn(0x95)]


@pytest.mark.parametrize(
    ("insn", "kinds", "family"),
    [
        (Insn(0xB7, 1, 0, 0, 5), [], None),
        (Insn(0x0F, 1, 11, 3, 0), [FlawKind.RESERVED, FlawKind.REGISTER], Family.ALU64),  # goes on past off
        (Insn(0x07, 1, 2, 0, 1), [FlawKind.RESERVED], Family.ALU64),
        (Insn(0x95, 1, 2), [FlawKind.RESERVED, FlawKind.RESERVED], Family.EXIT),
        (Insn(0xFF), [FlawKind.OPCODE], Family.ALU64),
        (Insn(0x9D), [FlawKind.OPCODE], Family.EXIT),
        (Insn(0xD4, 1, 0, 0, 8), [FlawKind.OPERAND], Family.END),
        (Insn(0x85, 0, 3, 0, 1), [FlawKind.OPERAND], Family.CALL),
        (Insn(0xD3, 1, 2, 0, Atomic.ADD), [FlawKind.OPERAND], Family.ATOMIC),
        (Insn(0xB7, 11), [FlawKind.REGISTER], Family.ALU64),
        (Insn(0x07, 1, 0, 0, 1 << 31), [FlawKind.RANGE], Family.ALU64),
    ],
)
def test_flaw_kinds(insn: Insn, kinds: list[FlawKind], family: Family | None) -> None:
    found = list(flaws(insn))
    assert [f.kind for f in found] == kinds
    if found:
        assert found[0].family is family and str(found[0]) == found[0].message
    else:
        assert first_flaw(insn) is None


def test_vm_ignores_unused_fields_and_faults_undefined_operations() -> None:
    insn, problem = runnable(Insn(0x07, 1, 12, 5, 3))  # add: src and off are not used
    assert problem is None and insn == Insn(0x07, 1, 0, 0, 3)
    insn, problem = runnable(Insn(0xB7, 1, 0, 0, 0xFFFFFFFF))  # an unsigned 32-bit imm
    assert problem is None and insn.imm == -1
    assert runnable(Insn(0x3F, 1, 2, 2))[1] == "div (0x3f): off=2 must be 0 (unsigned) or 1 (signed)"
    assert runnable(Insn(0x9D))[1] == "exit (0x9d): exit has no register-source form"
    assert runnable(Insn(0xB7, 10, 0, 0, 1))[1] == "r10 (frame pointer) is read-only"
    assert runnable(Insn(0xDB, 1, 10, 0, Atomic.XCHG))[1] == "r10 (frame pointer) is read-only"
    assert runnable(Insn(0xBF, 1, 2, 1, 1))[1] == "addr_space_cast (arena) is not supported"
    assert runnable(Insn(0x18, 1, 9, 0, 0))[1] is None  # an unknown pseudo source is the loader's to refuse


@pytest.mark.parametrize(
    ("insn", "message"),
    [
        (Insn(0x07, 0, 1, 0, 1), "BPF_ALU uses reserved fields"),
        (Insn(0x04, 0, 11, 0, 1), "BPF_ALU uses reserved fields"),
        (Insn(0x0F, 0, 11, 3, 0), "BPF_ALU uses reserved fields"),  # fields are checked before registers
        (Insn(0x0F, 0, 11, 0, 0), "R11 is invalid"),
        (Insn(0xFF), "unknown opcode ff"),
        (Insn(0x96), "unknown opcode 96"),
        (Insn(0xD4, 0, 0, 1, 16), "BPF_END uses reserved fields"),
        (Insn(0x95, 1), "BPF_EXIT uses reserved fields"),
        (Insn(0x8D, 1), "unknown opcode 8d"),  # callx is not in the kernel's instruction table
        (Insn(0x18, 1, 7, 0, 0), "unrecognized bpf_ld_imm64 insn"),
        (Insn(0xD3, 10, 0, -8, Atomic.ADD), "invalid atomic operand size"),
        (Insn(0xDB, 10, 0, -8, 0x02), "BPF_ATOMIC uses invalid atomic opcode 02"),
        (Insn(0xBF, 0, 1, 1, 1), "addr_space_cast insn can only be used in a program that has an associated arena"),
        (Insn(0x37, 0, 0, 0, 0), "div by zero"),
        (Insn(0x67, 0, 0, 0, 64), "invalid shift 64"),
        (Insn(0xE5, 0, 0, 0, 5), "invalid may_goto imm 5"),
        (Insn(0xE5, 1, 0, 1, 0), "invalid may_goto imm 0"),  # a register: the same message
    ],
)
def test_verifier_words_flaws_as_the_kernel(insn: Insn, message: str) -> None:
    """Checked against Linux 6.18: the same message for each (an exit ends the program)."""
    prog = [Insn(0xB7, 0, 0, 0, 0), insn] if insn.opcode == 0x95 else [Insn(0xB7, 0, 0, 0, 0), insn, *RET0]
    with pytest.raises(VerifierError) as info:
        verify(prog, ProgType.KPROBE)
    assert info.value.errno == errno.EINVAL
    assert message in info.value.log


def test_may_goto_with_offset_zero_is_a_no_op() -> None:
    """Linux 6.18 accepts ``may_goto +0``."""
    verify([Insn(0xB7, 0, 0, 0, 0), Insn(0xE5, 0, 0, 0, 0), *RET0], ProgType.KPROBE)


def test_unexplored_encodings_are_not_checked() -> None:
    """Like the kernel, fields are checked on explored instructions only: a
    reserved field behind a branch that is never taken is accepted."""
    verify([Insn(0xB7, 0, 0, 0, 0), Insn(0x15, 0, 0, 1, 0), Insn(0x07, 0, 1, 0, 1), Insn(0x95)], ProgType.KPROBE)
