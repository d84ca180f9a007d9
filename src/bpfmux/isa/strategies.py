"""Hypothesis strategies that generate eBPF instructions (for tests; needs ``hypothesis``).

``valid_insns()`` draws instructions that pass
:func:`bpfmux.isa.validity.validate`, spread over every valid opcode, so a
VM, verifier or printer can be fuzzed with well-formed input::

    from hypothesis import given
    from bpfmux.isa.strategies import valid_insns

    @given(valid_insns())
    def test_prints(insn):
        assert format_insn(insn) != "<unknown>"

``any_insns()`` draws arbitrary field values (mostly invalid).
"""

from __future__ import annotations

import itertools
from functools import cache

from hypothesis import assume
from hypothesis import strategies as st

from ..errors import ParseError
from .insn import Insn
from .opcodes import LDDW
from .validity import validate

__all__ = ["VALID_OPCODES", "any_insns", "repair_insn", "valid_insns", "valid_opcodes"]

# Field values that select operations (widths, atomics, pseudo kinds, address spaces).
_SPECIAL_IMMS = (0, 1, 16, 32, 64, 0x10000, 0x01, 0x40, 0x41, 0x50, 0x51, 0xA0, 0xA1, 0xE1, 0xF1, 0x100, 0x110)
_SPECIAL_OFFS = (0, 1, 8, 16, 32)
_FIELDS = ("dst", "src", "off", "imm")


@cache
def valid_opcodes() -> tuple[int, ...]:
    """Every opcode for which some field values form a valid instruction."""
    out = []
    for op in range(256):
        for src, off, imm in itertools.product(range(7), _SPECIAL_OFFS, _SPECIAL_IMMS):
            try:
                validate(Insn(op, 0, src, off, imm))
            except ParseError:
                continue
            out.append(op)
            break
    return tuple(out)


VALID_OPCODES = valid_opcodes()


def repair_insn(insn: Insn) -> Insn | None:
    """``insn`` with the fewest of its fields zeroed so that it is valid, or ``None`` if that is not enough.

    Useful to turn random field values into a valid instruction of a given opcode.
    """
    for n in range(len(_FIELDS) + 1):
        for fields in itertools.combinations(_FIELDS, n):
            values = {f: getattr(insn, f) for f in _FIELDS}
            for f in fields:
                values[f] = 0
            cand = Insn(insn.opcode, **values)
            try:
                validate(cand)
            except ParseError:
                continue
            return cand
    return None


@st.composite
def valid_insns(draw: st.DrawFn) -> Insn:
    """A valid instruction (any opcode of :data:`VALID_OPCODES`, varied fields)."""
    op = draw(st.sampled_from(VALID_OPCODES))
    dst = draw(st.integers(0, 10))
    src = draw(st.one_of(st.integers(0, 10), st.integers(0, 6)))
    off = draw(st.one_of(st.sampled_from(_SPECIAL_OFFS), st.integers(-(1 << 15), (1 << 15) - 1)))
    if op == LDDW:
        imm = draw(st.integers(0, (1 << 64) - 1))
    else:
        imm = draw(st.one_of(st.sampled_from(_SPECIAL_IMMS), st.integers(-(1 << 31), (1 << 31) - 1)))
    insn = repair_insn(Insn(op, dst, src, off, imm))
    assume(insn is not None)
    assert insn is not None
    return insn


def any_insns() -> st.SearchStrategy[Insn]:
    """An instruction with arbitrary in-range field values (usually invalid)."""
    return st.builds(
        Insn,
        opcode=st.integers(0, 255),
        dst=st.integers(0, 15),
        src=st.integers(0, 15),
        off=st.integers(-(1 << 15), (1 << 15) - 1),
        imm=st.integers(-(1 << 31), (1 << 31) - 1),
    )
