"""The eBPF instruction model and its binary encoding.

An :class:`Insn` is one logical instruction. ``lddw`` is one ``Insn`` with a
64-bit ``imm`` that occupies two 8-byte slots; :attr:`Insn.size` says how many
slots an instruction takes, and jump offsets are always counted in slots, as
the kernel does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from ..errors import ParseError
from ..record import Frozen
from ..record import set_field as _set
from .opcodes import LDDW

_INSN = struct.Struct("<BBhi")


class Insn(Frozen):
    """One eBPF instruction.

    :ivar opcode: the 8-bit opcode.
    :ivar dst: destination register (0-10).
    :ivar src: source register (0-10), or the pseudo kind of ``lddw``/``call``.
    :ivar off: signed 16-bit offset.
    :ivar imm: signed 32-bit immediate; for ``lddw`` the full 64-bit value
        (low word from the first slot, high word from the second), unsigned.
    """

    __slots__ = ("opcode", "dst", "src", "off", "imm")

    opcode: int
    dst: int
    src: int
    off: int
    imm: int

    def __init__(self, opcode: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> None:
        _set(self, "opcode", opcode)
        _set(self, "dst", dst)
        _set(self, "src", src)
        _set(self, "off", off)
        _set(self, "imm", imm)

    # equality, hash and pickling spelled out (the emulator and the verifier
    # key dicts by instructions; Frozen's generic ones loop over the fields)
    def __eq__(self, other: object) -> bool:
        if other.__class__ is Insn:
            return (self.opcode, self.dst, self.src, self.off, self.imm) == (
                other.opcode, other.dst, other.src, other.off, other.imm
            )  # fmt: skip
        return NotImplemented

    def __hash__(self) -> int:  # type: ignore[override]  # Value's is None
        return hash((self.opcode, self.dst, self.src, self.off, self.imm))

    def __reduce__(self) -> tuple[type[Insn], tuple[int, int, int, int, int]]:
        return Insn, (self.opcode, self.dst, self.src, self.off, self.imm)

    def replace(self, **changes: Any) -> Insn:
        """A copy with ``changes`` applied (``opcode``, ``dst``, ``src``, ``off``, ``imm``).

        :raises TypeError: a name in ``changes`` is not a field.
        """
        return Insn(
            changes.pop("opcode", self.opcode),
            changes.pop("dst", self.dst),
            changes.pop("src", self.src),
            changes.pop("off", self.off),
            changes.pop("imm", self.imm),
            **changes,
        )

    @property
    def size(self) -> int:
        """Number of 8-byte slots (2 for ``lddw``, else 1)."""
        return 2 if self.opcode == LDDW else 1

    @property
    def cls(self) -> int:
        """Instruction class (``opcode & 7``)."""
        return self.opcode & 0x07

    def encode(self) -> bytes:
        """Encode to 8 (or 16 for ``lddw``) little-endian bytes.

        :raises ParseError: a field is out of range.
        """
        regs = (self.dst & 0x0F) | ((self.src & 0x0F) << 4)
        if not (0 <= self.dst <= 15 and 0 <= self.src <= 15):
            raise ParseError(f"register out of range in {self!r}")
        if not -(1 << 15) <= self.off < (1 << 15):
            raise ParseError(f"offset {self.off} does not fit 16 bits")
        if self.opcode == LDDW:
            if not -(1 << 63) <= self.imm < (1 << 64):
                raise ParseError(f"lddw immediate {self.imm} does not fit 64 bits")
            v = self.imm & 0xFFFFFFFFFFFFFFFF
            lo, hi = _s32(v & 0xFFFFFFFF), _s32(v >> 32)
            return _INSN.pack(self.opcode, regs, self.off, lo) + _INSN.pack(0, 0, 0, hi)
        if not -(1 << 31) <= self.imm < (1 << 32):
            raise ParseError(f"immediate {self.imm} does not fit 32 bits")
        return _INSN.pack(self.opcode, regs, self.off, _s32(self.imm & 0xFFFFFFFF))

    def __str__(self) -> str:
        """The instruction in ``llvm-objdump`` syntax (see :mod:`bpfmux.isa.disasm`)."""
        from .disasm import format_insn

        return format_insn(self)


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def canonical(insn: Insn) -> Insn:
    """``insn`` with its ``imm`` as decoding its encoding gives it.

    A 32-bit immediate may be given unsigned (``0x80000000``-``0xffffffff``,
    which :meth:`Insn.encode` accepts); it is turned into the signed value it
    encodes. Everything else is returned as it is.
    """
    if insn.opcode != LDDW and (1 << 31) <= insn.imm < (1 << 32):
        return Insn(insn.opcode, insn.dst, insn.src, insn.off, insn.imm - (1 << 32))
    return insn


def encode(insns: list[Insn]) -> bytes:
    """Encode a program.

    :raises ParseError: an instruction has a field out of range.
    """
    return b"".join(i.encode() for i in insns)


def decode(data: bytes | bytearray | memoryview, source: str | None = None, *, strict: bool = False) -> list[Insn]:
    """Decode raw instruction bytes into a list of :class:`Insn`.

    The second slot of an ``lddw`` must be all zero except its ``imm`` (as the
    kernel requires). With ``strict=True`` every instruction is also checked
    by :func:`bpfmux.isa.validity.validate` (known opcode, reserved fields
    zero, registers r0-r10), and the error names the slot and the field.

    :raises ParseError: the length is not a multiple of 8, an ``lddw`` is
        cut off or its second slot is malformed, or (``strict``) an
        instruction is not a valid eBPF instruction.
    """
    if len(data) % 8:
        raise ParseError(f"instruction bytes not a multiple of 8 ({len(data)})", len(data), source)
    out: list[Insn] = []
    n = len(data) // 8
    i = 0
    unpack = _INSN.unpack_from
    while i < n:
        op, regs, off, imm = unpack(data, i * 8)
        if op == LDDW:
            if i + 1 >= n:
                raise ParseError("lddw without its second slot", i * 8, source)
            op2, regs2, off2, imm2 = unpack(data, i * 8 + 8)
            if op2 or regs2 or off2:
                raise ParseError(
                    f"malformed lddw at slot {i}: its second slot must have opcode, registers and offset 0 "
                    f"(got opcode={op2:#04x} regs={regs2:#04x} off={off2})",
                    i * 8 + 8,
                    source,
                )
            value = (imm & 0xFFFFFFFF) | ((imm2 & 0xFFFFFFFF) << 32)
            out.append(Insn(op, regs & 0x0F, regs >> 4, off, value))
            i += 2
        else:
            out.append(Insn(op, regs & 0x0F, regs >> 4, off, imm))
            i += 1
    if strict:
        from .validity import validate_program

        validate_program(out, targets=False, source=source)
    return out


def slot_offsets(insns: Sequence[Insn]) -> list[int]:
    """Slot index of each instruction (``lddw`` takes two slots)."""
    out = []
    pos = 0
    for i in insns:
        out.append(pos)
        pos += i.size
    return out
