"""Making object BTF loadable: DATASEC fixups and replacing kinds a kernel lacks.

:func:`fixup_datasecs` fills in what the compiler leaves for the loader (a
DATASEC's size and its variables' offsets, from the ELF section headers and
symbol table). :func:`sanitize` returns a copy in which every kind the target
kernel does not know is replaced by one it does, with the same replacements
libbpf makes (so type ids stay stable):

========================  ===========================================
kernel lacks              replacement
========================  ===========================================
DATASEC/VAR               VAR → 1-byte INT; DATASEC → STRUCT of those
                          (``.``/``?`` in its name → ``_``)
``?`` in DATASEC names    the ``?`` → ``_``
FUNC/FUNC_PROTO           FUNC → TYPEDEF; FUNC_PROTO → ENUM of the params
global FUNC linkage       FUNC made static
FLOAT                     anonymous empty STRUCT of the same size
DECL_TAG                  1-byte INT
TYPE_TAG                  CONST
ENUM64                    signed ENUM → unsigned; ENUM64 → UNION of
                          1-byte placeholder ints
========================  ===========================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from ..errors import BpfmuxError
from ..uapi import BtfKind, BtfVarLinkage, FuncLinkage
from .model import Btf
from .types import (
    Const,
    Datasec,
    DeclTag,
    Enum,
    EnumValue,
    Float,
    Func,
    FuncProto,
    Int,
    Member,
    Struct,
    Type,
    Typedef,
    TypeTag,
    Union,
    Var,
)

__all__ = ["KernelFeatures", "fixup_datasecs", "sanitize"]


@dataclass(frozen=True)
class KernelFeatures:
    """Which BTF features the target kernel accepts (all by default)."""

    func: bool = True
    func_global: bool = True
    datasec: bool = True
    qmark_datasec: bool = True
    float: bool = True
    decl_tag: bool = True
    type_tag: bool = True
    enum64: bool = True

    @classmethod
    def none(cls) -> KernelFeatures:
        """A kernel with none of the optional features (oldest BTF)."""
        return cls(**{f.name: False for f in fields(cls)})

    @classmethod
    def probe(cls, load: Callable[[bytes], object]) -> KernelFeatures:
        """Find out by loading one tiny BTF blob per feature.

        :param load: loads a raw blob (e.g. ``bpfmux.live.sys.btf_load``),
            raising an ``OSError`` when the kernel rejects it; what it returns
            is closed if it has ``close()``.
        """
        from .builder import BtfBuilder

        def ok(build: Callable[[BtfBuilder], object]) -> bool:
            b = BtfBuilder()
            build(b)
            try:
                res = load(b.write())
            except OSError:
                return False
            close = getattr(res, "close", None)
            if callable(close):
                close()
            return True

        def func(b: BtfBuilder, linkage: FuncLinkage = FuncLinkage.STATIC) -> None:
            i = b.int("int", 4, signed=True)
            b.func("f", b.func_proto(i, [("a", i)]), linkage)

        def datasec(b: BtfBuilder, name: str = ".data") -> None:
            i = b.int("int", 4, signed=True)
            v = b.var("x", i, BtfVarLinkage.STATIC)
            b.datasec(name, [(v, 0, 4)], 4)

        def enum64(b: BtfBuilder) -> None:
            b.enum("e", {"A": 1 << 40}, size=8)

        def decl_tag(b: BtfBuilder) -> None:
            i = b.int("int", 4, signed=True)
            b.decl_tag("tag", b.struct("s", [("a", i)]), 0)

        def type_tag(b: BtfBuilder) -> None:
            i = b.int("int", 4, signed=True)
            b.ptr(b.type_tag("tag", i))

        return cls(
            func=ok(func),
            func_global=ok(lambda b: func(b, FuncLinkage.GLOBAL)),
            datasec=ok(datasec),
            qmark_datasec=ok(lambda b: datasec(b, "?.data")),
            float=ok(lambda b: b.float("float", 4)),
            decl_tag=ok(decl_tag),
            type_tag=ok(type_tag),
            enum64=ok(enum64),
        )


class FixupError(BpfmuxError):
    """A DATASEC cannot be fixed up (its section or a variable's symbol is missing)."""


def fixup_datasecs(
    btf: Btf,
    section_size: Callable[[str], int | None],
    symbol_offset: Callable[[str, str], int | None],
    strict: bool = False,
) -> None:
    """Set each DATASEC's size and its variables' offsets in place, sorted by offset.

    :param section_size: ELF section name → size, or ``None`` when there is no such section.
    :param symbol_offset: (section name, variable name) → the symbol's value, or ``None``.
    :param strict: raise on a section or symbol that cannot be found instead of
        leaving that DATASEC/variable as it is (``.kconfig``/``.ksyms`` have no
        ELF section: the loader lays them out).
    :raises FixupError: with ``strict``, something cannot be found.
    """
    for t in btf.own_types():
        if not isinstance(t, Datasec):
            continue
        size = section_size(t.name)
        if size is None:
            if strict:
                raise FixupError(f"DATASEC {t.name!r} has no ELF section; the object is inconsistent")
            continue
        t.size = size
        for v in t.vars:
            var = btf[v.type_id]
            if not isinstance(var, Var):
                continue
            if var.linkage == BtfVarLinkage.STATIC and var.name.startswith("."):
                continue
            off = symbol_offset(t.name, var.name)
            if off is None:
                if strict:
                    raise FixupError(f"variable {var.name!r} of {t.name!r} has no symbol; was the object stripped?")
                continue
            v.offset = off
        t.vars.sort(key=lambda v: v.offset)


def _fix_name(name: str) -> str:
    return name.replace(".", "_").replace("?", "_")


def sanitize(btf: Btf, features: KernelFeatures = KernelFeatures()) -> Btf:
    """A copy of ``btf`` with the kinds ``features`` lacks replaced (ids unchanged, except one added placeholder).

    :raises ParseError: ``btf`` has malformed records.
    """
    out = btf.copy()
    f = features
    placeholder = 0
    for t in list(out.own_types()):
        new: Type | None = None
        if (not f.datasec and isinstance(t, Var)) or (not f.decl_tag and isinstance(t, DeclTag)):
            new = Int(t.name, 1, 0, 8)
        elif not f.datasec and isinstance(t, Datasec):
            new = Struct(_fix_name(t.name), t.size, [Member(out[v.type_id].name, v.type_id, v.offset * 8) for v in t.vars], 0)
        elif not f.qmark_datasec and isinstance(t, Datasec) and t.name.startswith("?"):
            t.name = "_" + t.name[1:]
        elif not f.func and isinstance(t, FuncProto):
            new = Enum("", 4, [EnumValue(p.name, p.type_id) for p in t.params], False)
        elif not f.func and isinstance(t, Func):
            new = Typedef(t.name, t.type_id)
        elif not f.func_global and isinstance(t, Func):
            t.linkage = FuncLinkage.STATIC
        elif not f.float and isinstance(t, Float):
            new = Struct("", t.size, [], 0)
        elif not f.type_tag and isinstance(t, TypeTag):
            new = Const(t.type_id)
        elif not f.enum64 and isinstance(t, Enum) and t.kind == BtfKind.ENUM:  # not an Enum64
            t.signed = False
        elif not f.enum64 and t.kind == BtfKind.ENUM64:
            if not placeholder:
                placeholder = out.add(Int("enum64_placeholder", 1, 0))
            assert isinstance(t, Enum)
            new = Union(t.name, t.size, [Member(v.name, placeholder, 0) for v in t.values], 0)
        if new is not None:
            out.replace(t.id, new)
    out.reindex()
    return out
