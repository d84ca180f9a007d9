"""ELF object → :class:`~bpfmux.obj.spec.ObjectSpec` (pyelftools for the ELF).

Follows libbpf's reading of a BPF object: programs are the global functions
of executable sections other than ``.text``; ``.text`` holds subprograms;
maps come from ``.maps`` (BTF-defined), ``maps`` (legacy ``bpf_map_def``) and
global data sections; externs are undefined symbols described by the
``.kconfig``/``.ksyms`` DATASECs; each program is linked with the subprograms
it reaches (appended depth-first, as libbpf does).
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BpfmuxError, NotFoundError, ParseError
from ..isa.insn import decode
from ..isa.opcodes import LDDW, CallKind, Class, Jmp, Pseudo
from ..uapi import BtfKind, BtfVarLinkage, MapFlags, MapType
from .sections import match_section
from .spec import (
    CoreRelo,
    CoreReloKind,
    Extern,
    ExternKind,
    FuncInfo,
    LineInfo,
    MapSpec,
    ObjectSpec,
    PinType,
    ProgramSpec,
    Relocation,
    RelocKind,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..btf import Btf, FieldInfo, Type, Var
    from ..btf.ext import BtfExt

__all__ = ["load_object"]

SHT_PROGBITS, SHT_SYMTAB, SHT_NOBITS, SHT_REL = 1, 2, 8, 9
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION = 0, 1, 2, 3
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
SHN_UNDEF = 0
EM_BPF = 247
_CALL = Class.JMP | Jmp.CALL
_INSN = struct.Struct("<BBhi")
_LEGACY_MAP = struct.Struct("<5I")
OBJ_NAME_LEN = 16


@dataclass(slots=True)
class _Sec:
    index: int
    name: str
    type: int
    flags: int
    size: int
    data: bytes
    info: int
    link: int


@dataclass(slots=True)
class _Sym:
    index: int
    name: str
    value: int
    size: int
    type: int
    bind: int
    visibility: int
    shndx: int


@dataclass(slots=True)
class _Func:
    """A function in an executable section: a program or a subprogram."""

    name: str
    sec: _Sec
    start: int  # slot
    end: int  # slot (exclusive)
    is_prog: bool


#: a relocation of the linked code, by slot: (slot, kind, symbol, target, offset)
_SlotReloc = tuple[int, RelocKind, str, str, int]


@dataclass(slots=True)
class _RawRel:
    sec: _Sec  # section relocated
    slot: int  # slot index within that section
    sym: _Sym


def load_object(obj: str | os.PathLike[str] | bytes | bytearray | memoryview, name: str | None = None) -> ObjectSpec:
    """Read a BPF ELF object.

    :param obj: a path, or the object's bytes.
    :param name: object name (default: the file name up to its first ``.``,
        as libbpf; ``"obj"`` for bytes).
    :raises ParseError: the input is not a valid BPF object (the message
        says what is wrong and where).
    :raises FileNotFoundError: the path does not exist.
    """
    if isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        source = name or "<bytes>"
        default_name = "obj"
    else:
        path = Path(obj)
        data = path.read_bytes()
        source = str(path)
        default_name = path.name.split(".", 1)[0] or "obj"
    try:
        return _Loader(data, name or default_name, source).load()
    except NotFoundError as err:
        # a type id or string offset that points nowhere: the object is corrupt
        raise ParseError(f"malformed BPF object: {err}", None, source) from None
    except BpfmuxError as err:
        if isinstance(err, TypeError):  # btf's TypeKindError: corrupt BTF gave a type of the wrong kind (a void key)
            raise ParseError(f"malformed BPF object: {err}", None, source) from None
        raise
    except (struct.error, IndexError, KeyError, ValueError, TypeError, AttributeError, UnicodeDecodeError,
            OverflowError, RecursionError, AssertionError) as err:
        # anything the ELF or BTF parsers did not foresee in a corrupt file
        raise ParseError(f"malformed BPF object ({type(err).__name__}: {err}); rebuild it with clang -target bpf",
                         None, source) from None


def _read_elf(data: bytes, source: str) -> tuple[list[_Sec], list[_Sym]]:
    from elftools.common.exceptions import ELFError, ELFParseError, ELFRelocationError
    from elftools.construct import ConstructError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        elf = ELFFile(io.BytesIO(data))
        if elf.elfclass != 64 or not elf.little_endian:
            raise ParseError("not a 64-bit little-endian ELF object (BPF objects are ELF64 LE)", 4, source)
        if elf["e_machine"] not in ("EM_BPF", EM_BPF):
            raise ParseError(f"ELF machine is {elf['e_machine']}, not BPF; compile with clang -target bpf", 18, source)
        if elf["e_type"] != "ET_REL":
            raise ParseError(f"ELF type is {elf['e_type']}, expected a relocatable object (ET_REL)", 16, source)
        secs: list[_Sec] = []
        symtab: SymbolTableSection | None = None
        for i, s in enumerate(elf.iter_sections()):
            h = s.header
            stype = _sht(h["sh_type"])
            if stype in (SHT_PROGBITS, SHT_REL, SHT_SYMTAB) and h["sh_size"]:
                if h["sh_offset"] + h["sh_size"] > len(data):
                    raise ParseError(f"section {s.name!r} extends past the end of the file", h["sh_offset"], source)
                body = s.data()
            else:
                body = b""
            secs.append(_Sec(i, s.name, stype, h["sh_flags"], h["sh_size"], body, h["sh_info"], h["sh_link"]))
            if stype == SHT_SYMTAB and isinstance(s, SymbolTableSection):
                symtab = s
        syms: list[_Sym] = []
        if symtab is not None:
            for j, sym in enumerate(symtab.iter_symbols()):
                e = sym.entry
                shndx = e["st_shndx"]
                if not isinstance(shndx, int):
                    shndx = -1 if shndx != "SHN_UNDEF" else SHN_UNDEF
                syms.append(_Sym(j, sym.name, e["st_value"], e["st_size"], _stt(e["st_info"]["type"]),
                                 _stb(e["st_info"]["bind"]), _stv(e["st_other"]["visibility"]), shndx))
        return secs, syms
    except (ELFError, ELFParseError, ELFRelocationError, ConstructError) as err:
        raise ParseError(f"not a readable ELF object: {err}", None, source) from None


_STT = {"STT_NOTYPE": 0, "STT_OBJECT": 1, "STT_FUNC": 2, "STT_SECTION": 3, "STT_FILE": 4}
_STB = {"STB_LOCAL": 0, "STB_GLOBAL": 1, "STB_WEAK": 2}
_STV = {"STV_DEFAULT": 0, "STV_INTERNAL": 1, "STV_HIDDEN": 2, "STV_PROTECTED": 3}
_SHT = {"SHT_PROGBITS": 1, "SHT_SYMTAB": 2, "SHT_STRTAB": 3, "SHT_NOBITS": 8, "SHT_REL": 9}


def _stt(v: object) -> int:
    return v if isinstance(v, int) else _STT.get(str(v), 15)


def _stb(v: object) -> int:
    return v if isinstance(v, int) else _STB.get(str(v), 15)


def _stv(v: object) -> int:
    return v if isinstance(v, int) else _STV.get(str(v), 0)


def _sht(v: object) -> int:
    return v if isinstance(v, int) else _SHT.get(str(v), -1)


def _cstr(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def _is_data_section(name: str) -> bool:
    return name in (".data", ".rodata", ".bss") or name.startswith((".data.", ".rodata.", ".bss."))


class _Loader:
    def __init__(self, data: bytes, name: str, source: str) -> None:
        self.data = data
        self.name = name
        self.source = source
        self.kconfig_size = 0  # set by _layout_kconfig when the object has kconfig externs

    def err(self, msg: str, offset: int | None = None) -> ParseError:
        return ParseError(msg, offset, self.source)

    # -- top level --------------------------------------------------------

    def load(self) -> ObjectSpec:
        self.secs, self.syms = _read_elf(self.data, self.source)
        self.by_name = {s.name: s for s in self.secs}
        spec = ObjectSpec(self.name, source=self.source)
        lic = self.by_name.get("license")
        spec.license = _cstr(lic.data) if lic else ""
        ver = self.by_name.get("version")
        if ver is not None:
            if len(ver.data) != 4:
                raise self.err(f"'version' section is {len(ver.data)} bytes, expected 4")
            spec.kernel_version = struct.unpack("<I", ver.data)[0]
        self.btf = self._load_btf()
        spec.btf = self.btf
        self.ext = self._load_btf_ext()
        self.rels = self._collect_relocations()
        spec.externs = self.externs = self._collect_externs()
        self._collect_maps(spec)
        self._collect_programs(spec)
        return spec

    # -- BTF --------------------------------------------------------------

    def _load_btf(self) -> Btf | None:
        sec = self.by_name.get(".BTF")
        if sec is None:
            return None
        from ..btf import Btf

        btf = Btf.parse(sec.data, source=f"{self.source}: .BTF")
        self._fixup_datasecs(btf)
        return btf

    def _fixup_datasecs(self, btf: Btf) -> None:
        from ..btf.types import Datasec, Var

        syms_by_name: dict[str, _Sym] = {}
        for s in self.syms:
            if s.type == STT_OBJECT and s.bind in (STB_GLOBAL, STB_WEAK):
                syms_by_name.setdefault(s.name, s)
        for t in btf:
            if not isinstance(t, Datasec) or t.name in (".kconfig", ".ksyms"):
                continue
            fix_offsets = False
            if t.size == 0:
                sec = self.by_name.get(t.name)
                if sec is None or not sec.size:
                    raise self.err(f"BTF DATASEC {t.name!r} has no ELF section to take its size from")
                t.size = sec.size
                fix_offsets = True
            for v in t.vars:
                var = btf[v.type_id]
                if not isinstance(var, Var):
                    raise self.err(f"DATASEC {t.name!r} has a member of kind {var.kind.name}, expected VAR")
                if var.linkage in (BtfVarLinkage.STATIC, BtfVarLinkage.GLOBAL_EXTERN):
                    continue
                sym = syms_by_name.get(var.name)
                if sym is None:
                    raise self.err(f"BTF variable {var.name!r} of {t.name!r} has no ELF symbol")
                if fix_offsets:
                    v.offset = sym.value
                if sym.visibility in (1, 2):  # internal, hidden
                    var.linkage = BtfVarLinkage.STATIC
            t.vars.sort(key=lambda v: v.offset)

    def _load_btf_ext(self) -> BtfExt | None:
        sec = self.by_name.get(".BTF.ext")
        if sec is None or self.btf is None:
            return None
        from ..btf.ext import BtfExt

        return BtfExt.parse(sec.data, self.btf, f"{self.source}: .BTF.ext")

    # -- relocations ------------------------------------------------------

    def _collect_relocations(self) -> dict[int, list[_RawRel]]:
        out: dict[int, list[_RawRel]] = {}
        rel = struct.Struct("<QQ")
        for s in self.secs:
            if s.type != SHT_REL:
                continue
            if not 0 < s.info < len(self.secs):
                raise self.err(f"relocation section {s.name!r} points at section {s.info}, which does not exist")
            target = self.secs[s.info]
            if not target.flags & SHF_EXECINSTR and target.name not in (".maps",):
                continue  # .rel.BTF, .rel.BTF.ext, debug sections: not for the loader
            if len(s.data) % 16:
                raise self.err(f"relocation section {s.name!r} size {len(s.data)} is not a multiple of 16")
            lst = out.setdefault(target.index, [])
            for off in range(0, len(s.data), 16):
                r_offset, r_info = rel.unpack_from(s.data, off)
                sym_idx = r_info >> 32
                if sym_idx >= len(self.syms):
                    raise self.err(f"relocation in {s.name!r} refers to symbol {sym_idx}, which does not exist")
                if r_offset % 8 or r_offset + 8 > len(target.data):
                    raise self.err(f"relocation in {s.name!r} at offset {r_offset:#x} is outside {target.name!r}"
                                   " or not instruction-aligned")
                lst.append(_RawRel(target, r_offset // 8, self.syms[sym_idx]))
        return out

    # -- externs ----------------------------------------------------------

    def _collect_externs(self) -> dict[str, Extern]:
        und = {s.name: s for s in self.syms if s.shndx == SHN_UNDEF and s.name and s.type != STT_SECTION}
        if not und:
            return {}
        btf = self.btf
        if btf is None:
            raise self.err(f"extern {next(iter(und))!r} needs BTF to be resolved; compile with clang -g")
        from ..btf.types import Datasec, Func, Var

        found: dict[str, tuple[str, int]] = {}
        for t in btf:
            if isinstance(t, Datasec) and t.name in (".kconfig", ".ksyms"):
                for v in t.vars:
                    found[btf[v.type_id].name] = (t.name, v.type_id)
        externs: dict[str, Extern] = {}
        for name, sym in und.items():
            if name not in found:
                # an extern function declared without __ksym lands in no DATASEC
                ids = btf.find_ids(name, BtfKind.FUNC)
                if not ids:
                    raise self.err(f"extern {name!r} has no BTF description; declare it __kconfig or __ksym")
                found[name] = (".ksyms", ids[0])
            secname, tid = found[name]
            t = btf[tid]
            weak = sym.bind == STB_WEAK
            if not isinstance(t, (Func, Var)):
                raise self.err(f"extern {name!r} is described by a BTF {t.kind.name}, expected VAR or FUNC")
            if isinstance(t, Func):
                externs[name] = Extern(name, ExternKind.KFUNC, weak, btf_id=tid, type_id=t.type_id)
            elif secname == ".ksyms":
                typed = btf.resolve(t.type_id).kind != BtfKind.UNKN
                externs[name] = Extern(name, ExternKind.KSYM, weak, btf_id=tid, type_id=t.type_id if typed else 0)
            else:
                externs[name] = self._kconfig_extern(btf, name, weak, tid, t)
        self._layout_kconfig(externs)
        return externs

    def _kconfig_extern(self, btf: Btf, name: str, weak: bool, tid: int, var: Var) -> Extern:
        from ..btf.types import Array, Int

        if not (name.startswith("CONFIG_") or name.startswith("LINUX_")):
            raise self.err(f"kconfig extern {name!r} must be named CONFIG_* or LINUX_*")
        t = btf.resolve(var.type_id)
        k = t.kind
        size = btf.sizeof(t)
        align = btf.alignof(t)
        signed = False
        if isinstance(t, Int):
            enc = t.encoding
            if enc & 4:
                ktype = "bool"
            elif enc & 2 and size == 1:
                ktype = "char"
            else:
                ktype = "int"
                signed = bool(enc & 1)
        elif k == BtfKind.ENUM and t.name == "libbpf_tristate":
            ktype = "tristate"
        elif isinstance(t, Array) and btf.resolve(t.type_id).kind == BtfKind.INT and btf.sizeof(t.type_id) == 1:
            ktype = "char_array"
        else:
            raise self.err(f"kconfig extern {name!r} has unsupported type kind {k.name}")
        return Extern(name, ExternKind.KCONFIG, weak, btf_id=tid, type_id=var.type_id, size=size, align=align,
                      kcfg_type=ktype, signed=signed)

    def _layout_kconfig(self, externs: dict[str, Extern]) -> None:
        kc = [e for e in externs.values() if e.kind is ExternKind.KCONFIG]
        kc.sort(key=lambda e: (-e.align, e.size, e.name))
        off = 0
        for e in kc:
            off = (off + e.align - 1) // e.align * e.align
            e.offset = off
            off += e.size
        self.kconfig_size = off
        # libbpf fixes the .kconfig / .ksyms DATASECs from the extern layout and
        # rewrites the extern VARs/FUNCs so that the kernel accepts the BTF
        # (it refuses extern linkage): kconfig VARs become allocated globals at
        # their offsets; ksym VARs become int-typed globals, FUNCs in .ksyms
        # become global FUNCs and their DATASEC slots point to a dummy int VAR.
        if self.btf is None:
            return
        from ..btf.types import Datasec, Func, FuncProto, Var
        from ..uapi import FuncLinkage

        btf = self.btf
        for t in list(btf):
            if not isinstance(t, Datasec) or t.name not in (".kconfig", ".ksyms"):
                continue
            if t.name == ".kconfig":
                for v in t.vars:
                    var = btf[v.type_id]
                    ext = externs.get(var.name)
                    if ext is not None:
                        v.offset, v.size = ext.offset, ext.size
                    if isinstance(var, Var):
                        var.linkage = BtfVarLinkage.GLOBAL_ALLOCATED
                t.size = off
                t.vars.sort(key=lambda v: v.offset)
                continue
            int_id = self._int_type_id(btf)
            dummy = None
            for i, v in enumerate(t.vars):
                var = btf[v.type_id]
                if isinstance(var, Func):
                    if dummy is None:
                        dummy = btf.add(Var("dummy_ksym", int_id, BtfVarLinkage.GLOBAL_ALLOCATED))
                    proto = btf[var.type_id]
                    for prm in proto.params if isinstance(proto, FuncProto) else ():
                        if prm.type_id and not prm.name:
                            prm.name = "dummy_ksym"
                    var.linkage = FuncLinkage.GLOBAL
                    v.type_id = dummy
                elif isinstance(var, Var):
                    var.linkage = BtfVarLinkage.GLOBAL_ALLOCATED
                    var.type_id = int_id
                v.offset, v.size = i * 4, 4
            t.size = 4 * len(t.vars)

    @staticmethod
    def _int_type_id(btf: Btf) -> int:
        from ..btf.types import Int

        for t in btf:
            if t.kind == BtfKind.INT and btf.sizeof(t) == 4:
                return t.id
        return btf.add(Int("int", 4, 1))

    # -- maps -------------------------------------------------------------

    def _collect_maps(self, spec: ObjectSpec) -> None:
        self.map_by_sym: dict[tuple[int, int], str] = {}  # (shndx, value) → map name
        maps_sec = self.by_name.get(".maps")
        if maps_sec is not None:
            self._btf_maps(spec, maps_sec)
        legacy = self.by_name.get("maps")
        if legacy is not None:
            self._legacy_maps(spec, legacy)
        self._data_maps(spec)

    def _btf_maps(self, spec: ObjectSpec, sec: _Sec) -> None:
        btf = self.btf
        if btf is None:
            raise self.err("the object has a .maps section but no BTF; compile with clang -g")
        from ..btf.types import Datasec, Var

        ds = [t for t in btf if isinstance(t, Datasec) and t.name == ".maps"]
        if not ds:
            raise self.err("the object has a .maps section but no .maps DATASEC in its BTF")
        relocs = {r.slot * 8: r.sym for r in self.rels.get(sec.index, [])}
        for v in ds[0].vars:
            var = btf[v.type_id]
            if not isinstance(var, Var):
                raise self.err(f".maps DATASEC member {v.type_id} is a {var.kind.name}, expected VAR")
            m = self._parse_map_def(btf, var.name, var.type_id, v.offset, relocs, inner=False)
            spec.maps[m.name] = m
            self.map_by_sym[(sec.index, v.offset)] = m.name

    def _parse_map_def(self, btf: Btf, name: str, type_id: int, var_off: int, relocs: dict[int, _Sym],
                       inner: bool) -> MapSpec:
        from ..btf.types import Array, Ptr, Struct

        t = btf.resolve(type_id)
        if not isinstance(t, Struct):
            raise self.err(f"map {name!r} is a {t.kind.name}, expected a struct (use __uint/__type in a struct)")
        m = MapSpec(name=name, type=MapType.UNSPEC, key_size=0, value_size=0, max_entries=0, section=".maps")
        for f in btf.fields(t):
            fname = f.name
            ft = btf.resolve(f.type)
            if fname in ("type", "max_entries", "map_flags", "numa_node", "key_size", "value_size", "pinning",
                         "map_extra"):
                if not isinstance(ft, Ptr):
                    raise self.err(f"map {name!r}: attribute {fname!r} must be declared with __uint()")
                arr = btf.resolve(ft.type_id)
                if not isinstance(arr, Array):
                    raise self.err(f"map {name!r}: attribute {fname!r} must be declared with __uint()")
                val = arr.nelems
                if fname == "type":
                    m.type = MapType(val) if val in MapType._value2member_map_ else val
                elif fname == "map_flags":
                    m.flags = MapFlags(val)
                elif fname == "pinning":
                    if val not in (0, 1):
                        raise self.err(f"map {name!r}: pinning {val} is not LIBBPF_PIN_NONE or LIBBPF_PIN_BY_NAME")
                    m.pinning = PinType(val)
                else:
                    setattr(m, fname, val)
            elif fname in ("key", "value"):
                if not isinstance(ft, Ptr):
                    raise self.err(f"map {name!r}: {fname!r} must be declared with __type()")
                size = btf.sizeof(ft.type_id)
                old = getattr(m, f"{fname}_size")
                if old and old != size:
                    raise self.err(f"map {name!r}: {fname}_size {old} conflicts with the {fname} type's size {size}")
                setattr(m, f"{fname}_size", size)
                setattr(m, f"btf_{fname}_type_id", ft.type_id)
            elif fname == "values":
                if inner:
                    raise self.err(f"map {name!r}: an inner map cannot have 'values'")
                self._parse_values(btf, m, f, ft, var_off, relocs)
            else:
                raise self.err(f"map {name!r} has unknown attribute {fname!r}")
        if m.type == MapType.UNSPEC:
            raise self.err(f"map {name!r} has no type; add __uint(type, BPF_MAP_TYPE_...)")
        m.kernel_name = _kernel_map_name(name)
        return m

    def _parse_values(self, btf: Btf, m: MapSpec, f: FieldInfo, ft: Type, var_off: int,
                      relocs: dict[int, _Sym]) -> None:
        from ..btf.types import Array, Ptr

        if not isinstance(ft, Array):
            raise self.err(f"map {m.name!r}: 'values' must be declared with __array()")
        elem = btf.resolve(ft.type_id)
        if not isinstance(elem, Ptr):
            raise self.err(f"map {m.name!r}: 'values' must be an array of pointers")
        target = btf.resolve(elem.type_id)
        if m.type in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
            if target.kind != BtfKind.STRUCT:
                raise self.err(f"map {m.name!r}: 'values' of a map-in-map must point to a map definition struct")
            m.inner = self._parse_map_def(btf, m.name + ".inner", elem.type_id, 0, {}, inner=True)
            m.value_size = m.value_size or 4
        elif m.type == MapType.PROG_ARRAY:
            if target.kind != BtfKind.FUNC_PROTO:
                raise self.err(f"map {m.name!r}: 'values' of a prog array must point to a function prototype")
            m.value_size = m.value_size or 4
        else:
            raise self.err(f"map {m.name!r}: only prog arrays and map-in-maps can have 'values'")
        m.key_size = m.key_size or 4
        base = var_off + f.offset
        for off, sym in relocs.items():
            if base <= off < base + 8 * max(m.max_entries, 0):
                if (off - base) % 8:
                    raise self.err(f"map {m.name!r}: misaligned initialiser relocation at {off:#x}")
                m.init_slots[(off - base) // 8] = sym.name
        for slot in list(m.init_slots):
            if slot >= m.max_entries:
                raise self.err(f"map {m.name!r}: initialised slot {slot} >= max_entries {m.max_entries}")

    def _legacy_maps(self, spec: ObjectSpec, sec: _Sec) -> None:
        syms = sorted((s for s in self.syms if s.shndx == sec.index and s.type in (STT_OBJECT, STT_NOTYPE)
                       and s.name and s.bind in (STB_GLOBAL, STB_WEAK)), key=lambda s: s.value)
        if not syms:
            return
        def_size = len(sec.data) // len(syms)
        if def_size < _LEGACY_MAP.size or len(sec.data) % len(syms):
            raise self.err(f"legacy 'maps' section: {len(sec.data)} bytes do not divide into {len(syms)} map definitions")
        for s in syms:
            if s.value % def_size or s.value + def_size > len(sec.data):
                raise self.err(f"legacy map {s.name!r} at {s.value:#x} is not at a map definition boundary")
            mtype, ksz, vsz, maxe, flags = _LEGACY_MAP.unpack_from(sec.data, s.value)
            mt = MapType(mtype) if mtype in MapType._value2member_map_ else mtype
            m = MapSpec(s.name, mt, ksz, vsz, maxe, MapFlags(flags), _kernel_map_name(s.name), section="maps")
            spec.maps[s.name] = m
            self.map_by_sym[(sec.index, s.value)] = s.name

    def _data_maps(self, spec: ObjectSpec) -> None:
        for sec in self.secs:
            if not _is_data_section(sec.name) or not sec.flags & SHF_ALLOC or sec.type not in (SHT_PROGBITS, SHT_NOBITS):
                continue
            if not sec.size:
                continue
            ro = sec.name.startswith(".rodata")
            m = MapSpec(sec.name, MapType.ARRAY, 4, sec.size, 1, section=sec.name,
                        kernel_name=_internal_map_name(self.name, sec.name))
            if ro:
                m.flags |= MapFlags.RDONLY_PROG
                m.frozen = True
            m.value = sec.data if sec.type == SHT_PROGBITS else None
            self._data_btf(m, sec.name)
            spec.maps[sec.name] = m
        if self.kconfig_size:
            m = MapSpec(".kconfig", MapType.ARRAY, 4, self.kconfig_size, 1, MapFlags.RDONLY_PROG,
                        kernel_name=_internal_map_name(self.name, ".kconfig"), section=".kconfig", frozen=True)
            self._data_btf(m, ".kconfig")
            spec.maps[".kconfig"] = m

    def _data_btf(self, m: MapSpec, secname: str) -> None:
        if self.btf is None:
            return
        ids = self.btf.find_ids(secname, BtfKind.DATASEC)
        if not ids:
            return
        m.btf_value_type_id = ids[0]
        from ..btf.types import Datasec, Var

        btf = self.btf
        ds = btf[ids[0]]
        assert isinstance(ds, Datasec)  # found by kind
        if any(isinstance(var := btf[v.type_id], Var) and var.linkage != BtfVarLinkage.STATIC for v in ds.vars):
            m.flags |= MapFlags.MMAPABLE

    # -- programs ---------------------------------------------------------

    def _collect_programs(self, spec: ObjectSpec) -> None:
        text = self.by_name.get(".text")
        self.funcs: list[_Func] = []
        for sec in self.secs:
            if sec.type != SHT_PROGBITS or not sec.flags & SHF_EXECINSTR or not sec.size:
                continue
            if sec.size % 8:
                raise self.err(f"section {sec.name!r} size {sec.size} is not a multiple of 8")
            is_text = text is not None and sec.index == text.index
            for s in sorted((s for s in self.syms if s.shndx == sec.index and s.type == STT_FUNC), key=lambda s: s.value):
                if s.value % 8 or s.size % 8 or s.value + s.size > sec.size or not s.size:
                    raise self.err(f"function {s.name!r} ({s.value:#x}+{s.size:#x}) does not fit section {sec.name!r}")
                if not is_text and s.bind == STB_LOCAL:
                    raise self.err(f"program {s.name!r} in section {sec.name!r} is static; "
                                   "BPF programs must be global functions")
                self.funcs.append(_Func(s.name, sec, s.value // 8, (s.value + s.size) // 8, not is_text))
        # overlapping functions would make linking ambiguous
        by_sec: dict[int, list[_Func]] = {}
        for f in self.funcs:
            by_sec.setdefault(f.sec.index, []).append(f)
        for lst in by_sec.values():
            for a, b in zip(lst, lst[1:], strict=False):
                if b.start < a.end:
                    raise self.err(f"functions {a.name!r} and {b.name!r} overlap in section {a.sec.name!r}")
        self.by_sec = by_sec
        for f in self.funcs:
            if f.is_prog:
                spec.programs[f.name] = self._link(f, spec)

    def _func_at(self, sec: _Sec, slot: int) -> _Func:
        for f in self.by_sec.get(sec.index, ()):
            if f.start == slot:
                return f
        raise self.err(f"no function starts at instruction {slot} of section {sec.name!r}")

    def _rel_for(self, f: _Func) -> dict[int, _Sym]:
        return {r.slot: r.sym for r in self.rels.get(f.sec.index, ()) if f.start <= r.slot < f.end}

    def _link(self, main: _Func, spec: ObjectSpec) -> ProgramSpec:
        code = bytearray()
        placed: dict[str, int] = {}  # function name → slot base in the linked program
        relocs: list[_SlotReloc] = []  # slot-based
        funcs_order: list[tuple[_Func, int]] = []

        def place(f: _Func) -> int:
            base = len(code) // 8
            placed[f.name] = base
            funcs_order.append((f, base))
            code.extend(f.sec.data[f.start * 8:f.end * 8])
            process(f, base)
            return base

        def process(f: _Func, base: int) -> None:
            rels = self._rel_for(f)
            i = f.start
            while i < f.end:
                op = f.sec.data[i * 8]
                pos = base + (i - f.start)
                sym = rels.get(i)
                size = 2 if op == LDDW else 1
                if op == LDDW and i + 1 >= f.end:
                    raise self.err(f"function {f.name!r}: lddw at instruction {i} is cut off by the function's end")
                if op == _CALL:
                    regs = f.sec.data[i * 8 + 1]
                    src = regs >> 4
                    imm = _INSN.unpack_from(f.sec.data, i * 8)[3]
                    if sym is not None and sym.shndx == SHN_UNDEF:
                        relocs.append((pos, RelocKind.KFUNC, sym.name, sym.name, 0))
                    elif src == CallKind.PSEUDO_CALL:
                        if sym is not None:
                            tsec = self._sym_section(sym, f)
                            target_slot = sym.value // 8 + imm + 1
                        else:
                            tsec = f.sec
                            target_slot = i + imm + 1
                        callee = self._subprog(tsec, target_slot, f)
                        cbase = placed.get(callee.name)
                        if cbase is None:
                            cbase = place(callee)
                        _patch_imm(code, pos, cbase - pos - 1)
                        relocs.append((pos, RelocKind.CALL, self._sym_name(sym) if sym else callee.name, callee.name, 0))
                    elif sym is not None:
                        raise self.err(f"function {f.name!r}: relocation on helper call at instruction {i}")
                elif sym is not None:
                    if op != LDDW:
                        raise self.err(f"function {f.name!r}: relocation against {sym.name!r} on instruction {i} "
                                       f"(opcode {op:#04x}), which is not lddw or call")
                    self._ld_reloc(f, i, pos, sym, code, relocs, place, placed)
                i += size

        place(main)
        return self._finish(main, spec, bytes(code), relocs, funcs_order)

    def _sym_name(self, sym: _Sym) -> str:
        if sym.name or not 0 < sym.shndx < len(self.secs):
            return sym.name
        return self.secs[sym.shndx].name

    def _sym_section(self, sym: _Sym, f: _Func) -> _Sec:
        if not 0 < sym.shndx < len(self.secs):
            raise self.err(f"function {f.name!r}: call target {sym.name!r} is in no section")
        return self.secs[sym.shndx]

    def _subprog(self, sec: _Sec, slot: int, caller: _Func) -> _Func:
        text = self.by_name.get(".text")
        if text is None or sec.index != text.index:
            raise self.err(f"function {caller.name!r} calls into section {sec.name!r}; "
                           "only .text functions can be called (bpf-to-bpf)")
        return self._func_at(sec, slot)

    def _ld_reloc(self, f: _Func, i: int, pos: int, sym: _Sym, code: bytearray, relocs: list[_SlotReloc],
                  place: Callable[[_Func], int], placed: dict[str, int]) -> None:
        imm = _INSN.unpack_from(f.sec.data, i * 8)[3]
        if sym.shndx == SHN_UNDEF:
            ext = self.externs.get(sym.name)
            if ext is None:
                raise self.err(f"function {f.name!r}: reference to undefined symbol {sym.name!r}")
            if ext.kind is ExternKind.KCONFIG:
                relocs.append((pos, RelocKind.KCONFIG, sym.name, ".kconfig", ext.offset))
            else:
                relocs.append((pos, RelocKind.KSYM, sym.name, sym.name, 0))
            return
        if not 0 < sym.shndx < len(self.secs):
            raise self.err(f"function {f.name!r}: symbol {sym.name!r} is in no section")
        tsec = self.secs[sym.shndx]
        if tsec.flags & SHF_EXECINSTR:
            text = self.by_name.get(".text")
            if text is None or tsec.index != text.index:
                raise self.err(f"function {f.name!r}: address of code in {tsec.name!r}; only .text subprograms")
            off = sym.value + imm
            if off % 8:
                raise self.err(f"function {f.name!r}: misaligned subprogram address {off:#x}")
            callee = self._func_at(tsec, off // 8)
            cbase = placed.get(callee.name)
            if cbase is None:
                cbase = place(callee)
            code[pos * 8 + 1] = (code[pos * 8 + 1] & 0x0F) | (Pseudo.FUNC << 4)
            _patch_imm(code, pos, cbase - pos - 1)
            relocs.append((pos, RelocKind.SUBPROG_ADDR, sym.name or tsec.name, callee.name, 0))
            return
        key = (tsec.index, sym.value if sym.type != STT_SECTION else imm)
        if tsec.name in (".maps", "maps"):
            mname = self.map_by_sym.get(key)
            if mname is None:
                raise self.err(f"function {f.name!r}: {sym.name or tsec.name!r} is not a map of the object")
            relocs.append((pos, RelocKind.MAP, sym.name or tsec.name, mname, 0))
            return
        if _is_data_section(tsec.name):
            off = (imm if sym.type == STT_SECTION else sym.value + imm) & 0xFFFFFFFF
            if off > tsec.size:
                raise self.err(f"function {f.name!r}: offset {off} past the end of {tsec.name!r}")
            relocs.append((pos, RelocKind.MAP_VALUE, sym.name or tsec.name, tsec.name, off))
            return
        raise self.err(f"function {f.name!r}: reference to {sym.name or tsec.name!r} in section {tsec.name!r}, "
                       "which is neither a map nor global data")

    def _finish(self, main: _Func, spec: ObjectSpec, code: bytes, relocs: list[_SlotReloc],
                funcs_order: list[tuple[_Func, int]]) -> ProgramSpec:
        insns = decode(code, f"{self.source}: {main.name}")
        index_of = {}
        slot = 0
        for idx, ins in enumerate(insns):
            index_of[slot] = idx
            slot += ins.size
        info = match_section(main.sec.name)
        prog = ProgramSpec(
            name=main.name, section=main.sec.name, section_info=info, prog_type=info.prog_type,
            expected_attach_type=info.expected_attach_type, attach_target=info.target, flags=info.prog_flags,
            autoload=info.autoload, auto_attach=info.auto_attach, insns=insns, license=spec.license,
            kernel_version=spec.kernel_version, btf=self.btf, externs=self.externs,
        )
        for pos, kind, sym, target, off in relocs:
            prog.relocations.append(Relocation(index_of[pos], kind, sym, target, off))
        prog.relocations.sort(key=lambda r: r.insn)
        for f, base in funcs_order:
            if f is not main:
                prog.subprograms.append((f.name, index_of[base]))
            self._ext_records(prog, f, base, index_of)
        return prog

    def _ext_records(self, prog: ProgramSpec, f: _Func, base: int, index_of: dict[int, int]) -> None:
        sec = f.sec.name
        lo, hi = f.start * 8, f.end * 8

        def idx(off: int, what: str) -> int:
            if off % 8:
                raise self.err(f".BTF.ext {what} of {sec!r} at byte {off} is not instruction-aligned")
            slot = base + (off - lo) // 8
            if slot not in index_of:
                raise self.err(f".BTF.ext {what} of {sec!r} points into the middle of an lddw")
            return index_of[slot]

        if self.ext is None:
            return
        for fi in self.ext.func_info.get(sec, ()):
            if lo <= fi.insn_off < hi:
                prog.func_info.append(FuncInfo(idx(fi.insn_off, "func_info"), fi.type_id))
        for li in self.ext.line_info.get(sec, ()):
            if lo <= li.insn_off < hi:
                prog.line_info.append(LineInfo(idx(li.insn_off, "line_info"), li.file_name_off, li.line_off,
                                               li.line_num, li.col, li.file_name, li.line))
        for cr in self.ext.core_relos.get(sec, ()):
            if lo <= cr.insn_off < hi:
                # the parser rejected unknown kinds; obj keeps its own enum so
                # that it imports without bpfmux.btf
                prog.core_relos.append(CoreRelo(idx(cr.insn_off, "CO-RE relocation"), cr.type_id, cr.access_str,
                                                CoreReloKind(int(cr.kind))))


def _patch_imm(code: bytearray, slot: int, imm: int) -> None:
    if not -(1 << 31) <= imm < (1 << 31):
        raise ParseError(f"linked program too large: offset {imm} does not fit 32 bits")
    struct.pack_into("<i", code, slot * 8 + 4, imm)


def _kernel_map_name(name: str) -> str:
    """A map name as the kernel accepts it: at most 15 characters."""
    return name[: OBJ_NAME_LEN - 1]


def _internal_map_name(obj_name: str, sec_name: str) -> str:
    """libbpf's name for a global-data map: ``<obj prefix><section>``, sanitised.

    The suffix takes at least 7 characters; custom sections (``.data.foo``)
    get no object prefix; characters the kernel refuses become ``_``.
    """
    sfx_len = max(7, len(sec_name))
    if "." in sec_name[1:]:
        pfx_len = 0
    else:
        pfx_len = max(0, min(OBJ_NAME_LEN - sfx_len - 1, len(obj_name)))
    name = (obj_name[:pfx_len] + sec_name)[: OBJ_NAME_LEN - 1]
    return "".join(c if c.isalnum() or c in "_." else "_" for c in name)
