"""One register's abstract value in the emulator's verifier.

A :class:`Reg` has a type (:class:`T`); for scalars, and for the variable
part of a pointer's offset, it holds what the kernel's verifier tracks:
unsigned and signed bounds on 64 and on 32 bits and a tnum (``tv``/``tm``:
known bits are those clear in ``tm``). Pointers add a fixed offset ``off``
and what they point into (map, memory size, stack frame, BTF type, …).

Python ints stand for the kernel's fixed-width fields: unsigned values are
in ``[0, 2**64)`` (``[0, 2**32)`` on 32 bits), signed ones in
``[-2**63, 2**63)`` (``[-2**31, 2**31)``).

A register object reachable from an explored state is never changed in
place: code that changes a value makes a fresh :class:`Reg` (``copy()``)
first.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from .tnum import U32, U64

if TYPE_CHECKING:
    from .core import MapInfo

S64_MIN = -(1 << 63)
S64_MAX = (1 << 63) - 1
S32_MIN = -(1 << 31)
S32_MAX = (1 << 31) - 1
#: Scalar ids with this bit set are "the register it is linked to, plus ``off``".
ADD_CONST = 1 << 31

__all__ = ["ADD_CONST", "NOT_INIT", "S32_MAX", "S32_MIN", "S64_MAX", "S64_MIN", "T", "Reg", "s32", "s64",
           "type_name"]


def s64(v: int) -> int:
    """Two's complement reading of the low 64 bits of ``v``."""
    v &= U64
    return v - (1 << 64) if v >> 63 else v


def s32(v: int) -> int:
    """Two's complement reading of the low 32 bits of ``v``."""
    v &= U32
    return v - (1 << 32) if v >> 31 else v


class T(enum.IntEnum):
    """Register types (the kernel's ``enum bpf_reg_type``, the subset modelled)."""

    NOT_INIT = 0
    SCALAR = 1
    PTR_TO_CTX = 2
    PTR_TO_STACK = 3
    PTR_TO_MAP_VALUE = 4
    CONST_PTR_TO_MAP = 5
    PTR_TO_MEM = 6  # ringbuf record / helper memory
    PTR_TO_BTF_ID = 7
    PTR_TO_FUNC = 8
    PTR_TO_MAP_KEY = 9


_TYPE_NAMES = {
    T.NOT_INIT: "?",
    T.SCALAR: "scalar",
    T.PTR_TO_CTX: "ctx",
    T.PTR_TO_STACK: "fp",
    T.PTR_TO_MAP_VALUE: "map_value",
    T.CONST_PTR_TO_MAP: "map_ptr",
    T.PTR_TO_MEM: "mem",
    T.PTR_TO_BTF_ID: "ptr_",
    T.PTR_TO_FUNC: "func",
    T.PTR_TO_MAP_KEY: "map_key",
}

_SCALAR = T.SCALAR


