"""The BTF type model: one class per BTF kind.

Types are plain mutable objects (``__slots__``) that refer to other types by
id (``type_id``); when a type belongs to a :class:`~bpfmux.btf.model.Btf`
(``.btf`` is set), ``.type`` follows that id. Names are ``str`` (``""`` when
anonymous). Field values are the *raw* BTF values: for a struct member that is
``bit_offset`` and ``bitfield_size`` as encoded (with the struct's
``kind_flag``); :meth:`Btf.fields <bpfmux.btf.model.Btf.fields>` gives the
effective layout for both bitfield encodings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..errors import NotFoundError
from ..uapi import BtfIntEncoding, BtfKind, BtfVarLinkage, FuncLinkage

if TYPE_CHECKING:
    from .model import Btf

__all__ = [
    "Array",
    "Const",
    "Datasec",
    "DeclTag",
    "Enum",
    "Enum64",
    "EnumValue",
    "Float",
    "Func",
    "FuncProto",
    "Fwd",
    "Int",
    "Member",
    "Param",
    "Ptr",
    "Restrict",
    "Struct",
    "Type",
    "TypeTag",
    "Typedef",
    "Union",
    "Var",
    "VarSecinfo",
    "Void",
    "Volatile",
    "KIND_CLASSES",
]


class Type:
    """Base of every BTF type.

    :ivar id: the type id inside its :class:`Btf` (0 for ``void``; set when
        the type is added to a Btf).
    :ivar name: the type's name, ``""`` when anonymous.
    :ivar btf: the :class:`Btf` it belongs to, or ``None``.
    """

    __slots__ = ("btf", "id", "name")
    kind: ClassVar[BtfKind] = BtfKind.UNKN

    def __init__(self, name: str = "") -> None:
        self.id = -1
        self.name = name
        self.btf: Btf | None = None

    # --- navigation -------------------------------------------------------
    def _follow(self, type_id: int) -> Type:
        if self.btf is None:
            raise NotFoundError("type id", str(type_id), "this type belongs to no Btf; look the id up in its Btf")
        return self.btf[type_id]

    @property
    def kind_name(self) -> str:
        """The kind as bpftool spells it (``"STRUCT"``, ``"FUNC_PROTO"``, …)."""
        return self.kind.name

    def refs(self) -> list[int]:
        """Ids of every type this type refers to (in encoding order)."""
        return []

    def _set_refs(self, new: list[int]) -> None:
        """Replace the ids :meth:`refs` returns (same order and length)."""

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"<{type(self).__name__}{name} id={self.id}>"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), self.name))

    def _key(self) -> tuple:
        return (self.name,)


class Void(Type):
    """``void`` (type id 0)."""

    __slots__ = ()
    kind = BtfKind.UNKN

    def __init__(self) -> None:
        super().__init__("")
        self.id = 0

    def __repr__(self) -> str:
        return "<Void>"


class Int(Type):
    """``BTF_KIND_INT``.

    :ivar size: byte size.
    :ivar encoding: :class:`BtfIntEncoding` bits (signed, char, bool).
    :ivar bits_offset: bit offset of the value (legacy bitfields; usually 0).
    :ivar bits: number of value bits.
    """

    __slots__ = ("bits", "bits_offset", "encoding", "size")
    kind = BtfKind.INT

    def __init__(self, name: str, size: int, encoding: int = 0, bits: int | None = None, bits_offset: int = 0) -> None:
        super().__init__(name)
        self.size = size
        self.encoding = BtfIntEncoding(encoding)
        self.bits = size * 8 if bits is None else bits
        self.bits_offset = bits_offset

    @property
    def signed(self) -> bool:
        """True for a signed integer."""
        return bool(self.encoding & BtfIntEncoding.SIGNED)

    @property
    def is_bool(self) -> bool:
        """True for ``_Bool``."""
        return bool(self.encoding & BtfIntEncoding.BOOL)

    @property
    def is_char(self) -> bool:
        """True for a character type."""
        return bool(self.encoding & BtfIntEncoding.CHAR)

    def _key(self) -> tuple:
        return (self.name, self.size, int(self.encoding), self.bits, self.bits_offset)


class _Ref(Type):
    """A type that is a reference to one other type."""

    __slots__ = ("type_id",)

    def __init__(self, type_id: int, name: str = "") -> None:
        super().__init__(name)
        self.type_id = type_id

    @property
    def type(self) -> Type:
        """The referenced type.

        :raises NotFoundError: the type belongs to no Btf, or the id is unknown.
        """
        return self._follow(self.type_id)

    def refs(self) -> list[int]:
        return [self.type_id]

    def _set_refs(self, new: list[int]) -> None:
        (self.type_id,) = new

    def _key(self) -> tuple:
        return (self.name, self.type_id)


class Ptr(_Ref):
    """``BTF_KIND_PTR`` to ``type_id``."""

    __slots__ = ()
    kind = BtfKind.PTR

    def __init__(self, type_id: int) -> None:
        super().__init__(type_id)


class Typedef(_Ref):
    """``BTF_KIND_TYPEDEF``: ``name`` for ``type_id``."""

    __slots__ = ()
    kind = BtfKind.TYPEDEF

    def __init__(self, name: str, type_id: int) -> None:
        super().__init__(type_id, name)


class Volatile(_Ref):
    """``BTF_KIND_VOLATILE`` qualifier."""

    __slots__ = ()
    kind = BtfKind.VOLATILE

    def __init__(self, type_id: int) -> None:
        super().__init__(type_id)


class Const(_Ref):
    """``BTF_KIND_CONST`` qualifier."""

    __slots__ = ()
    kind = BtfKind.CONST

    def __init__(self, type_id: int) -> None:
        super().__init__(type_id)


class Restrict(_Ref):
    """``BTF_KIND_RESTRICT`` qualifier."""

    __slots__ = ()
    kind = BtfKind.RESTRICT

    def __init__(self, type_id: int) -> None:
        super().__init__(type_id)


class TypeTag(_Ref):
    """``BTF_KIND_TYPE_TAG``: ``__attribute__((btf_type_tag(name)))`` on ``type_id``.

    :ivar kind_flag: 1 for a type *attribute* (newer kernels), else 0.
    """

    __slots__ = ("kind_flag",)
    kind = BtfKind.TYPE_TAG

    def __init__(self, name: str, type_id: int, kind_flag: int = 0) -> None:
        super().__init__(type_id, name)
        self.kind_flag = kind_flag


class Array(Type):
    """``BTF_KIND_ARRAY``.

    :ivar type_id: element type.
    :ivar index_type_id: index type (an int).
    :ivar nelems: number of elements.
    """

    __slots__ = ("index_type_id", "nelems", "type_id")
    kind = BtfKind.ARRAY

    def __init__(self, type_id: int, index_type_id: int, nelems: int) -> None:
        super().__init__("")
        self.type_id = type_id
        self.index_type_id = index_type_id
        self.nelems = nelems

    @property
    def type(self) -> Type:
        """The element type."""
        return self._follow(self.type_id)

    def refs(self) -> list[int]:
        return [self.type_id, self.index_type_id]

    def _set_refs(self, new: list[int]) -> None:
        self.type_id, self.index_type_id = new

    def _key(self) -> tuple:
        return (self.type_id, self.index_type_id, self.nelems)


class Member:
    """A struct/union member.

    :ivar name: member name (``""`` for an anonymous struct/union member).
    :ivar type_id: member type.
    :ivar bit_offset: bit offset inside the parent, as encoded.
    :ivar bitfield_size: bitfield width when the parent has ``kind_flag``
        set, else 0 (the legacy encoding keeps the width in the int type).
    """

    __slots__ = ("bit_offset", "bitfield_size", "btf", "name", "type_id")

    def __init__(self, name: str, type_id: int, bit_offset: int, bitfield_size: int = 0, btf: Btf | None = None) -> None:
        self.name = name
        self.type_id = type_id
        self.bit_offset = bit_offset
        self.bitfield_size = bitfield_size
        self.btf = btf

    @property
    def type(self) -> Type:
        """The member's type.

        :raises NotFoundError: the member belongs to no Btf.
        """
        if self.btf is None:
            raise NotFoundError("type id", str(self.type_id), "this member belongs to no Btf")
        return self.btf[self.type_id]

    @property
    def offset(self) -> int:
        """Byte offset (bit offset // 8)."""
        return self.bit_offset // 8

    def __repr__(self) -> str:
        bf = f":{self.bitfield_size}" if self.bitfield_size else ""
        return f"<Member {self.name!r}{bf} type={self.type_id} bit_offset={self.bit_offset}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Member):
            return NotImplemented
        return (self.name, self.type_id, self.bit_offset, self.bitfield_size) == (
            other.name,
            other.type_id,
            other.bit_offset,
            other.bitfield_size,
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose: mutable and equal by value


class Composite(Type):
    """Common base of :class:`Struct` and :class:`Union`.

    :ivar size: byte size.
    :ivar members: list of :class:`Member`.
    :ivar kind_flag: 1 when members encode ``bitfield_size`` themselves.
    """

    __slots__ = ("kind_flag", "members", "size")

    def __init__(self, name: str, size: int, members: list[Member] | None = None, kind_flag: int | None = None) -> None:
        super().__init__(name)
        self.size = size
        self.members = members if members is not None else []
        if kind_flag is None:
            kind_flag = int(any(m.bitfield_size for m in self.members))
        self.kind_flag = kind_flag

    def member(self, name: str) -> Member:
        """The direct member called ``name`` (no descent into anonymous members).

        :raises NotFoundError: no such member.
        """
        for m in self.members:
            if m.name == name:
                return m
        raise NotFoundError("member", name, f"{self.kind.name.lower()} {self.name or '(anon)'} has: {', '.join(m.name for m in self.members if m.name)}")

    def refs(self) -> list[int]:
        return [m.type_id for m in self.members]

    def _set_refs(self, new: list[int]) -> None:
        for m, t in zip(self.members, new, strict=True):
            m.type_id = t

    def _key(self) -> tuple:
        return (self.name, self.size, self.kind_flag, tuple((m.name, m.type_id, m.bit_offset, m.bitfield_size) for m in self.members))


class Struct(Composite):
    """``BTF_KIND_STRUCT``."""

    __slots__ = ()
    kind = BtfKind.STRUCT


class Union(Composite):
    """``BTF_KIND_UNION``."""

    __slots__ = ()
    kind = BtfKind.UNION


class EnumValue:
    """One enumerator: ``name`` = ``value`` (a Python int, sign per the enum)."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: int) -> None:
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"<EnumValue {self.name}={self.value}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EnumValue):
            return NotImplemented
        return (self.name, self.value) == (other.name, other.value)

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose: mutable and equal by value


class Enum(Type):
    """``BTF_KIND_ENUM`` (32-bit values).

    :ivar size: byte size (1, 2, 4 or 8).
    :ivar values: list of :class:`EnumValue`.
    :ivar signed: the ``kind_flag``: values are signed.
    """

    __slots__ = ("signed", "size", "values")
    kind = BtfKind.ENUM

    def __init__(self, name: str, size: int = 4, values: list[EnumValue] | None = None, signed: bool = False) -> None:
        super().__init__(name)
        self.size = size
        self.values = values if values is not None else []
        self.signed = signed

    @property
    def kind_flag(self) -> int:
        """The encoded ``kind_flag`` (1 when signed)."""
        return int(self.signed)

    def value_of(self, name: str) -> int:
        """The value of enumerator ``name``.

        :raises NotFoundError: no such enumerator.
        """
        for v in self.values:
            if v.name == name:
                return v.value
        raise NotFoundError("enumerator", name, f"enum {self.name or '(anon)'} has {len(self.values)} values")

    def name_of(self, value: int) -> str | None:
        """The first enumerator name with ``value``, or ``None``."""
        for v in self.values:
            if v.value == value:
                return v.name
        return None

    def _key(self) -> tuple:
        return (self.name, self.size, self.signed, tuple((v.name, v.value) for v in self.values))


class Enum64(Enum):
    """``BTF_KIND_ENUM64`` (64-bit values)."""

    __slots__ = ()
    kind = BtfKind.ENUM64

    def __init__(self, name: str, size: int = 8, values: list[EnumValue] | None = None, signed: bool = False) -> None:
        super().__init__(name, size, values, signed)


class Fwd(Type):
    """``BTF_KIND_FWD``: a forward declaration.

    :ivar is_union: forward of a union (``kind_flag``) rather than a struct.
    """

    __slots__ = ("is_union",)
    kind = BtfKind.FWD

    def __init__(self, name: str, is_union: bool = False) -> None:
        super().__init__(name)
        self.is_union = is_union

    @property
    def kind_flag(self) -> int:
        """The encoded ``kind_flag``."""
        return int(self.is_union)

    def _key(self) -> tuple:
        return (self.name, self.is_union)


class Func(_Ref):
    """``BTF_KIND_FUNC``: a function ``name`` whose prototype is ``type_id``.

    :ivar linkage: :class:`FuncLinkage`.
    """

    __slots__ = ("linkage",)
    kind = BtfKind.FUNC

    def __init__(self, name: str, type_id: int, linkage: int = FuncLinkage.STATIC) -> None:
        super().__init__(type_id, name)
        self.linkage = FuncLinkage(linkage) if 0 <= linkage <= 2 else linkage

    def _key(self) -> tuple:
        return (self.name, self.type_id, int(self.linkage))


class Param:
    """A function-prototype parameter; ``name`` may be ``""``."""

    __slots__ = ("btf", "name", "type_id")

    def __init__(self, name: str, type_id: int, btf: Btf | None = None) -> None:
        self.name = name
        self.type_id = type_id
        self.btf = btf

    @property
    def type(self) -> Type:
        """The parameter type.

        :raises NotFoundError: the parameter belongs to no Btf.
        """
        if self.btf is None:
            raise NotFoundError("type id", str(self.type_id), "this parameter belongs to no Btf")
        return self.btf[self.type_id]

    def __repr__(self) -> str:
        return f"<Param {self.name!r} type={self.type_id}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Param):
            return NotImplemented
        return (self.name, self.type_id) == (other.name, other.type_id)

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose: mutable and equal by value


class FuncProto(Type):
    """``BTF_KIND_FUNC_PROTO``.

    :ivar return_type_id: return type (0 = void).
    :ivar params: list of :class:`Param`; a trailing ``("", 0)`` means ``...``.
    """

    __slots__ = ("params", "return_type_id")
    kind = BtfKind.FUNC_PROTO

    def __init__(self, return_type_id: int, params: list[Param] | None = None) -> None:
        super().__init__("")
        self.return_type_id = return_type_id
        self.params = params if params is not None else []

    @property
    def return_type(self) -> Type:
        """The return type."""
        return self._follow(self.return_type_id)

    @property
    def variadic(self) -> bool:
        """True when the last parameter is the ``...`` marker."""
        return bool(self.params) and self.params[-1].type_id == 0 and not self.params[-1].name

    def refs(self) -> list[int]:
        return [self.return_type_id] + [p.type_id for p in self.params]

    def _set_refs(self, new: list[int]) -> None:
        self.return_type_id = new[0]
        for p, t in zip(self.params, new[1:], strict=True):
            p.type_id = t

    def _key(self) -> tuple:
        return (self.return_type_id, tuple((p.name, p.type_id) for p in self.params))


class Var(_Ref):
    """``BTF_KIND_VAR``: a global variable.

    :ivar linkage: :class:`BtfVarLinkage`.
    """

    __slots__ = ("linkage",)
    kind = BtfKind.VAR

    def __init__(self, name: str, type_id: int, linkage: int = BtfVarLinkage.GLOBAL_ALLOCATED) -> None:
        super().__init__(type_id, name)
        self.linkage = BtfVarLinkage(linkage) if 0 <= linkage <= 2 else linkage

    def _key(self) -> tuple:
        return (self.name, self.type_id, int(self.linkage))


class VarSecinfo:
    """One variable placed in a :class:`Datasec`: ``type_id`` at ``offset`` for ``size`` bytes."""

    __slots__ = ("btf", "offset", "size", "type_id")

    def __init__(self, type_id: int, offset: int, size: int, btf: Btf | None = None) -> None:
        self.type_id = type_id
        self.offset = offset
        self.size = size
        self.btf = btf

    @property
    def type(self) -> Type:
        """The placed :class:`Var` (or :class:`Func` for ``.ksyms``).

        :raises NotFoundError: the entry belongs to no Btf.
        """
        if self.btf is None:
            raise NotFoundError("type id", str(self.type_id), "this entry belongs to no Btf")
        return self.btf[self.type_id]

    def __repr__(self) -> str:
        return f"<VarSecinfo type={self.type_id} offset={self.offset} size={self.size}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, VarSecinfo):
            return NotImplemented
        return (self.type_id, self.offset, self.size) == (other.type_id, other.offset, other.size)

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose: mutable and equal by value


class Datasec(Type):
    """``BTF_KIND_DATASEC``: an ELF data section (``.data``, ``.bss``, ``.maps``, …).

    :ivar size: section size (0 in an object file until the loader fixes it).
    :ivar vars: list of :class:`VarSecinfo`.
    """

    __slots__ = ("size", "vars")
    kind = BtfKind.DATASEC

    def __init__(self, name: str, size: int = 0, vars: list[VarSecinfo] | None = None) -> None:
        super().__init__(name)
        self.size = size
        self.vars = vars if vars is not None else []

    def refs(self) -> list[int]:
        return [v.type_id for v in self.vars]

    def _set_refs(self, new: list[int]) -> None:
        for v, t in zip(self.vars, new, strict=True):
            v.type_id = t

    def _key(self) -> tuple:
        return (self.name, self.size, tuple((v.type_id, v.offset, v.size) for v in self.vars))


class Float(Type):
    """``BTF_KIND_FLOAT`` of ``size`` bytes."""

    __slots__ = ("size",)
    kind = BtfKind.FLOAT

    def __init__(self, name: str, size: int) -> None:
        super().__init__(name)
        self.size = size

    def _key(self) -> tuple:
        return (self.name, self.size)


class DeclTag(_Ref):
    """``BTF_KIND_DECL_TAG``: ``btf_decl_tag(name)`` on ``type_id``.

    :ivar component_idx: -1 for the type itself, else the member/parameter index.
    :ivar kind_flag: 1 for a declaration *attribute* (newer kernels), else 0.
    """

    __slots__ = ("component_idx", "kind_flag")
    kind = BtfKind.DECL_TAG

    def __init__(self, name: str, type_id: int, component_idx: int = -1, kind_flag: int = 0) -> None:
        super().__init__(type_id, name)
        self.component_idx = component_idx
        self.kind_flag = kind_flag

    def _key(self) -> tuple:
        return (self.name, self.type_id, self.component_idx, self.kind_flag)


#: Type class for each kind.
KIND_CLASSES: dict[BtfKind, type[Type]] = {
    BtfKind.UNKN: Void,
    BtfKind.INT: Int,
    BtfKind.PTR: Ptr,
    BtfKind.ARRAY: Array,
    BtfKind.STRUCT: Struct,
    BtfKind.UNION: Union,
    BtfKind.ENUM: Enum,
    BtfKind.FWD: Fwd,
    BtfKind.TYPEDEF: Typedef,
    BtfKind.VOLATILE: Volatile,
    BtfKind.CONST: Const,
    BtfKind.RESTRICT: Restrict,
    BtfKind.FUNC: Func,
    BtfKind.FUNC_PROTO: FuncProto,
    BtfKind.VAR: Var,
    BtfKind.DATASEC: Datasec,
    BtfKind.FLOAT: Float,
    BtfKind.DECL_TAG: DeclTag,
    BtfKind.TYPE_TAG: TypeTag,
    BtfKind.ENUM64: Enum64,
}
