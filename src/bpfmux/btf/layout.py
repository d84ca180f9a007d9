"""Sizes, alignments and field layouts of BTF types (x86-64 / BPF data model)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import BpfmuxError, NotFoundError, ParseError
from ..record import Frozen
from ..record import set_field as _set
from ..uapi import BtfKind
from .types import Array, Composite, Datasec, Enum, Float, Int, Ptr, Type, Var, _Ref

if TYPE_CHECKING:
    from .model import Btf

__all__ = ["FieldInfo", "TypeKindError", "alignof", "fields", "member", "resolve", "sizeof", "PTR_SIZE", "MAX_RESOLVE_DEPTH"]


PTR_SIZE = 8
#: Longest chain of typedef/qualifier/array references followed before giving up (a loop).
MAX_RESOLVE_DEPTH = 64
_SKIP = frozenset({BtfKind.TYPEDEF, BtfKind.VOLATILE, BtfKind.CONST, BtfKind.RESTRICT, BtfKind.TYPE_TAG})
_CV = frozenset({BtfKind.VOLATILE, BtfKind.CONST, BtfKind.RESTRICT, BtfKind.TYPE_TAG})


class TypeKindError(BpfmuxError, TypeError):
    """An operation was applied to a BTF type of the wrong kind (``sizeof(void)``, a member of an int, …)."""


class FieldInfo(Frozen):
    """Where a field lives inside a struct/union (offsets from the outermost type).

    :ivar name: the path (``"se.vruntime"``) or member name.
    :ivar type: the field's declared type (typedefs kept).
    :ivar bit_offset: bit offset from the start of the outer type.
    :ivar bitfield_size: width in bits for a bitfield, else 0.
    """

    __slots__ = ("name", "type", "bit_offset", "bitfield_size")

    name: str
    type: Type
    bit_offset: int
    bitfield_size: int

    def __init__(self, name: str, type: Type, bit_offset: int, bitfield_size: int = 0) -> None:
        _set(self, "name", name)
        _set(self, "type", type)
        _set(self, "bit_offset", bit_offset)
        _set(self, "bitfield_size", bitfield_size)

    @property
    def offset(self) -> int:
        """Byte offset (of the byte holding the first bit, for bitfields)."""
        return self.bit_offset // 8

    @property
    def is_bitfield(self) -> bool:
        """True for a bitfield."""
        return self.bitfield_size != 0

    @property
    def size(self) -> int:
        """Byte size of the field's type (of the storage unit for bitfields).

        :raises TypeKindError: the type has no size.
        """
        assert self.type.btf is not None
        return sizeof(self.type.btf, self.type)


def resolve(btf: Btf, t: Type, skip: frozenset[BtfKind] = _SKIP) -> Type:
    """Follow typedefs, cv-qualifiers and type tags (``skip``) to the underlying type.

    :raises ParseError: a reference loop.
    """
    for _ in range(MAX_RESOLVE_DEPTH):
        if t.kind not in skip or not isinstance(t, _Ref):  # the kinds skipped are reference kinds
            return t
        t = btf[t.type_id]
    raise ParseError(f"type [{t.id}] is part of a reference loop (more than {MAX_RESOLVE_DEPTH} typedefs/qualifiers)", None, btf.source)


def strip_cv(btf: Btf, t: Type) -> Type:
    """Follow cv-qualifiers and type tags only (typedefs kept).

    :raises ParseError: a reference loop.
    """
    return resolve(btf, t, _CV)


def sizeof(btf: Btf, t: Type) -> int:
    """Byte size of ``t``.

    :raises TypeKindError: ``t`` has no size (void, function, prototype, forward).
    :raises ParseError: a reference loop.
    """
    mult = 1
    for _ in range(MAX_RESOLVE_DEPTH):
        k = t.kind
        if isinstance(t, Int | Enum | Composite | Float | Datasec):  # Enum: also ENUM64; Composite: STRUCT, UNION
            return mult * t.size
        if isinstance(t, Ptr):
            return mult * PTR_SIZE
        if isinstance(t, Array):
            mult *= t.nelems
            t = btf[t.type_id]
            continue
        if isinstance(t, _Ref) and (k in _SKIP or isinstance(t, Var)):
            t = btf[t.type_id]
            continue
        raise TypeKindError(f"{_describe(t)} has no size (it is a {k.name.lower()}); use a sized type")
    raise ParseError(f"type [{t.id}] is part of a reference loop", None, btf.source)


def alignof(btf: Btf, t: Type, _depth: int = 0) -> int:
    """Natural alignment of ``t`` (1 for a packed struct/union).

    A struct is considered packed when a non-bitfield member sits at an
    offset that is not a multiple of its alignment, or its size is not a
    multiple of its largest member alignment.

    :raises TypeKindError: ``t`` has no alignment (void, function, forward).
    :raises ParseError: a reference loop.
    """
    if _depth > MAX_RESOLVE_DEPTH:
        raise ParseError(f"type [{t.id}] is part of a reference loop", None, btf.source)
    t = resolve(btf, t)
    k = t.kind
    if isinstance(t, Int | Enum | Float):  # Enum: also ENUM64
        return max(1, min(t.size, PTR_SIZE))
    if isinstance(t, Ptr):
        return PTR_SIZE
    if isinstance(t, Array):
        return alignof(btf, btf[t.type_id], _depth + 1)
    if isinstance(t, Composite):
        best = 1
        for m in t.members:
            a = alignof(btf, btf[m.type_id], _depth + 1)
            eff_bf = m.bitfield_size if t.kind_flag else _legacy_bits(btf, m.type_id)[0]
            if not eff_bf and m.bit_offset % (8 * a):
                return 1
            best = max(best, a)
        if t.size % best:
            return 1
        return best
    raise TypeKindError(f"{_describe(t)} has no alignment (it is a {k.name.lower()})")


def _legacy_bits(btf: Btf, type_id: int) -> tuple[int, int]:
    """(bitfield size, extra bit offset) of a legacy-encoded bitfield member, else (0, 0)."""
    t = resolve(btf, btf[type_id])
    if isinstance(t, Int) and (t.bits != t.size * 8 or t.bits_offset):
        return t.bits, t.bits_offset
    return 0, 0


def fields(btf: Btf, t: Type, flatten: bool = False, _base: int = 0, _prefix: str = "") -> list[FieldInfo]:
    """Effective layout of the members of struct/union ``t``.

    :param flatten: replace anonymous struct/union members with their fields.
    :raises TypeKindError: ``t`` is not a struct or union.
    """
    r = resolve(btf, t)
    if not isinstance(r, Composite):
        raise TypeKindError(f"{_describe(t)} is not a struct or union")
    out: list[FieldInfo] = []
    for m in r.members:
        if r.kind_flag:
            bf, extra = m.bitfield_size, 0
        else:
            bf, extra = _legacy_bits(btf, m.type_id)
        off = _base + m.bit_offset + extra
        if flatten and not m.name and isinstance(resolve(btf, btf[m.type_id]), Composite):
            out.extend(fields(btf, btf[m.type_id], True, off, _prefix))
            continue
        out.append(FieldInfo(_prefix + m.name, btf[m.type_id], off, bf))
    return out


_TOKEN = re.compile(r"\s*(?:\.?\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*(\d+)\s*\])")


def _parse_path(path: str) -> list[str | int]:
    out: list[str | int] = []
    pos = 0
    path = path.strip()
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m or m.end() == pos:
            raise NotFoundError("field path", path, f"cannot parse it at character {pos}; use names, dots and [index]")
        out.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not out:
        raise NotFoundError("field path", path, "the path is empty")
    return out


def _find_member(btf: Btf, comp: Composite, name: str) -> tuple[int, int, int] | None:
    """(type_id, bit_offset, bitfield_size) of ``name``, descending into anonymous members."""
    for m in comp.members:
        if m.name == name:
            if comp.kind_flag:
                return m.type_id, m.bit_offset, m.bitfield_size
            bf, extra = _legacy_bits(btf, m.type_id)
            return m.type_id, m.bit_offset + extra, bf
    for m in comp.members:
        if not m.name:
            sub = resolve(btf, btf[m.type_id])
            if isinstance(sub, Composite):
                hit = _find_member(btf, sub, name)
                if hit is not None:
                    return hit[0], m.bit_offset + hit[1], hit[2]
    return None


def member(btf: Btf, t: Type, path: str) -> FieldInfo:
    """Look a field up by dotted path (``"a.b[2].c"``) inside ``t``.

    :raises NotFoundError: a component does not exist (or the index is past the array).
    :raises TypeKindError: a component is applied to a type that has none.
    """
    cur = t
    off = 0
    bf = 0
    for tok in _parse_path(path):
        r = resolve(btf, cur)
        if bf:
            raise TypeKindError(f"{path}: a bitfield has no members or elements")
        if isinstance(tok, int):
            if not isinstance(r, Array):
                raise TypeKindError(f"{path}: [{tok}] applied to {_describe(cur)}, which is not an array")
            if tok >= r.nelems and r.nelems:
                raise NotFoundError("array element", f"{path}", f"index {tok} is past the {r.nelems} elements")
            elem = btf[r.type_id]
            off += tok * sizeof(btf, elem) * 8
            cur = elem
            continue
        if not isinstance(r, Composite):
            raise TypeKindError(f"{path}: .{tok} applied to {_describe(cur)}, which is not a struct or union")
        hit = _find_member(btf, r, tok)
        if hit is None:
            names = ", ".join(m.name for m in r.members if m.name)
            raise NotFoundError("member", tok, f"{_describe(r)} has: {names}")
        cur = btf[hit[0]]
        off += hit[1]
        bf = hit[2]
    return FieldInfo(path, cur, off, bf)


def _describe(t: Type) -> str:
    if t.kind in (BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM):
        return f"{t.kind.name.lower()} {t.name or '(anon)'} [{t.id}]"
    return f"{t.kind.name.lower()} {t.name + ' ' if t.name else ''}[{t.id}]"
