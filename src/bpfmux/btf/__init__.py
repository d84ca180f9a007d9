"""BTF: parse, look up, edit and write BPF Type Format data.

Loading
-------
``Btf.parse(data, base=None, source=None)``
    Parse a raw blob (``.BTF`` section, ``/sys/kernel/btf/*``); little- or
    big-endian. Lazy: parsing indexes record offsets only; a type object is
    built the first time its id is used, the name index on the first lookup.
    ``base`` makes it split BTF (ids and string offsets continue the base's).
``Btf.load(path, base=None)``
    A raw BTF file or an ELF object (its ``.BTF`` section, via pyelftools).
``Btf.vmlinux()``
    The running kernel's BTF, parsed once and cached.
``Btf.module(name)``
    ``/sys/kernel/btf/<name>`` as split BTF on top of ``vmlinux()`` (cached);
    :class:`NotFoundError` when the module has no BTF.
``Btf(base=None)``
    An empty BTF to build with ``add``.

Types (``bpfmux.btf.types``)
----------------------------
One class per kind: ``Void Int Ptr Array Struct Union Enum Enum64 Fwd Typedef
Volatile Const Restrict Func FuncProto Var Datasec Float DeclTag TypeTag``;
``Struct``/``Union`` share ``Composite`` (``size``, ``members`` of
``Member(name, type_id, bit_offset, bitfield_size)``, ``kind_flag``);
``FuncProto(return_type_id, params=[Param(name, type_id)])``;
``Datasec(name, size, vars=[VarSecinfo(type_id, offset, size)])``;
``Enum.values`` of ``EnumValue(name, value)``. Every type has ``id``,
``name`` (``""`` if anonymous), ``kind`` (:class:`~bpfmux.uapi.BtfKind`),
``btf``; reference kinds have ``type_id`` and ``.type`` follows it. Types are
mutable: edit fields in place (e.g. a DATASEC's ``size`` and its vars'
``offset``) before writing.

Lookups (methods of ``Btf``)
----------------------------
- ``btf[type_id]`` (``NotFoundError`` if out of range), ``btf.get(id)``,
  ``len(btf)`` (= number of valid ids incl. void and base types),
  ``iter(btf)`` (ids 1..len-1), ``btf.own_types()`` (a split BTF's own),
  ``btf.kind_of(id)`` (cheap), ``btf.string(off)``.
- ``btf.find(name, kind=None)`` → first match, else ``NotFoundError`` with
  close names; ``kind`` is a ``BtfKind`` or its name (``"struct"``), and
  ``"enum"`` also matches ENUM64; ``name`` may be ``"struct foo"``.
  ``btf.find_all(name, kind=None)`` → list; ``btf.find_ids`` → ids.
- ``btf.type(ref)``: a Type, id or name → Type.
- ``btf.resolve(t)`` skips typedefs, const/volatile/restrict and type tags.
- ``btf.sizeof(t)``, ``btf.alignof(t)`` (pointers 8; packed → 1);
  ``TypeKindError`` (a ``TypeError``) for void/func/fwd.
- ``btf.fields(t, flatten=False)`` → ``[FieldInfo(name, type, bit_offset,
  bitfield_size)]`` with effective bit offsets for both bitfield encodings;
  ``FieldInfo.offset`` (bytes), ``.size``, ``.is_bitfield``.
- ``btf.member(t, "se.vruntime")`` / ``"comm[3]"`` / ``"a.b[2].c"`` →
  ``FieldInfo`` with the offset from the outer type; anonymous members are
  searched as in C.
- ``btf.func(name)`` → ``FuncSignature(name, func_id, proto_id, linkage,
  args, return_type, return_size, variadic)``; ``.nargs``, ``.arg_names``,
  ``.arg_sizes``, ``.has_struct_args``, ``.nregs``; each ``ArgInfo(name,
  type, size, by_value_struct, signed)`` with ``.nregs``.
  ``funcs.prototype(btf, proto)`` does the same for a bare FUNC_PROTO.
- ``btf.enum_value(enum_name, enumerator)``; ``Enum.value_of(name)``,
  ``Enum.name_of(value)``.
- ``btf.validate()`` builds every own type (``ParseError`` on bad records).

Editing and writing
-------------------
- ``btf.add(t) -> id``; ``btf.replace(id, t)``; ``btf.copy()``.
- ``writer.write(btf, byteorder="little") -> bytes``: the raw blob for
  ``BPF_BTF_LOAD`` (only the own types of a split BTF). An unmodified parsed
  BTF writes back byte for byte.
- ``sanitize.sanitize(btf, features) -> Btf``: a copy with kinds the kernel
  lacks replaced as libbpf does (``features`` from ``sanitize.KernelFeatures``).

Other modules
-------------
- ``btf.ext``: ``.BTF.ext`` (func_info, line_info, CO-RE relocation records per section).
- ``btf.core``: CO-RE relocation resolution against a target BTF.
- ``btf.codec``: bytes ⇄ Python values through a BTF type.
- ``btf.cdump``: C header (vmlinux.h) dump; ``btf.rawdump``: bpftool's raw listing.

Errors: malformed input raises :class:`~bpfmux.errors.ParseError`; missing
names :class:`~bpfmux.errors.NotFoundError` (a ``KeyError``).
"""

from __future__ import annotations

from .funcs import ArgInfo, FuncSignature
from .layout import FieldInfo, TypeKindError
from .model import VMLINUX_PATH, Btf
from .types import (
    Array,
    Composite,
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
    Type,
    Typedef,
    TypeTag,
    Union,
    Var,
    VarSecinfo,
    Void,
    Volatile,
)

__all__ = [
    "VMLINUX_PATH",
    "ArgInfo",
    "Array",
    "Btf",
    "Composite",
    "Const",
    "Datasec",
    "DeclTag",
    "Enum",
    "Enum64",
    "EnumValue",
    "FieldInfo",
    "Float",
    "Func",
    "FuncProto",
    "FuncSignature",
    "Fwd",
    "Int",
    "Member",
    "Param",
    "Ptr",
    "Restrict",
    "Struct",
    "Type",
    "TypeKindError",
    "TypeTag",
    "Typedef",
    "Union",
    "Var",
    "VarSecinfo",
    "Void",
    "Volatile",
]
