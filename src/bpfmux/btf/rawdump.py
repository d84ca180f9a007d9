"""The raw BTF listing, line for line as ``bpftool btf dump file F format raw`` prints it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..uapi import BtfKind
from .types import (
    Array,
    Composite,
    Datasec,
    DeclTag,
    Enum,
    Float,
    Func,
    FuncProto,
    Fwd,
    Int,
    Type,
    Var,
    _Ref,
)

if TYPE_CHECKING:
    from .model import Btf

__all__ = ["raw_lines", "format_type"]

_INT_ENC = {0: "(none)", 1: "SIGNED", 2: "CHAR", 4: "BOOL"}
_LINKAGE = {0: "static", 1: "global", 2: "extern"}


def _n(name: str) -> str:
    return name or "(anon)"


def format_type(btf: Btf, t: Type) -> str:
    """One type's entry (possibly several lines joined by ``\\n``), without the trailing newline."""
    head = f"[{t.id}] {t.kind.name} '{_n(t.name)}'"
    if isinstance(t, Int):
        return f"{head} size={t.size} bits_offset={t.bits_offset} nr_bits={t.bits} encoding={_INT_ENC.get(int(t.encoding), 'UNKN')}"
    if isinstance(t, Array):
        return f"{head} type_id={t.type_id} index_type_id={t.index_type_id} nr_elems={t.nelems}"
    if isinstance(t, Composite):
        lines = [f"{head} size={t.size} vlen={len(t.members)}"]
        for m in t.members:
            line = f"\t'{_n(m.name)}' type_id={m.type_id} bits_offset={m.bit_offset}"
            if t.kind_flag and m.bitfield_size:
                line += f" bitfield_size={m.bitfield_size}"
            lines.append(line)
        return "\n".join(lines)
    if isinstance(t, Enum):
        enc = "SIGNED" if t.signed else "UNSIGNED"
        lines = [f"{head} encoding={enc} size={t.size} vlen={len(t.values)}"]
        is64 = t.kind == BtfKind.ENUM64
        for v in t.values:
            if is64:
                val = f"{v.value}LL" if t.signed else f"{v.value & 0xFFFFFFFFFFFFFFFF}ULL"
            else:
                val = str(v.value) if t.signed else str(v.value & 0xFFFFFFFF)
            lines.append(f"\t'{_n(v.name)}' val={val}")
        return "\n".join(lines)
    if isinstance(t, Fwd):
        return f"{head} fwd_kind={'union' if t.is_union else 'struct'}"
    if isinstance(t, Func):
        return f"{head} type_id={t.type_id} linkage={_LINKAGE.get(int(t.linkage), '(unknown)')}"
    if isinstance(t, FuncProto):
        lines = [f"{head} ret_type_id={t.return_type_id} vlen={len(t.params)}"]
        lines += [f"\t'{_n(p.name)}' type_id={p.type_id}" for p in t.params]
        return "\n".join(lines)
    if isinstance(t, Var):
        return f"{head} type_id={t.type_id}, linkage={_LINKAGE.get(int(t.linkage), '(unknown)')}"
    if isinstance(t, Datasec):
        lines = [f"{head} size={t.size} vlen={len(t.vars)}"]
        for vs in t.vars:
            line = f"\ttype_id={vs.type_id} offset={vs.offset} size={vs.size}"
            if vs.type_id < len(btf):
                vt = btf[vs.type_id]
                line += f" ({vt.kind.name} '{_n(vt.name)}')"
            lines.append(line)
        return "\n".join(lines)
    if isinstance(t, Float):
        return f"{head} size={t.size}"
    if isinstance(t, DeclTag):
        return f"{head} type_id={t.type_id} component_idx={t.component_idx}"
    assert isinstance(t, _Ref)  # what is left: PTR, TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG
    return f"{head} type_id={t.type_id}"


def raw_lines(btf: Btf) -> Iterator[str]:
    """Every own type's entry, in id order (a split BTF lists only its own types, as bpftool does).

    :raises ParseError: a malformed type record.
    """
    for t in btf.own_types():
        yield format_type(btf, t)
