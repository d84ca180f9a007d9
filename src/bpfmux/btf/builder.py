"""A small convenience layer to build BTF by hand (tests, the emulator, generated programs).

Each method adds one type to :attr:`BtfBuilder.btf` and returns its id::

    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    s = b.struct("pair", [("a", i32), ("b", i32)])   # natural C layout
    b.func("f", b.func_proto(i32, [("p", b.ptr(s))]))
    blob = b.write()
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..uapi import BtfIntEncoding, BtfVarLinkage, FuncLinkage
from .layout import alignof, sizeof
from .model import Btf
from .types import (
    Array,
    Const,
    Datasec,
    DeclTag,
    Enum,
    Enum64,
    EnumValue,
    Float,
    Func,
    FuncProto,
    Fwd,
    Int,
    Member,
    Param,
    Ptr,
    Restrict,
    Struct,
    Typedef,
    TypeTag,
    Union,
    Var,
    VarSecinfo,
    Volatile,
)

__all__ = ["BtfBuilder"]

#: A member spec: (name, type_id) laid out naturally, (name, type_id, bit_offset)
#: or (name, type_id, bit_offset, bitfield_size).
MemberSpec = tuple[str, int] | tuple[str, int, int] | tuple[str, int, int, int]


class BtfBuilder:
    """Builds a :class:`Btf` type by type.

    :param base: base BTF when building split BTF.
    """

    def __init__(self, base: Btf | None = None) -> None:
        self.btf = Btf(base, source="(built)")
        self._index_int: int | None = None

    def ptr(self, target: int) -> int:
        """Add a pointer to ``target`` (0 = void)."""
        return self.btf.add(Ptr(target))

    def typedef(self, name: str, target: int) -> int:
        """Add a typedef."""
        return self.btf.add(Typedef(name, target))

    def const(self, target: int) -> int:
        """Add a const qualifier."""
        return self.btf.add(Const(target))

    def volatile(self, target: int) -> int:
        """Add a volatile qualifier."""
        return self.btf.add(Volatile(target))

    def restrict(self, target: int) -> int:
        """Add a restrict qualifier."""
        return self.btf.add(Restrict(target))

    def type_tag(self, name: str, target: int) -> int:
        """Add a type tag."""
        return self.btf.add(TypeTag(name, target))

    def decl_tag(self, name: str, target: int, component_idx: int = -1) -> int:
        """Add a declaration tag on ``target`` (a member/param index, or -1)."""
        return self.btf.add(DeclTag(name, target, component_idx))

    def fwd(self, name: str, union: bool = False) -> int:
        """Add a forward declaration."""
        return self.btf.add(Fwd(name, union))

    def array(self, elem: int, nelems: int, index_type: int | None = None) -> int:
        """Add an array of ``nelems`` ``elem``; the index type defaults to a 4-byte int."""
        if index_type is None:
            if self._index_int is None:
                self._index_int = self.int("__ARRAY_SIZE_TYPE__", 4)
            index_type = self._index_int
        return self.btf.add(Array(elem, index_type, nelems))

    def _members(self, specs: Sequence[MemberSpec], union: bool) -> tuple[list[Member], int]:
        members = []
        pos = 0
        end = 0
        best = 1
        for spec in specs:
            name, tid = spec[0], spec[1]
            t = self.btf[tid]
            size, align = sizeof(self.btf, t), alignof(self.btf, t)
            best = max(best, align)
            if len(spec) >= 3:
                off = spec[2]
                bf = spec[3] if len(spec) == 4 else 0
            else:
                off = 0 if union else -(-pos // (align * 8)) * align * 8
                bf = 0
            members.append(Member(name, tid, off, bf))
            pos = off + (bf or size * 8)
            end = max(end, pos)
        nbytes = -(-end // 8)
        return members, -(-nbytes // best) * best

    def struct(self, name: str, members: Sequence[MemberSpec], size: int | None = None) -> int:
        """Add a struct; members without offsets get the natural C layout; ``size`` defaults to that layout's."""
        ms, natural = self._members(members, False)
        return self.btf.add(Struct(name, natural if size is None else size, ms))

    def union(self, name: str, members: Sequence[MemberSpec], size: int | None = None) -> int:
        """Add a union (every member at offset 0 unless given)."""
        ms, natural = self._members(members, True)
        return self.btf.add(Union(name, natural if size is None else size, ms))

    def enum(self, name: str, values: dict[str, int] | Iterable[tuple[str, int]], size: int = 4, signed: bool | None = None) -> int:
        """Add an enum (ENUM64 when ``size`` is 8); signedness defaults to 'any value negative'."""
        vals = [EnumValue(n, v) for n, v in (values.items() if isinstance(values, dict) else values)]
        if signed is None:
            signed = any(v.value < 0 for v in vals)
        cls = Enum64 if size == 8 else Enum
        return self.btf.add(cls(name, size, vals, signed))

    def func_proto(self, ret: int, params: Sequence[tuple[str, int]] = (), variadic: bool = False) -> int:
        """Add a function prototype."""
        ps = [Param(n, t) for n, t in params]
        if variadic:
            ps.append(Param("", 0))
        return self.btf.add(FuncProto(ret, ps))

    def func(self, name: str, proto: int, linkage: FuncLinkage = FuncLinkage.GLOBAL) -> int:
        """Add a function."""
        return self.btf.add(Func(name, proto, linkage))

    def var(self, name: str, type_id: int, linkage: BtfVarLinkage = BtfVarLinkage.GLOBAL_ALLOCATED) -> int:
        """Add a variable."""
        return self.btf.add(Var(name, type_id, linkage))

    def datasec(self, name: str, vars: Sequence[tuple[int, int, int]], size: int | None = None) -> int:
        """Add a data section of ``(var_type_id, offset, size)`` entries; size defaults to the end of the last."""
        vs = [VarSecinfo(t, o, s) for t, o, s in vars]
        if size is None:
            size = max((o + s for _, o, s in vars), default=0)
        return self.btf.add(Datasec(name, size, vs))

    # int and float come last: a method's name is in scope for the annotations of the methods after it, where
    # these two would stand for the builtins

    def float(self, name: str, size: int) -> int:
        """Add a floating-point type."""
        return self.btf.add(Float(name, size))

    def int(self, name: str, size: int, signed: bool = False, char: bool = False, bool_: bool = False, bits: int | None = None) -> int:
        """Add an integer type."""
        enc = (BtfIntEncoding.SIGNED if signed else 0) | (BtfIntEncoding.CHAR if char else 0) | (BtfIntEncoding.BOOL if bool_ else 0)
        return self.btf.add(Int(name, size, int(enc), bits))

    def write(self, byteorder: str = "little") -> bytes:
        """Serialize what was built.

        :raises ParseError: a field is out of range for the format.
        """
        from .writer import write

        return write(self.btf, byteorder)
