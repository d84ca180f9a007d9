"""A Python builder for eBPF programs: generate instructions without a compiler.

Registers are the constants ``R0`` … ``R10``; a plain ``int`` operand is an
immediate. Jumps name labels (strings) that :meth:`Asm.assemble` resolves, or
take an ``int`` relative offset in slots. Map references become
:class:`Relocation` records that a backend fills in later with
:meth:`Program.resolve`. Every method returns the builder, so calls chain.

Example — count events per CPU in an array map and return 0::

    from bpfmux.isa.build import Asm, R0, R1, R2, R10
    from bpfmux.uapi import HelperId

    a = Asm()
    a.call(HelperId.get_smp_processor_id)
    a.stxw(R10, -4, R0)                  # key = cpu
    a.ld_map_fd(R1, "counts")            # relocation: fd of map "counts"
    a.mov(R2, R10).add(R2, -4)
    a.call(HelperId.map_lookup_elem)
    a.jeq(R0, 0, "out")                  # label, resolved at assemble()
    a.mov(R1, 1)
    a.atomic_add(R0, 0, R1)              # lock *(u64 *)(r0 + 0) += r1
    a.label("out")
    a.mov(R0, 0).exit()
    prog = a.assemble()                  # Program(insns, relocations, labels)
    insns = prog.resolve({"counts": map_fd})

``resolve`` returns the final ``list[Insn]``; ``prog.insns`` keeps the
unrelocated instructions (map fd 0) and ``prog.relocations`` says which
instruction needs what.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping

from ..errors import NotFoundError, ParseError
from ..record import Frozen, Value
from ..record import set_field as _set
from .insn import Insn, encode
from .opcodes import (
    ADDR_SPACE_CAST,
    LDDW,
    Alu,
    Atomic,
    CallKind,
    Class,
    Jmp,
    Mode,
    Pseudo,
    Size,
    Source,
)
from .validity import validate

__all__ = [
    "R0",
    "R1",
    "R2",
    "R3",
    "R4",
    "R5",
    "R6",
    "R7",
    "R8",
    "R9",
    "R10",
    "Asm",
    "Program",
    "Reg",
    "RelocKind",
    "Relocation",
]


class Reg(enum.IntEnum):
    """An eBPF register. ``R10`` is the read-only frame pointer."""

    R0 = 0
    R1 = 1
    R2 = 2
    R3 = 3
    R4 = 4
    R5 = 5
    R6 = 6
    R7 = 7
    R8 = 8
    R9 = 9
    R10 = 10

    def __repr__(self) -> str:
        return f"r{self.value}"


R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = Reg


class RelocKind(enum.Enum):
    """What a :class:`Relocation` asks the backend to fill in."""

    MAP_FD = "map_fd"  #: ``lddw`` ``imm`` = map fd (``src`` = ``Pseudo.MAP_FD``)
    MAP_VALUE = "map_value"  #: ``lddw`` ``imm`` = map fd, high word = offset (``Pseudo.MAP_VALUE``)
    BTF_ID = "btf_id"  #: ``lddw`` ``imm`` = BTF id of a kernel variable (``Pseudo.BTF_ID``)
    KFUNC = "kfunc"  #: ``call`` ``imm`` = BTF id of a kfunc (``src`` = 2)


class Relocation(Frozen):
    """One instruction a backend must patch before loading.

    :ivar index: list index of the instruction in :attr:`Program.insns`.
    :ivar slot: its slot number (8-byte units).
    :ivar kind: what to fill in.
    :ivar ref: the caller's name for the object (a map name, a spec, …).
    :ivar offset: byte offset into the map value (``MAP_VALUE`` only).
    """

    __slots__ = ("index", "slot", "kind", "ref", "offset")

    index: int
    slot: int
    kind: RelocKind
    ref: Hashable
    offset: int

    def __init__(self, index: int, slot: int, kind: RelocKind, ref: Hashable, offset: int = 0) -> None:
        _set(self, "index", index)
        _set(self, "slot", slot)
        _set(self, "kind", kind)
        _set(self, "ref", ref)
        _set(self, "offset", offset)


class Program(Frozen):
    """The result of :meth:`Asm.assemble`.

    :ivar insns: the instructions, with relocated fields left 0.
    :ivar relocations: what must be patched, in instruction order.
    :ivar labels: label name → list index.
    """

    __slots__ = ("insns", "relocations", "labels")

    insns: list[Insn]
    relocations: list[Relocation]
    labels: dict[str, int]

    def __init__(
        self, insns: list[Insn], relocations: list[Relocation] | None = None, labels: dict[str, int] | None = None
    ) -> None:
        _set(self, "insns", insns)
        _set(self, "relocations", [] if relocations is None else relocations)
        _set(self, "labels", {} if labels is None else labels)

    def resolve(self, values: Mapping[Hashable, int]) -> list[Insn]:
        """The instructions with every relocation filled from ``values`` (ref → fd or BTF id).

        :raises NotFoundError: a relocation's ``ref`` is missing from ``values``.
        :raises ParseError: a value does not fit 32 bits.
        """
        out = list(self.insns)
        for r in self.relocations:
            if r.ref not in values:
                raise NotFoundError(
                    r.kind.value, str(r.ref), f"pass it in resolve({{{r.ref!r}: ...}}) (needed by slot {r.slot})"
                )
            value = values[r.ref]
            if not 0 <= value <= 0xFFFFFFFF:
                raise ParseError(f"{r.kind.value} value {value} for {r.ref!r} does not fit 32 bits")
            insn = out[r.index]
            if r.kind is RelocKind.KFUNC:
                imm = value - (1 << 32) if value & 0x80000000 else value
                out[r.index] = Insn(insn.opcode, insn.dst, insn.src, insn.off, imm)
            else:
                high = r.offset if r.kind is RelocKind.MAP_VALUE else 0
                out[r.index] = Insn(insn.opcode, insn.dst, insn.src, insn.off, value | (high << 32))
        return out

    def encode(self, values: Mapping[Hashable, int] | None = None) -> bytes:
        """Encoded bytes; relocations are resolved from ``values`` when given.

        :raises NotFoundError: see :meth:`resolve`.
        """
        return encode(self.resolve(values) if values is not None else self.insns)


Target = str | int
"""A jump target: a label name, or a relative offset in slots."""

_SIZES = {1: Size.B, 2: Size.H, 4: Size.W, 8: Size.DW}


class _Fixup(Value):
    __slots__ = ("index", "slot", "label", "field")

    index: int
    slot: int
    label: str
    field: str  # "off", "imm" or "imm64"

    def __init__(self, index: int, slot: int, label: str, field: str) -> None:
        self.index = index
        self.slot = slot
        self.label = label
        self.field = field


def _imm32(value: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ParseError(f"{what}: immediate must be an int, got {value!r}")
    if not -(1 << 31) <= value < (1 << 32):
        raise ParseError(f"{what}: immediate {value} does not fit 32 bits")
    return value - (1 << 32) if value >= (1 << 31) else value


def _reg(value: object, what: str) -> int:
    if isinstance(value, Reg):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10:
        return value
    raise ParseError(f"{what}: {value!r} is not a register (use R0..R10)")


def _size(size: int, what: str) -> Size:
    if size not in _SIZES:
        raise ParseError(f"{what}: size must be 1, 2, 4 or 8 bytes, got {size!r}")
    return _SIZES[size]


class Asm:
    """Builds a program instruction by instruction; see the module docstring for an example.

    ALU methods come in 64-bit (``add``) and 32-bit (``add32``) forms; the
    second operand is a register (``R3``) or an immediate (``5``). Jump
    methods take a :data:`Target`. Memory methods take ``(reg, off)`` for
    the address, in the order the instruction reads: ``ldxw(dst, src, off)``,
    ``stxw(dst, off, src)``, ``stw(dst, off, imm)``.
    """

    def __init__(self) -> None:
        self._insns: list[Insn] = []
        self._slot = 0
        self._labels: dict[str, tuple[int, int]] = {}  # name -> (slot, index)
        self._fixups: list[_Fixup] = []
        self._relocs: list[Relocation] = []

    # -- basics -----------------------------------------------------------

    @property
    def slot(self) -> int:
        """Slot number the next instruction will occupy."""
        return self._slot

    def __len__(self) -> int:
        return len(self._insns)

    def raw(self, insn: Insn) -> Asm:
        """Append an already built :class:`Insn` as is (validated at :meth:`assemble`)."""
        self._insns.append(insn)
        self._slot += insn.size
        return self

    def label(self, name: str) -> Asm:
        """Define ``name`` at the next instruction.

        :raises ParseError: the label is already defined.
        """
        if name in self._labels:
            raise ParseError(f"label {name!r} is defined twice")
        self._labels[name] = (self._slot, len(self._insns))
        return self

    def _target(self, target: Target, field_name: str, wide: bool = False) -> int:
        if isinstance(target, str):
            self._fixups.append(_Fixup(len(self._insns), self._slot, target, field_name))
            return 0
        if isinstance(target, int) and not isinstance(target, bool):
            limit = 31 if wide else 15
            if not -(1 << limit) <= target < (1 << limit):
                raise ParseError(f"jump offset {target} does not fit {limit + 1} bits")
            return target
        raise ParseError(f"jump target must be a label name or an int offset, got {target!r}")

    # -- ALU --------------------------------------------------------------

    def _alu(self, cls: int, aop: int, dst: Reg | int, src: Reg | int, off: int = 0, name: str = "alu") -> Asm:
        d = _reg(dst, name)
        if isinstance(src, Reg):
            return self.raw(Insn(cls | aop | Source.X, d, int(src), off, 0))
        return self.raw(Insn(cls | aop | Source.K, d, 0, off, _imm32(src, name)))

    def add(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst += src`` (64-bit)."""
        return self._alu(Class.ALU64, Alu.ADD, dst, src, name="add")

    def sub(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst -= src`` (64-bit)."""
        return self._alu(Class.ALU64, Alu.SUB, dst, src, name="sub")

    def mul(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst *= src`` (64-bit)."""
        return self._alu(Class.ALU64, Alu.MUL, dst, src, name="mul")

    def div(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst /= src`` (64-bit unsigned; division by zero gives 0)."""
        return self._alu(Class.ALU64, Alu.DIV, dst, src, name="div")

    def sdiv(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst s/= src`` (64-bit signed, ISA v4)."""
        return self._alu(Class.ALU64, Alu.DIV, dst, src, 1, name="sdiv")

    def mod(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst %= src`` (64-bit unsigned)."""
        return self._alu(Class.ALU64, Alu.MOD, dst, src, name="mod")

    def smod(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst s%= src`` (64-bit signed, ISA v4)."""
        return self._alu(Class.ALU64, Alu.MOD, dst, src, 1, name="smod")

    def or_(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst |= src`` (64-bit)."""
        return self._alu(Class.ALU64, Alu.OR, dst, src, name="or")

    def and_(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst &= src`` (64-bit)."""
        return self._alu(Class.ALU64, Alu.AND, dst, src, name="and")

    def xor(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst ^= src`` (64-bit)."""
        return self._alu(Class.ALU64, Alu.XOR, dst, src, name="xor")

    def lsh(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst <<= src`` (64-bit)."""
        return self._alu(Class.ALU64, Alu.LSH, dst, src, name="lsh")

    def rsh(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst >>= src`` (64-bit logical)."""
        return self._alu(Class.ALU64, Alu.RSH, dst, src, name="rsh")

    def arsh(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst s>>= src`` (64-bit arithmetic)."""
        return self._alu(Class.ALU64, Alu.ARSH, dst, src, name="arsh")

    def mov(self, dst: Reg, src: Reg | int) -> Asm:
        """``dst = src`` (64-bit; an immediate is sign-extended)."""
        return self._alu(Class.ALU64, Alu.MOV, dst, src, name="mov")

    def neg(self, dst: Reg) -> Asm:
        """``dst = -dst`` (64-bit)."""
        return self.raw(Insn(Class.ALU64 | Alu.NEG, _reg(dst, "neg")))

    def movsx(self, dst: Reg, src: Reg, bits: int) -> Asm:
        """``dst = (s<bits>)src`` sign-extended to 64 bits; ``bits`` is 8, 16 or 32 (ISA v4).

        :raises ParseError: ``bits`` is not 8, 16 or 32.
        """
        if bits not in (8, 16, 32):
            raise ParseError(f"movsx: bits must be 8, 16 or 32, got {bits!r}")
        return self.raw(Insn(Class.ALU64 | Alu.MOV | Source.X, _reg(dst, "movsx"), _reg(src, "movsx"), bits))

    def add32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst += src`` (32-bit, zero-extends the result)."""
        return self._alu(Class.ALU, Alu.ADD, dst, src, name="add32")

    def sub32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst -= src`` (32-bit)."""
        return self._alu(Class.ALU, Alu.SUB, dst, src, name="sub32")

    def mul32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst *= src`` (32-bit)."""
        return self._alu(Class.ALU, Alu.MUL, dst, src, name="mul32")

    def div32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst /= src`` (32-bit unsigned)."""
        return self._alu(Class.ALU, Alu.DIV, dst, src, name="div32")

    def sdiv32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst s/= src`` (32-bit signed, ISA v4)."""
        return self._alu(Class.ALU, Alu.DIV, dst, src, 1, name="sdiv32")

    def mod32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst %= src`` (32-bit unsigned)."""
        return self._alu(Class.ALU, Alu.MOD, dst, src, name="mod32")

    def smod32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst s%= src`` (32-bit signed, ISA v4)."""
        return self._alu(Class.ALU, Alu.MOD, dst, src, 1, name="smod32")

    def or32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst |= src`` (32-bit)."""
        return self._alu(Class.ALU, Alu.OR, dst, src, name="or32")

    def and32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst &= src`` (32-bit)."""
        return self._alu(Class.ALU, Alu.AND, dst, src, name="and32")

    def xor32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst ^= src`` (32-bit)."""
        return self._alu(Class.ALU, Alu.XOR, dst, src, name="xor32")

    def lsh32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst <<= src`` (32-bit)."""
        return self._alu(Class.ALU, Alu.LSH, dst, src, name="lsh32")

    def rsh32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst >>= src`` (32-bit logical)."""
        return self._alu(Class.ALU, Alu.RSH, dst, src, name="rsh32")

    def arsh32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst s>>= src`` (32-bit arithmetic)."""
        return self._alu(Class.ALU, Alu.ARSH, dst, src, name="arsh32")

    def mov32(self, dst: Reg, src: Reg | int) -> Asm:
        """``wdst = src`` (32-bit, zero-extends)."""
        return self._alu(Class.ALU, Alu.MOV, dst, src, name="mov32")

    def neg32(self, dst: Reg) -> Asm:
        """``wdst = -wdst`` (32-bit)."""
        return self.raw(Insn(Class.ALU | Alu.NEG, _reg(dst, "neg32")))

    def movsx32(self, dst: Reg, src: Reg, bits: int) -> Asm:
        """``wdst = (s<bits>)wsrc``; ``bits`` is 8 or 16 (ISA v4).

        :raises ParseError: ``bits`` is not 8 or 16.
        """
        if bits not in (8, 16):
            raise ParseError(f"movsx32: bits must be 8 or 16, got {bits!r}")
        return self.raw(Insn(Class.ALU | Alu.MOV | Source.X, _reg(dst, "movsx32"), _reg(src, "movsx32"), bits))

    def _endian(self, op: int, dst: Reg, bits: int, name: str) -> Asm:
        if bits not in (16, 32, 64):
            raise ParseError(f"{name}: bits must be 16, 32 or 64, got {bits!r}")
        return self.raw(Insn(op, _reg(dst, name), 0, 0, bits))

    def le(self, dst: Reg, bits: int) -> Asm:
        """``dst = le<bits> dst``: to little endian (a truncation on this little-endian ISA)."""
        return self._endian(Class.ALU | Alu.END | Source.K, dst, bits, "le")

    def be(self, dst: Reg, bits: int) -> Asm:
        """``dst = be<bits> dst``: to big endian."""
        return self._endian(Class.ALU | Alu.END | Source.X, dst, bits, "be")

    def bswap(self, dst: Reg, bits: int) -> Asm:
        """``dst = bswap<bits> dst``: unconditional byte swap (ISA v4)."""
        return self._endian(Class.ALU64 | Alu.END | Source.K, dst, bits, "bswap")

    def addr_space_cast(self, dst: Reg, src: Reg, dst_as: int, src_as: int) -> Asm:
        """``dst = addr_space_cast(src, dst_as, src_as)`` (arena pointers; kernel accepts 0↔1)."""
        imm = ((dst_as & 0xFFFF) << 16) | (src_as & 0xFFFF)
        return self.raw(
            Insn(
                Class.ALU64 | Alu.MOV | Source.X,
                _reg(dst, "addr_space_cast"),
                _reg(src, "addr_space_cast"),
                ADDR_SPACE_CAST,
                _imm32(imm, "addr_space_cast"),
            )
        )

    # -- memory -----------------------------------------------------------

    def ldx(self, size: int, dst: Reg, src: Reg, off: int = 0) -> Asm:
        """``dst = *(u<size*8> *)(src + off)``; ``size`` in bytes (1, 2, 4, 8)."""
        op = Class.LDX | Mode.MEM | _size(size, "ldx")
        return self.raw(Insn(op, _reg(dst, "ldx"), _reg(src, "ldx"), off))

    def ldxb(self, dst: Reg, src: Reg, off: int = 0) -> Asm:
        """``dst = *(u8 *)(src + off)``."""
        return self.ldx(1, dst, src, off)

    def ldxh(self, dst: Reg, src: Reg, off: int = 0) -> Asm:
        """``dst = *(u16 *)(src + off)``."""
        return self.ldx(2, dst, src, off)

    def ldxw(self, dst: Reg, src: Reg, off: int = 0) -> Asm:
        """``dst = *(u32 *)(src + off)``."""
        return self.ldx(4, dst, src, off)

    def ldxdw(self, dst: Reg, src: Reg, off: int = 0) -> Asm:
        """``dst = *(u64 *)(src + off)``."""
        return self.ldx(8, dst, src, off)

    def ldxs(self, size: int, dst: Reg, src: Reg, off: int = 0) -> Asm:
        """``dst = *(s<size*8> *)(src + off)`` sign-extended; ``size`` 1, 2 or 4 (ISA v4).

        :raises ParseError: ``size`` is 8 (use :meth:`ldx`) or invalid.
        """
        if size == 8:
            raise ParseError("ldxs: there is no sign-extending 8-byte load; use ldx(8, ...)")
        op = Class.LDX | Mode.MEMSX | _size(size, "ldxs")
        return self.raw(Insn(op, _reg(dst, "ldxs"), _reg(src, "ldxs"), off))

    def st(self, size: int, dst: Reg, off: int, imm: int) -> Asm:
        """``*(u<size*8> *)(dst + off) = imm``."""
        op = Class.ST | Mode.MEM | _size(size, "st")
        return self.raw(Insn(op, _reg(dst, "st"), 0, off, _imm32(imm, "st")))

    def stb(self, dst: Reg, off: int, imm: int) -> Asm:
        """``*(u8 *)(dst + off) = imm``."""
        return self.st(1, dst, off, imm)

    def sth(self, dst: Reg, off: int, imm: int) -> Asm:
        """``*(u16 *)(dst + off) = imm``."""
        return self.st(2, dst, off, imm)

    def stw(self, dst: Reg, off: int, imm: int) -> Asm:
        """``*(u32 *)(dst + off) = imm``."""
        return self.st(4, dst, off, imm)

    def stdw(self, dst: Reg, off: int, imm: int) -> Asm:
        """``*(u64 *)(dst + off) = imm`` (sign-extended)."""
        return self.st(8, dst, off, imm)

    def stx(self, size: int, dst: Reg, off: int, src: Reg) -> Asm:
        """``*(u<size*8> *)(dst + off) = src``."""
        op = Class.STX | Mode.MEM | _size(size, "stx")
        return self.raw(Insn(op, _reg(dst, "stx"), _reg(src, "stx"), off))

    def stxb(self, dst: Reg, off: int, src: Reg) -> Asm:
        """``*(u8 *)(dst + off) = src``."""
        return self.stx(1, dst, off, src)

    def stxh(self, dst: Reg, off: int, src: Reg) -> Asm:
        """``*(u16 *)(dst + off) = src``."""
        return self.stx(2, dst, off, src)

    def stxw(self, dst: Reg, off: int, src: Reg) -> Asm:
        """``*(u32 *)(dst + off) = src``."""
        return self.stx(4, dst, off, src)

    def stxdw(self, dst: Reg, off: int, src: Reg) -> Asm:
        """``*(u64 *)(dst + off) = src``."""
        return self.stx(8, dst, off, src)

    def _atomic(self, imm: int, dst: Reg, off: int, src: Reg, size: int, name: str) -> Asm:
        op = Class.STX | Mode.ATOMIC | _size(size, name)
        return self.raw(Insn(op, _reg(dst, name), _reg(src, name), off, imm))

    def atomic_add(self, dst: Reg, off: int, src: Reg, *, size: int = 8, fetch: bool = False) -> Asm:
        """``lock *(dst + off) += src``; with ``fetch`` the old value goes to ``src``."""
        return self._atomic(Atomic.ADD | (Atomic.FETCH if fetch else 0), dst, off, src, size, "atomic_add")

    def atomic_or(self, dst: Reg, off: int, src: Reg, *, size: int = 8, fetch: bool = False) -> Asm:
        """``lock *(dst + off) |= src``; with ``fetch`` the old value goes to ``src``."""
        return self._atomic(Atomic.OR | (Atomic.FETCH if fetch else 0), dst, off, src, size, "atomic_or")

    def atomic_and(self, dst: Reg, off: int, src: Reg, *, size: int = 8, fetch: bool = False) -> Asm:
        """``lock *(dst + off) &= src``; with ``fetch`` the old value goes to ``src``."""
        return self._atomic(Atomic.AND | (Atomic.FETCH if fetch else 0), dst, off, src, size, "atomic_and")

    def atomic_xor(self, dst: Reg, off: int, src: Reg, *, size: int = 8, fetch: bool = False) -> Asm:
        """``lock *(dst + off) ^= src``; with ``fetch`` the old value goes to ``src``."""
        return self._atomic(Atomic.XOR | (Atomic.FETCH if fetch else 0), dst, off, src, size, "atomic_xor")

    def xchg(self, dst: Reg, off: int, src: Reg, *, size: int = 8) -> Asm:
        """``src = xchg(dst + off, src)``."""
        return self._atomic(Atomic.XCHG, dst, off, src, size, "xchg")

    def cmpxchg(self, dst: Reg, off: int, src: Reg, *, size: int = 8) -> Asm:
        """``r0 = cmpxchg(dst + off, r0, src)``: store ``src`` if the memory equals ``r0``."""
        return self._atomic(Atomic.CMPXCHG, dst, off, src, size, "cmpxchg")

    def load_acquire(self, dst: Reg, src: Reg, off: int = 0, *, size: int = 8) -> Asm:
        """``dst = load_acquire(src + off)``."""
        op = Class.STX | Mode.ATOMIC | _size(size, "load_acquire")
        return self.raw(Insn(op, _reg(dst, "load_acquire"), _reg(src, "load_acquire"), off, Atomic.LOAD_ACQ))

    def store_release(self, dst: Reg, off: int, src: Reg, *, size: int = 8) -> Asm:
        """``store_release(dst + off, src)``."""
        return self._atomic(Atomic.STORE_REL, dst, off, src, size, "store_release")

    # -- 64-bit immediates and relocations -----------------------------------

    def ld_imm64(self, dst: Reg, value: int) -> Asm:
        """``dst = value ll`` (two slots).

        :raises ParseError: ``value`` does not fit 64 bits.
        """
        if not -(1 << 63) <= value < (1 << 64):
            raise ParseError(f"ld_imm64: {value} does not fit 64 bits")
        return self.raw(Insn(LDDW, _reg(dst, "ld_imm64"), 0, 0, value & 0xFFFFFFFFFFFFFFFF))

    def _reloc(self, kind: RelocKind, ref: Hashable, offset: int = 0) -> None:
        self._relocs.append(Relocation(len(self._insns), self._slot, kind, ref, offset))

    def ld_map_fd(self, dst: Reg, map_ref: Hashable) -> Asm:
        """``dst = map`` (``lddw`` with ``Pseudo.MAP_FD``); the fd is a :class:`Relocation` on ``map_ref``."""
        d = _reg(dst, "ld_map_fd")
        self._reloc(RelocKind.MAP_FD, map_ref)
        return self.raw(Insn(LDDW, d, Pseudo.MAP_FD, 0, 0))

    def ld_map_value(self, dst: Reg, map_ref: Hashable, offset: int = 0) -> Asm:
        """``dst = &map.value[offset]`` (``Pseudo.MAP_VALUE``, for array maps/global data).

        :raises ParseError: ``offset`` is negative or does not fit 32 bits.
        """
        if not 0 <= offset <= 0xFFFFFFFF:
            raise ParseError(f"ld_map_value: offset {offset} must be 0..0xffffffff")
        d = _reg(dst, "ld_map_value")
        self._reloc(RelocKind.MAP_VALUE, map_ref, offset)
        return self.raw(Insn(LDDW, d, Pseudo.MAP_VALUE, 0, offset << 32))

    def ld_btf_id(self, dst: Reg, ref: Hashable) -> Asm:
        """``dst = &kernel_variable`` (``Pseudo.BTF_ID``); the BTF id is a relocation on ``ref``."""
        d = _reg(dst, "ld_btf_id")
        self._reloc(RelocKind.BTF_ID, ref)
        return self.raw(Insn(LDDW, d, Pseudo.BTF_ID, 0, 0))

    def ld_func(self, dst: Reg, target: Target) -> Asm:
        """``dst = &subprogram`` (``Pseudo.FUNC``), e.g. a ``bpf_loop`` callback at a label."""
        d = _reg(dst, "ld_func")
        imm = self._target(target, "imm64", wide=True) & 0xFFFFFFFF
        return self.raw(Insn(LDDW, d, Pseudo.FUNC, 0, imm))

    def ld_abs(self, size: int, offset: int) -> Asm:
        """Legacy ``r0 = ntoh(*(size *)(skb->data + offset))`` (socket filters only; r6 = skb).

        :raises ParseError: ``size`` is not 1, 2 or 4, or ``offset`` does not fit 32 bits.
        """
        if size == 8:
            raise ParseError("ld_abs: size must be 1, 2 or 4")
        return self.raw(Insn(Class.LD | Mode.ABS | _size(size, "ld_abs"), 0, 0, 0, _imm32(offset, "ld_abs")))

    def ld_ind(self, size: int, src: Reg, offset: int) -> Asm:
        """Legacy ``r0 = ntoh(*(size *)(skb->data + src + offset))`` (socket filters only).

        :raises ParseError: ``size`` is not 1, 2 or 4, a bad register, or ``offset`` does not fit 32 bits.
        """
        if size == 8:
            raise ParseError("ld_ind: size must be 1, 2 or 4")
        op = Class.LD | Mode.IND | _size(size, "ld_ind")
        return self.raw(Insn(op, 0, _reg(src, "ld_ind"), 0, _imm32(offset, "ld_ind")))

    # -- jumps and calls -----------------------------------------------------

    def ja(self, target: Target) -> Asm:
        """``goto target`` (16-bit offset)."""
        return self.raw(Insn(Class.JMP | Jmp.JA, 0, 0, self._target(target, "off")))

    def ja32(self, target: Target) -> Asm:
        """``gotol target`` (32-bit offset in ``imm``, ISA v4)."""
        return self.raw(Insn(Class.JMP32 | Jmp.JA, 0, 0, 0, self._target(target, "imm", wide=True)))

    def may_goto(self, target: Target) -> Asm:
        """``may_goto target``: fall through while the loop budget lasts, then jump."""
        return self.raw(Insn(Class.JMP | Jmp.JCOND, 0, 0, self._target(target, "off")))

    def _jcond(self, cls: int, jop: int, dst: Reg, src: Reg | int, target: Target, name: str) -> Asm:
        d = _reg(dst, name)
        if isinstance(src, Reg):
            op, s, imm = cls | jop | Source.X, int(src), 0
        else:
            op, s, imm = cls | jop | Source.K, 0, _imm32(src, name)
        return self.raw(Insn(op, d, s, self._target(target, "off"), imm))

    def jeq(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst == src goto target``."""
        return self._jcond(Class.JMP, Jmp.JEQ, dst, src, target, "jeq")

    def jne(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst != src goto target``."""
        return self._jcond(Class.JMP, Jmp.JNE, dst, src, target, "jne")

    def jgt(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst > src goto target`` (unsigned)."""
        return self._jcond(Class.JMP, Jmp.JGT, dst, src, target, "jgt")

    def jge(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst >= src goto target`` (unsigned)."""
        return self._jcond(Class.JMP, Jmp.JGE, dst, src, target, "jge")

    def jlt(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst < src goto target`` (unsigned)."""
        return self._jcond(Class.JMP, Jmp.JLT, dst, src, target, "jlt")

    def jle(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst <= src goto target`` (unsigned)."""
        return self._jcond(Class.JMP, Jmp.JLE, dst, src, target, "jle")

    def jsgt(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst s> src goto target`` (signed)."""
        return self._jcond(Class.JMP, Jmp.JSGT, dst, src, target, "jsgt")

    def jsge(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst s>= src goto target`` (signed)."""
        return self._jcond(Class.JMP, Jmp.JSGE, dst, src, target, "jsge")

    def jslt(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst s< src goto target`` (signed)."""
        return self._jcond(Class.JMP, Jmp.JSLT, dst, src, target, "jslt")

    def jsle(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst s<= src goto target`` (signed)."""
        return self._jcond(Class.JMP, Jmp.JSLE, dst, src, target, "jsle")

    def jset(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if dst & src goto target``."""
        return self._jcond(Class.JMP, Jmp.JSET, dst, src, target, "jset")

    def jeq32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst == src goto target`` (compares the low 32 bits)."""
        return self._jcond(Class.JMP32, Jmp.JEQ, dst, src, target, "jeq32")

    def jne32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst != src goto target``."""
        return self._jcond(Class.JMP32, Jmp.JNE, dst, src, target, "jne32")

    def jgt32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst > src goto target`` (unsigned)."""
        return self._jcond(Class.JMP32, Jmp.JGT, dst, src, target, "jgt32")

    def jge32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst >= src goto target`` (unsigned)."""
        return self._jcond(Class.JMP32, Jmp.JGE, dst, src, target, "jge32")

    def jlt32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst < src goto target`` (unsigned)."""
        return self._jcond(Class.JMP32, Jmp.JLT, dst, src, target, "jlt32")

    def jle32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst <= src goto target`` (unsigned)."""
        return self._jcond(Class.JMP32, Jmp.JLE, dst, src, target, "jle32")

    def jsgt32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst s> src goto target`` (signed)."""
        return self._jcond(Class.JMP32, Jmp.JSGT, dst, src, target, "jsgt32")

    def jsge32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst s>= src goto target`` (signed)."""
        return self._jcond(Class.JMP32, Jmp.JSGE, dst, src, target, "jsge32")

    def jslt32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst s< src goto target`` (signed)."""
        return self._jcond(Class.JMP32, Jmp.JSLT, dst, src, target, "jslt32")

    def jsle32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst s<= src goto target`` (signed)."""
        return self._jcond(Class.JMP32, Jmp.JSLE, dst, src, target, "jsle32")

    def jset32(self, dst: Reg, src: Reg | int, target: Target) -> Asm:
        """``if wdst & src goto target``."""
        return self._jcond(Class.JMP32, Jmp.JSET, dst, src, target, "jset32")

    def call(self, helper: int) -> Asm:
        """Call helper ``helper`` (a :class:`~bpfmux.uapi.HelperId` or its number)."""
        return self.raw(Insn(Class.JMP | Jmp.CALL, 0, CallKind.HELPER, 0, _imm32(int(helper), "call")))

    def call_local(self, target: Target) -> Asm:
        """bpf-to-bpf call of the subprogram at ``target``."""
        imm = self._target(target, "imm", wide=True)
        return self.raw(Insn(Class.JMP | Jmp.CALL, 0, CallKind.PSEUDO_CALL, 0, imm))

    def call_kfunc(self, ref: Hashable, *, btf_fd_index: int = 0) -> Asm:
        """kfunc call; its BTF id is a :class:`Relocation` (``KFUNC``) on ``ref``."""
        self._reloc(RelocKind.KFUNC, ref)
        return self.raw(Insn(Class.JMP | Jmp.CALL, 0, CallKind.KFUNC_CALL, btf_fd_index, 0))

    def callx(self, reg: Reg) -> Asm:
        """Indirect call through ``reg`` (``dst`` field)."""
        return self.raw(Insn(Class.JMP | Jmp.CALL | Source.X, _reg(reg, "callx")))

    def exit(self) -> Asm:
        """``exit``: return ``r0``."""
        return self.raw(Insn(Class.JMP | Jmp.EXIT))

    # -- result -------------------------------------------------------------

    def assemble(self) -> Program:
        """Resolve labels and check every instruction.

        :raises ParseError: an undefined label, a jump too far for its offset
            field, or an invalid instruction (the message names its index).
        """
        insns = list(self._insns)
        total = self._slot
        for f in self._fixups:
            if f.label not in self._labels:
                raise ParseError(f"instruction {f.index} jumps to undefined label {f.label!r}; define it with label()")
            dest = self._labels[f.label][0]
            if dest >= total:
                raise ParseError(f"label {f.label!r} is at the end of the program; put an instruction after it")
            rel = dest - f.slot - 1
            old = insns[f.index]
            if f.field == "off":
                if not -(1 << 15) <= rel < (1 << 15):
                    raise ParseError(f"instruction {f.index}: label {f.label!r} is {rel} slots away; use ja32")
                insns[f.index] = Insn(old.opcode, old.dst, old.src, rel, old.imm)
            elif f.field == "imm":
                insns[f.index] = Insn(old.opcode, old.dst, old.src, old.off, rel)
            else:
                insns[f.index] = Insn(old.opcode, old.dst, old.src, old.off, rel & 0xFFFFFFFF)
        for i, insn in enumerate(insns):
            try:
                validate(insn)
            except ParseError as e:
                raise ParseError(f"instruction {i}: {e.message}") from None
        labels = {name: index for name, (_, index) in self._labels.items()}
        return Program(insns, list(self._relocs), labels)
