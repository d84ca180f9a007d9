"""BTF → compilable C declarations (a ``vmlinux.h``).

Every named struct, union, enum and typedef is emitted, each after what it
needs: a type used by value is defined first, a struct or union used only
through a pointer gets a forward declaration. Member offsets are reproduced
exactly: gaps become unnamed bitfields (``long: 64;``; a gap of more than a
page one ``char __bpfmux_pad_N[...]`` array) and a struct whose
members cannot sit at their natural alignment is ``__attribute__((packed))``.
Types that share a name get ``___2``, ``___3`` … suffixes, as do duplicate
enumerators. Anonymous structs/unions are written inline where they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..uapi import BtfKind
from .layout import TypeKindError, alignof, resolve, sizeof
from .types import (
    Array,
    Composite,
    Const,
    Enum,
    Func,
    FuncProto,
    Fwd,
    Int,
    Ptr,
    Restrict,
    Type,
    Typedef,
    TypeTag,
    Volatile,
)

if TYPE_CHECKING:
    from .model import Btf

__all__ = ["CDumper", "declaration", "dump_c"]

_QUAL = {BtfKind.CONST: "const", BtfKind.VOLATILE: "volatile", BtfKind.RESTRICT: "restrict"}
_NOT_C_INT = {"ssizetype": "long"}
_BUILTIN_TYPEDEFS = {"__builtin_va_list"}
_INT_BY_SIZE = {
    (1, False): "unsigned char",
    (1, True): "signed char",
    (2, False): "unsigned short",
    (2, True): "short",
    (4, False): "unsigned int",
    (4, True): "int",
    (8, False): "unsigned long long",
    (8, True): "long long",
}
_PAD_UNITS = ((64, "long"), (32, "int"), (16, "short"), (8, "char"))
#: Most ``long: 64;`` lines one gap is written as, as bpftool does (a page: every gap of a real kernel); larger gaps: one array.
_PAD_LINES_MAX = 512
_TAG = {BtfKind.STRUCT: "struct", BtfKind.UNION: "union", BtfKind.ENUM: "enum", BtfKind.ENUM64: "enum"}


class CDumper:
    """Renders the types of one :class:`Btf` as C.

    :param btf: the types.
    :param param_names: keep parameter names in function-pointer declarators.
    """

    def __init__(self, btf: Btf, param_names: bool = False) -> None:
        self.btf = btf
        self.param_names = param_names
        self.out: list[str] = []
        self._names: dict[int, str] = {}
        self._state: dict[int, int] = {}  # 1 = being emitted, 2 = emitted (definitions and typedefs)
        self._forwarded: set[str] = set()
        self._enum_consts: dict[str, int] = {}
        self._inline_enums: set[int] = set()
        self._anon_visit: set[int] = set()
        self._assign_names()

    # ----------------------------------------------------------- naming
    def _assign_names(self) -> None:
        btf = self.btf
        tags: dict[str, list[tuple[BtfKind, int]]] = {}
        ordinary: dict[str, int] = {}
        refs: dict[int, list[int]] = {}
        fwds: list[Fwd] = []
        for t in btf:
            k = t.kind
            if k in (BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM, BtfKind.ENUM64) and t.name:
                tag = "enum" if k in (BtfKind.ENUM, BtfKind.ENUM64) else k.name.lower()
                seen = tags.setdefault(t.name, [])
                n = len(seen) + 1
                self._names[t.id] = t.name if n == 1 else f"{t.name}___{n}"
                seen.append((BtfKind.ENUM if tag == "enum" else k, t.id))
            elif isinstance(t, Fwd):
                fwds.append(t)
            elif k == BtfKind.TYPEDEF:
                n = ordinary.get(t.name, 0) + 1
                ordinary[t.name] = n
                self._names[t.id] = t.name if n == 1 else f"{t.name}___{n}"
            if k not in (BtfKind.FUNC, BtfKind.VAR, BtfKind.DATASEC, BtfKind.DECL_TAG):
                for r in t.refs():
                    refs.setdefault(r, []).append(t.id)
        for f in fwds:
            want = BtfKind.UNION if f.is_union else BtfKind.STRUCT
            match = [i for k, i in tags.get(f.name, []) if k == want]
            if match:
                self._names[f.id] = self._names[match[0]]
            elif f.name in tags:
                self._names[f.id] = f"{f.name}___{len(tags[f.name]) + 1}"
                tags[f.name].append((want, f.id))
            else:
                self._names[f.id] = f.name
                tags[f.name] = [(want, f.id)]
        for t in btf:
            if t.kind in (BtfKind.ENUM, BtfKind.ENUM64) and not t.name:
                users = refs.get(t.id, [])
                if len(users) == 1 and btf.kind_of(users[0]) in (BtfKind.STRUCT, BtfKind.UNION, BtfKind.TYPEDEF):
                    self._inline_enums.add(t.id)

    def name_of(self, t: Type) -> str:
        """The C name given to a named struct/union/enum/typedef/forward (after de-duplication)."""
        return self._names.get(t.id, t.name)

    # ------------------------------------------------------ declarators
    def decl(self, type_id: int, inner: str = "", indent: int = 0) -> str:
        """A C declarator of ``inner`` (a name, or ``""``) with type ``type_id``.

        :raises TypeKindError: the type nests more than 256 levels deep (a reference loop).
        :raises NotFoundError: an unknown type id.
        """
        btf = self.btf
        for _ in range(256):
            t = btf[type_id]
            k = t.kind
            if isinstance(t, Ptr):
                target = self._skip_tags(t.type_id)
                inner = "*" + inner
                if btf.kind_of(target) in (BtfKind.ARRAY, BtfKind.FUNC_PROTO):
                    inner = f"({inner})"
                type_id = t.type_id
            elif isinstance(t, Array):
                inner = f"{inner}[{t.nelems}]"
                type_id = t.type_id
            elif isinstance(t, FuncProto):
                params = t.params[:-1] if t.variadic else t.params
                ps = [self.decl(p.type_id, p.name if self.param_names else "", indent) for p in params]
                if t.variadic:
                    ps.append("...")
                inner = f"{inner}({', '.join(ps) or 'void'})"
                type_id = t.return_type_id
            elif isinstance(t, Const | Volatile | Restrict):  # the kinds in _QUAL
                target = self._skip_tags(t.type_id)
                if btf.kind_of(target) == BtfKind.PTR:
                    inner = f"{_QUAL[k]} {inner}".rstrip()
                    type_id = t.type_id
                else:
                    rest = self.decl(t.type_id, inner, indent)
                    return rest if rest.startswith(_QUAL[k] + " ") else f"{_QUAL[k]} {rest}"
            elif isinstance(t, TypeTag | Func):
                type_id = t.type_id
            else:
                base = self._base_name(t, indent)
                return f"{base} {inner}" if inner else base
        raise TypeKindError(f"type [{type_id}] nests too deeply to write as C")

    def _skip_tags(self, type_id: int) -> int:
        while self.btf.kind_of(type_id) == BtfKind.TYPE_TAG and isinstance(tag := self.btf[type_id], TypeTag):
            type_id = tag.type_id
        return type_id

    def _base_name(self, t: Type, indent: int) -> str:
        k = t.kind
        if k == BtfKind.UNKN:
            return "void"
        if k == BtfKind.INT:
            return _NOT_C_INT.get(t.name, t.name)
        if k == BtfKind.FLOAT:
            return t.name
        if k == BtfKind.TYPEDEF:
            return self._names.get(t.id, t.name)
        if isinstance(t, Fwd):
            return f"{'union' if t.is_union else 'struct'} {self._names.get(t.id, t.name)}"
        if isinstance(t, Composite):  # STRUCT, UNION
            if t.name:
                return f"{_TAG[k]} {self._names.get(t.id, t.name)}"
            return self._composite_text(t, indent)
        if isinstance(t, Enum):  # ENUM, ENUM64
            if t.name:
                return f"enum {self._names.get(t.id, t.name)}"
            if t.id in self._inline_enums:
                return self._enum_text(t, indent)
            return _INT_BY_SIZE.get((t.size, t.signed), "int")
        return t.name or "void"

    # ------------------------------------------------------- bodies
    def _enum_text(self, t: Enum, indent: int) -> str:
        pad = "\t" * (indent + 1)
        lines = [f"enum {self._names.get(t.id, t.name)} {{" if t.name else "enum {"]
        for v in t.values:
            name = v.name
            n = self._enum_consts.get(name, 0) + 1
            self._enum_consts[name] = n
            if n > 1:
                name = f"{name}___{n}"
            val = v.value
            if t.kind == BtfKind.ENUM and not t.signed:
                val &= 0xFFFFFFFF
            suffix = "ULL" if val > 0x7FFFFFFFFFFFFFFF else ("LL" if val < -0x80000000 or val > 0xFFFFFFFF else "")
            if val == -(1 << 63):
                lines.append(f"{pad}{name} = (-9223372036854775807LL - 1),")
            else:
                lines.append(f"{pad}{name} = {val}{suffix},")
        lines.append("\t" * indent + "}")
        text = "\n".join(lines)
        if t.size < 4:
            text += " __attribute__((packed))"
        return text

    def _is_packed(self, t: Composite) -> bool:
        try:
            return alignof(self.btf, t) == 1 and any(alignof(self.btf, self.btf[m.type_id]) > 1 for m in t.members) or self._bitfields_misfit(t)
        except TypeKindError:
            return False

    def _bitfields_misfit(self, t: Composite) -> bool:
        if t.kind != BtfKind.STRUCT:
            return False
        for m, off, bf in self._layout(t):
            if bf:
                unit = self._size(m.type_id) * 8
                if unit and off // unit != (off + bf - 1) // unit:
                    return True
        return False

    def _layout(self, t: Composite):
        btf = self.btf
        for m in t.members:
            if t.kind_flag:
                yield m, m.bit_offset, m.bitfield_size
                continue
            r = resolve(btf, btf[m.type_id])
            if isinstance(r, Int) and (r.bits != r.size * 8 or r.bits_offset):
                yield m, m.bit_offset + r.bits_offset, r.bits
            else:
                yield m, m.bit_offset, 0

    def _size(self, type_id: int) -> int:
        try:
            return sizeof(self.btf, self.btf[type_id])
        except TypeKindError:
            return 0

    def _align(self, type_id: int) -> int:
        try:
            return alignof(self.btf, self.btf[type_id])
        except TypeKindError:
            return 1

    @staticmethod
    def _pad(lines: list[str], pos: int, end: int, pad: str) -> None:
        """Fill bits ``pos`` to ``end`` with unnamed bit fields, as bpftool
        does (``long: 64;`` per 8 bytes); a gap of more than a page
        (:data:`_PAD_LINES_MAX` such lines; no real kernel has one) becomes
        one ``char`` array (a struct of 4 GiB must not take 2**29 lines)."""
        if end - pos > 64 * _PAD_LINES_MAX:
            start = -(-pos // 8) * 8
            stop = end // 8 * 8
            CDumper._pad(lines, pos, start, pad)
            lines.append(f"{pad}char __bpfmux_pad_{start // 8}[{(stop - start) // 8}];")
            CDumper._pad(lines, stop, end, pad)
            return
        while pos < end:
            rem = end - pos
            for unit, name in _PAD_UNITS:
                if pos % unit == 0 and rem >= unit:
                    lines.append(f"{pad}{name}: {unit};")
                    pos += unit
                    break
            else:
                k = min(rem, 8 - pos % 8)
                lines.append(f"{pad}unsigned char: {k};")
                pos += k

    def _composite_text(self, t: Composite, indent: int) -> str:
        is_struct = t.kind == BtfKind.STRUCT
        packed = self._is_packed(t)
        pad = "\t" * (indent + 1)
        head = f"{_TAG[t.kind]} {self._names.get(t.id, t.name)} {{" if t.name else f"{_TAG[t.kind]} {{"
        lines = [head]
        pos = 0
        best = 1
        biggest = 0
        for m, off, bf in self._layout(t):
            size = self._size(m.type_id)
            align = self._align(m.type_id)
            best = max(best, align)
            if is_struct:
                if bf:
                    nat = pos
                    unit = size * 8
                    if not packed and unit and nat // unit != (nat + bf - 1) // unit:
                        nat = -(-nat // unit) * unit
                else:
                    step = 8 if packed else align * 8
                    nat = -(-pos // step) * step
                if off > nat:
                    self._pad(lines, pos, off, pad)
            decl = self.decl(m.type_id, m.name, indent + 1)
            lines.append(f"{pad}{decl}: {bf};" if bf else f"{pad}{decl};")
            end = off + (bf if bf else size * 8)
            pos = max(pos, end) if is_struct else pos
            biggest = max(biggest, end)
        if is_struct:
            align_bits = 8 if packed else best * 8
            natural_end = -(-pos // align_bits) * align_bits
            if t.size * 8 > natural_end:
                self._pad(lines, pos, t.size * 8, pad)
        else:
            step = 8 if packed else best * 8
            if t.size * 8 > -(-biggest // step) * step:
                lines.append(f"{pad}char __bpfmux_pad_{t.id}[{t.size}];")
        lines.append("\t" * indent + "}" + (" __attribute__((packed))" if packed else ""))
        return "\n".join(lines)

    # ------------------------------------------------------- ordering
    def _need(self, type_id: int, complete: bool, depth: int = 0) -> None:
        if depth > 200:
            return
        btf = self.btf
        t = btf[type_id]
        k = t.kind
        if k in (BtfKind.UNKN, BtfKind.INT, BtfKind.FLOAT):
            return
        if isinstance(t, Ptr):
            self._need(t.type_id, False, depth + 1)
        elif isinstance(t, Array):
            self._need(t.type_id, True, depth + 1)
        elif isinstance(t, Const | Volatile | Restrict | TypeTag):  # _QUAL and TYPE_TAG
            self._need(t.type_id, complete, depth + 1)
        elif isinstance(t, FuncProto):
            self._need(t.return_type_id, False, depth + 1)
            for p in t.params:
                self._need(p.type_id, False, depth + 1)
        elif isinstance(t, Typedef):
            self.emit_typedef(type_id)
            if complete:
                self._need(t.type_id, True, depth + 1)
        elif isinstance(t, Composite):  # STRUCT, UNION
            if t.name:
                if complete:
                    self.emit_composite(type_id)
                else:
                    self._forward(t)
            elif type_id not in self._anon_visit:
                self._anon_visit.add(type_id)
                for m in t.members:
                    self._need(m.type_id, True, depth + 1)
                self._anon_visit.discard(type_id)
        elif k in (BtfKind.ENUM, BtfKind.ENUM64):
            if t.name or type_id not in self._inline_enums:
                self.emit_enum(type_id)
        elif k == BtfKind.FWD:
            self._forward(t)

    def _forward(self, t: Type) -> None:
        if self._state.get(t.id) == 2:
            return
        if isinstance(t, Fwd):
            tag = "union" if t.is_union else "struct"
        else:
            tag = _TAG[t.kind]
        name = self._names.get(t.id, t.name)
        key = f"{tag} {name}"
        if key in self._forwarded:
            return
        self._forwarded.add(key)
        self.out.append(f"{key};\n\n")

    def emit_composite(self, type_id: int) -> None:
        """Emit a named struct/union definition (after what it needs)."""
        if self._state.get(type_id):
            return
        self._state[type_id] = 1
        t = self.btf[type_id]
        assert isinstance(t, Composite)
        for m in t.members:
            self._need(m.type_id, True)
        self.out.append(self._composite_text(t, 0) + ";\n\n")
        self._state[type_id] = 2
        self._forwarded.add(f"{_TAG[t.kind]} {self._names[type_id]}")

    def emit_enum(self, type_id: int) -> None:
        """Emit an enum definition (named, or an anonymous one that is not inlined)."""
        if self._state.get(type_id):
            return
        self._state[type_id] = 2
        t = self.btf[type_id]
        assert isinstance(t, Enum)
        self.out.append(self._enum_text(t, 0) + ";\n\n")

    def emit_typedef(self, type_id: int) -> None:
        """Emit a typedef (after what its target needs)."""
        if self._state.get(type_id):
            return
        t = self.btf[type_id]
        if t.name in _BUILTIN_TYPEDEFS:
            self._state[type_id] = 2
            return
        assert isinstance(t, Typedef)  # called for TYPEDEF ids
        self._state[type_id] = 1
        self._need(t.type_id, False)
        self.out.append(f"typedef {self.decl(t.type_id, self._names[type_id])};\n\n")
        self._state[type_id] = 2

    def dump(self, guard: str = "__VMLINUX_H__") -> str:
        """The whole header: every named type, in dependency order."""
        self.out.append(f"#ifndef {guard}\n#define {guard}\n\n")
        self.out.append(
            "#ifndef BPF_NO_PRESERVE_ACCESS_INDEX\n"
            "#pragma clang attribute push (__attribute__((preserve_access_index)), apply_to = record)\n"
            "#endif\n\n"
        )
        btf = self.btf
        for t in btf:
            k = t.kind
            if k in (BtfKind.STRUCT, BtfKind.UNION) and t.name:
                self.emit_composite(t.id)
            elif k in (BtfKind.ENUM, BtfKind.ENUM64) and (t.name or t.id not in self._inline_enums):
                self.emit_enum(t.id)
            elif k == BtfKind.TYPEDEF:
                self.emit_typedef(t.id)
            elif k == BtfKind.FWD:
                self._forward(t)
        for i in sorted(self._inline_enums):
            if not self._state.get(i):
                self.emit_enum(i)
        self.out.append("#ifndef BPF_NO_PRESERVE_ACCESS_INDEX\n#pragma clang attribute pop\n#endif\n\n")
        self.out.append(f"#endif /* {guard} */\n")
        return "".join(self.out)


def dump_c(btf: Btf, guard: str = "__VMLINUX_H__") -> str:
    """Every named type of ``btf`` as a compilable C header.

    :raises ParseError: malformed BTF records.
    """
    return CDumper(btf).dump(guard)


def declaration(btf: Btf, type_id: int, name: str = "") -> str:
    """One C declaration of ``name`` with type ``type_id`` (parameter names kept), e.g. ``int (*cb)(int x)``."""
    d = CDumper.__new__(CDumper)
    d.btf = btf
    d.param_names = True
    d.out = []
    d._names = {}
    d._inline_enums = set()
    d._enum_consts = {}
    return d.decl(type_id, name)