class Reg:
    """One register's abstract value (see the module docstring).

    :ivar id: scalars: registers with the same id hold the same value
        (``ADD_CONST`` set: the linked value plus ``off``); maybe-null
        pointers: copies of the same pointer (a null check refines all).
    :ivar ref: the acquired reference (ringbuf record) the pointer holds.
    :ivar precise: the scalar's exact range matters to a decision already taken.
    """

    __slots__ = ("type", "off", "umin", "umax", "smin", "smax", "u32min", "u32max", "s32min", "s32max", "tv", "tm",
                 "id", "ref", "null", "map", "size", "frame", "rdonly", "btf", "subprog", "precise")

    def __init__(self, type: T = T.NOT_INIT) -> None:
        self.type = type
        self.off = 0
        self.umin = 0
        self.umax = U64
        self.smin = S64_MIN
        self.smax = S64_MAX
        self.u32min = 0
        self.u32max = U32
        self.s32min = S32_MIN
        self.s32max = S32_MAX
        self.tv = 0
        self.tm = U64
        self.id = 0
        self.ref = 0
        self.null = False
        self.map: MapInfo | None = None
        self.size = 0
        self.frame = 0
        self.rdonly = False
        self.btf: str | None = None
        self.subprog = -1
        self.precise = False

    # -- constructors
    @staticmethod
    def unknown() -> Reg:
        """A scalar of any value."""
        return Reg(_SCALAR)

    @staticmethod
    def const(v: int) -> Reg:
        """The scalar ``v`` (taken modulo 2**64)."""
        r = Reg(_SCALAR)
        r.set_const(v)
        return r

    @staticmethod
    def ptr(type: T, off: int = 0) -> Reg:
        """A pointer of ``type`` with fixed offset ``off`` and no variable offset."""
        r = Reg(type)
        r.set_const(0)
        r.off = off
        return r

    def copy(self) -> Reg:
        """An independent copy."""
        r = Reg.__new__(Reg)
        r.type = self.type
        r.off = self.off
        r.umin = self.umin
        r.umax = self.umax
        r.smin = self.smin
        r.smax = self.smax
        r.u32min = self.u32min
        r.u32max = self.u32max
        r.s32min = self.s32min
        r.s32max = self.s32max
        r.tv = self.tv
        r.tm = self.tm
        r.id = self.id
        r.ref = self.ref
        r.null = self.null
        r.map = self.map
        r.size = self.size
        r.frame = self.frame
        r.rdonly = self.rdonly
        r.btf = self.btf
        r.subprog = self.subprog
        r.precise = self.precise
        return r

    # -- value part
    def set_const(self, v: int) -> None:
        """Make the value part exactly ``v`` (modulo 2**64)."""
        v &= U64
        self.umin = self.umax = v
        self.smin = self.smax = v - (1 << 64) if v >> 63 else v
        lo = v & U32
        self.u32min = self.u32max = lo
        self.s32min = self.s32max = lo - (1 << 32) if lo >> 31 else lo
        self.tv, self.tm = v, 0

    @property
    def is_const(self) -> bool:
        """All 64 bits known."""
        return self.tm == 0

    @property
    def is_null_const(self) -> bool:
        """The scalar 0."""
        return self.type == _SCALAR and self.tm == 0 and self.tv == 0

    @property
    def fully_unknown(self) -> bool:
        """A scalar about which nothing is known."""
        return (self.tm == U64 and self.umin == 0 and self.umax == U64 and self.smin == S64_MIN
                and self.smax == S64_MAX and self.u32min == 0 and self.u32max == U32 and self.s32min == S32_MIN
                and self.s32max == S32_MAX)

    def describe(self) -> str:
        """Kernel-log-like text (``scalar(umax=9,var_off=(0x0; 0xf))``, ``fp-8``, ``map_value(ks=4,vs=8)``)."""
        t = self.type
        if t == T.NOT_INIT:
            return "?"
        if t == _SCALAR:
            if self.is_const:
                return str(s64(self.tv)) if self.smin < 0 else str(self.tv)
            parts = []
            for name, v, default in (("smin", self.smin, S64_MIN), ("smax", self.smax, S64_MAX),
                                     ("umin", self.umin, 0), ("umax", self.umax, U64),
                                     ("smin32", self.s32min, S32_MIN), ("smax32", self.s32max, S32_MAX),
                                     ("umin32", self.u32min, 0), ("umax32", self.u32max, U32)):
                if v != default:
                    parts.append(f"{name}={v}")
            if self.tm != U64:
                parts.append(f"var_off=({self.tv:#x}; {self.tm:#x})")
            return f"scalar({','.join(parts)})"
        name = type_name(self)
        if t == T.PTR_TO_STACK:
            return f"fp{self.off}" if self.is_const else f"fp(off={self.off},var_off=({self.tv:#x}; {self.tm:#x}))"
        extra = [f"off={self.off}"] if self.off else []
        if not self.is_const:
            extra.append(f"var_off=({self.tv:#x}; {self.tm:#x})")
        if t in (T.PTR_TO_MAP_VALUE, T.CONST_PTR_TO_MAP) and self.map is not None:
            extra.append(f"ks={self.map.key_size},vs={self.map.value_size}")
        if t == T.PTR_TO_MEM:
            extra.append(f"sz={self.size}")
        return f"{name}({','.join(extra)})"


def type_name(r: Reg) -> str:
    """The kernel's name for a register type (``map_value_or_null``, ``ringbuf_mem``, …)."""
    t = r.type
    if t == T.PTR_TO_MEM:
        base = "ringbuf_mem" if r.ref else ("rdonly_mem" if r.rdonly else "mem")
    elif t == T.PTR_TO_BTF_ID:
        base = f"ptr_{r.btf}" if r.btf else "ptr_"
    else:
        base = _TYPE_NAMES[t]
    return f"{base}_or_null" if r.null else base


#: The shared "not initialized" register (never changed in place).
NOT_INIT = Reg()
