"""Struct types from an object's DWARF, as BTF, for the types its BTF lacks.

clang puts a type in an object's BTF only when BTF needs it (a map's key or
value, a global, a function's signature). A tool's event record is often
reached only through a pointer into reserved ring-buffer memory
(``e = bpf_ringbuf_reserve(&events, sizeof(*e), 0)``): its ``struct event``
is in the object's DWARF (``-g``) but not in its BTF.
:func:`dwarf_structs` reads the DWARF with pyelftools and rebuilds the named
structs and unions (of the sizes asked for) as a small :class:`~bpfmux.btf.Btf`,
so the BTF codecs decode them: integers, enums, floats, arrays, nested
structs and unions, bit-fields; pointers become ``void *`` (decoded as
addresses). :func:`dwarf_index` lists the structs without converting them
(cached per object), :func:`dwarf_type` converts one.

The DWARF sections of a relocatable BPF object are read without applying
their relocations: they refer to other debug sections through section
symbols whose value is 0, with the offset in place, so the unrelocated
contents are already right (and reading is ~400 times faster).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ParseError

if TYPE_CHECKING:
    from ..btf import Btf

__all__ = ["DwarfStruct", "dwarf_index", "dwarf_structs", "dwarf_type"]

_DW_ATE_BOOLEAN, _DW_ATE_FLOAT, _DW_ATE_SIGNED, _DW_ATE_SIGNED_CHAR = 0x02, 0x04, 0x05, 0x06
_DW_ATE_UNSIGNED_CHAR = 0x08


@dataclass(frozen=True, slots=True)
class DwarfStruct:
    """A struct or union found in DWARF.

    :ivar name: its tag name.
    :ivar size: its size in bytes.
    :ivar type_id: its id in the BTF :func:`dwarf_structs` returns (0 in an index entry).
    :ivar decl_file: the file it was declared in (``""`` when DWARF does not say).
    :ivar offset: its DIE's offset in ``.debug_info``.
    """

    name: str
    size: int
    type_id: int
    decl_file: str
    offset: int = 0


def _open(data: bytes) -> Any:
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    if not elf.has_dwarf_info():
        raise ParseError("the object has no DWARF debug information (built without -g)")
    return elf.get_dwarf_info(relocate_dwarf_sections=False)


def dwarf_index(data: bytes) -> list[DwarfStruct]:
    """Every named struct and union of the object's DWARF (``type_id`` 0), without
    converting any. Reading a large object's DWARF takes seconds; the index
    is kept in bpfmux's private cache (keyed by the object's SHA-256), so it
    is read once.

    :raises ParseError: the object has no DWARF, or it cannot be read.
    """
    import hashlib

    from ..host.cache import cache_dir, read_json, write_json

    root = cache_dir()
    path = root / f"dwarf-index-{hashlib.sha256(data).hexdigest()[:40]}.json" if root is not None else None
    cached = read_json(path) if path is not None else None
    if isinstance(cached, list):
        try:
            return [DwarfStruct(str(n), int(sz), 0, str(f), int(off)) for n, sz, f, off in cached]
        except (TypeError, ValueError):
            pass
    from elftools.common.exceptions import ELFError

    out: list[DwarfStruct] = []
    try:
        dwarf = _open(data)
        for cu in dwarf.iter_CUs():
            files = _file_names(dwarf, cu)
            for die in cu.get_top_DIE().iter_children():
                if die.tag not in ("DW_TAG_structure_type", "DW_TAG_union_type"):
                    continue
                attrs = die.attributes
                if "DW_AT_declaration" in attrs or "DW_AT_name" not in attrs or "DW_AT_byte_size" not in attrs:
                    continue
                fileno = attrs["DW_AT_decl_file"].value if "DW_AT_decl_file" in attrs else None
                out.append(DwarfStruct(_name(die), int(attrs["DW_AT_byte_size"].value), 0,
                                       files.get(fileno, "") if fileno is not None else "", die.offset))
    except (ELFError, KeyError, ValueError, IndexError, AttributeError, TypeError) as err:
        raise ParseError(f"cannot read the object's DWARF: {err}") from None
    if path is not None:
        write_json(path, [[d.name, d.size, d.decl_file, d.offset] for d in out])
    return out


def dwarf_type(data: bytes, entry: DwarfStruct) -> tuple[Btf, int]:
    """One struct of :func:`dwarf_index` (and the types it uses) as BTF: ``(btf, type id)``.

    :raises ParseError: it cannot be read.
    """
    from elftools.common.exceptions import ELFError

    from ..btf.builder import BtfBuilder

    try:
        dwarf = _open(data)
        conv = _Converter(BtfBuilder())
        tid = conv.type_id(dwarf.get_DIE_from_refaddr(entry.offset))
    except (ELFError, KeyError, ValueError, IndexError, AttributeError, TypeError) as err:
        raise ParseError(f"cannot read struct {entry.name} from the object's DWARF: {err}") from None
    return conv.b.btf, tid


def dwarf_structs(data: bytes, sizes: Iterable[int] | None = None) -> tuple[Btf, list[DwarfStruct]]:
    """The named structs and unions of an object's DWARF (only those of
    ``sizes`` bytes when given), rebuilt as BTF.

    :returns: the BTF holding them (and the types they use) and one
        :class:`DwarfStruct` per struct, in DWARF order.
    :raises ParseError: the object has no DWARF, or it cannot be read.
    """
    from elftools.common.exceptions import ELFError

    from ..btf.builder import BtfBuilder

    wanted = set(sizes) if sizes is not None else None
    index = [e for e in dwarf_index(data) if wanted is None or e.size in wanted]
    found: list[DwarfStruct] = []
    seen: set[tuple[str, int]] = set()
    try:
        dwarf = _open(data)
        conv = _Converter(BtfBuilder())
        for e in index:
            if (e.name, e.size) in seen:
                continue
            seen.add((e.name, e.size))
            found.append(DwarfStruct(e.name, e.size, conv.type_id(dwarf.get_DIE_from_refaddr(e.offset)), e.decl_file,
                                     e.offset))
    except (ELFError, KeyError, ValueError, IndexError, AttributeError, TypeError) as err:
        raise ParseError(f"cannot read the object's DWARF: {err}") from None
    return conv.b.btf, found


def _name(die: Any) -> str:
    a = die.attributes.get("DW_AT_name")
    if a is None:
        return ""
    v = a.value
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def _file_names(dwarf: Any, cu: Any) -> dict[int, str]:
    try:
        lp = dwarf.line_program_for_CU(cu)
    except Exception:  # file names only help ranking; a bad line table must not stop decoding
        return {}
    if lp is None:
        return {}
    entries = lp.header.get("file_entry") or []
    base = 0 if cu.header.version >= 5 else 1  # DWARF 5 numbers files from 0
    out = {}
    for i, fe in enumerate(entries):
        nm = fe.name
        out[i + base] = nm.decode(errors="replace") if isinstance(nm, bytes) else str(nm)
    return out


class _Converter:
    """DIE → BTF type id, memoized by DIE offset."""

    def __init__(self, builder: Any) -> None:
        self.b = builder
        self.memo: dict[int, int] = {}

    def type_of(self, die: Any) -> int:
        if "DW_AT_type" not in die.attributes:
            return 0  # void
        return self.type_id(die.get_DIE_from_attribute("DW_AT_type"))

    def type_id(self, die: Any) -> int:
        key = die.offset
        if key in self.memo:
            return self.memo[key]
        tid = self._convert(die)
        self.memo[key] = tid
        return tid

    def _convert(self, die: Any) -> int:
        b, tag, attrs = self.b, die.tag, die.attributes
        if tag == "DW_TAG_base_type":
            size = attrs["DW_AT_byte_size"].value
            enc = attrs["DW_AT_encoding"].value if "DW_AT_encoding" in attrs else _DW_ATE_SIGNED
            name = _name(die) or f"int{size * 8}"
            if enc == _DW_ATE_FLOAT:
                return int(b.float(name, size))
            return int(b.int(name, size, signed=enc in (_DW_ATE_SIGNED, _DW_ATE_SIGNED_CHAR),
                             char=enc in (_DW_ATE_SIGNED_CHAR, _DW_ATE_UNSIGNED_CHAR), bool_=enc == _DW_ATE_BOOLEAN))
        if tag in ("DW_TAG_pointer_type", "DW_TAG_reference_type", "DW_TAG_subroutine_type"):
            return int(b.ptr(0))
        if tag in ("DW_TAG_const_type", "DW_TAG_volatile_type", "DW_TAG_restrict_type", "DW_TAG_atomic_type"):
            return self.type_of(die)
        if tag == "DW_TAG_typedef":
            return int(b.typedef(_name(die), self.type_of(die)))
        if tag == "DW_TAG_array_type":
            return self._array(die)
        if tag == "DW_TAG_enumeration_type":
            values = [(_name(c), int(c.attributes["DW_AT_const_value"].value)) for c in die.iter_children()
                      if c.tag == "DW_TAG_enumerator"]
            size = attrs["DW_AT_byte_size"].value if "DW_AT_byte_size" in attrs else 4
            return int(b.enum(_name(die), values, size=size))
        if tag in ("DW_TAG_structure_type", "DW_TAG_union_type"):
            return self._composite(die, tag == "DW_TAG_union_type")
        raise ParseError(f"DWARF type {tag} is not supported")

    def _array(self, die: Any) -> int:
        elem = self.type_of(die)
        dims = []
        for c in die.iter_children():
            if c.tag != "DW_TAG_subrange_type":
                continue
            a = c.attributes
            if "DW_AT_count" in a:
                dims.append(int(a["DW_AT_count"].value))
            elif "DW_AT_upper_bound" in a:
                dims.append(int(a["DW_AT_upper_bound"].value) + 1)
            else:
                dims.append(0)  # a flexible array member
        tid = elem
        for n in reversed(dims or [0]):
            tid = int(self.b.array(tid, n))
        return tid

    def _composite(self, die: Any, union: bool) -> int:
        attrs = die.attributes
        name = _name(die)
        if "DW_AT_declaration" in attrs or "DW_AT_byte_size" not in attrs:
            return int(self.b.fwd(name, union))
        members: list[tuple[str, int, int, int]] = []
        for c in die.iter_children():
            if c.tag != "DW_TAG_member":
                continue
            a = c.attributes
            tid = self.type_of(c)
            bits = int(a["DW_AT_bit_size"].value) if "DW_AT_bit_size" in a else 0
            if "DW_AT_data_bit_offset" in a:
                off = int(a["DW_AT_data_bit_offset"].value)
            else:
                loc = a.get("DW_AT_data_member_location")
                off = int(loc.value) * 8 if loc is not None and isinstance(loc.value, int) else 0
            members.append((_name(c), tid, off, bits))
        size = attrs["DW_AT_byte_size"].value
        if union:
            return int(self.b.union(name, members, size))
        return int(self.b.struct(name, members, size))
