"""Function symbols of user binaries (ELF), with file offsets for uprobes.

Uprobes name their target by *file offset* inside a binary, so an ELF symbol's
virtual address is turned into a file offset through the program headers (the
``PT_LOAD`` segment that holds it). Symbols come from ``.dynsym`` (with GNU
symbol versions: ``getpid@@GLIBC_2.2.5`` is the default version,
``name@VER`` a hidden one), from ``.symtab``, and from the separate debug file
of a stripped binary (found through its build id or ``.gnu_debuglink``), as
other tracers do.

Parsers raise :class:`~bpfmux.errors.ParseError` on malformed input and
:class:`~bpfmux.errors.NotFoundError` when a name is missing.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from functools import lru_cache

from ..errors import NotFoundError, ParseError
from ..record import Frozen
from ..record import set_field as _set
from .files import MiB, read_file
from .globs import match
from .ldcache import resolve_binary

__all__ = ["ElfSymbol", "ElfSymbols"]


class ElfSymbol(Frozen):
    """A function symbol of a user binary.

    :ivar name: plain name (without version).
    :ivar address: virtual address (``st_value``).
    :ivar size: ``st_size``.
    :ivar offset: file offset of the first instruction (what a uprobe wants).
    :ivar version: GNU symbol version (``GLIBC_2.2.5``), ``None`` if unversioned.
    :ivar default: True when the version is the default one (``@@``).
    :ivar binding: ``"global"``, ``"weak"`` or ``"local"``.
    :ivar kind: ``"func"`` or ``"ifunc"`` (a GNU indirect function: the
        address is its *resolver*).
    :ivar table: ``".dynsym"``, ``".symtab"`` or ``"debug"`` (the separate
        debug file's ``.symtab``).
    """

    __slots__ = ("name", "address", "size", "offset", "version", "default", "binding", "kind", "table")

    name: str
    address: int
    size: int
    offset: int
    version: str | None
    default: bool
    binding: str
    kind: str
    table: str

    def __init__(
        self,
        name: str,
        address: int,
        size: int,
        offset: int,
        version: str | None = None,
        default: bool = True,
        binding: str = "global",
        kind: str = "func",
        table: str = ".dynsym",
    ) -> None:
        _set(self, "name", name)
        _set(self, "address", address)
        _set(self, "size", size)
        _set(self, "offset", offset)
        _set(self, "version", version)
        _set(self, "default", default)
        _set(self, "binding", binding)
        _set(self, "kind", kind)
        _set(self, "table", table)

    @property
    def versioned_name(self) -> str:
        """``name@@VER`` (default version), ``name@VER`` (hidden) or ``name``."""
        if not self.version:
            return self.name
        return f"{self.name}{'@@' if self.default else '@'}{self.version}"


_SYM64 = struct.Struct("<IBBHQQ")
_SYM32 = struct.Struct("<IIIBBH")
_STT_FUNC = 2
_STT_GNU_IFUNC = 10
_STB = {0: "local", 1: "global", 2: "weak", 10: "global"}  # 10 = STB_GNU_UNIQUE
_SHN_UNDEF = 0
_SHN_LORESERVE = 0xFF00
_DEBUG_ROOT = "/usr/lib/debug"
#: Largest binary (or debug file) whose symbols are read.
MAX_BINARY_BYTES = 2048 * MiB


class ElfSymbols:
    """The function symbols of one ELF file, with file offsets for uprobes.

    :param path: the binary (a path, or a name resolved by :func:`resolve_binary`).
    :param debug: also read the separate debug file's ``.symtab`` when the
        binary is stripped and one is installed.
    :ivar path: the resolved path.
    :ivar symbols: every defined function symbol, deduplicated on
        ``(name, version, address)``; ``.dynsym`` entries come first.

    :raises NotFoundError: the binary does not exist.
    :raises ParseError: the file is not a well-formed ELF file.
    """

    def __init__(self, path: str, debug: bool = True, *, debug_root: str = _DEBUG_ROOT) -> None:
        self.path = resolve_binary(path)
        try:
            data = read_file(self.path, MAX_BINARY_BYTES, "binary")
        except OSError as e:
            raise NotFoundError("binary", path, f"cannot read it: {e.strerror}") from e
        self._debug_root = debug_root
        self._build(data, debug)

    @classmethod
    def cached(cls, path: str) -> ElfSymbols:
        """The symbols of ``path``, parsed once per file version (path, size,
        mtime) and then reused.

        :raises NotFoundError: the binary does not exist.
        :raises ParseError: the file is not a well-formed ELF file.
        """
        real = resolve_binary(path)
        try:
            st = os.stat(real)
        except OSError as e:
            raise NotFoundError("binary", path, f"cannot read it: {e.strerror}") from e
        return _cached_elf(real, st.st_size, st.st_mtime_ns)

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<bytes>") -> ElfSymbols:
        """Symbols of an ELF image held in memory (no debug-file lookup).

        :raises ParseError: the image is not a well-formed ELF file.
        """
        self = cls.__new__(cls)
        self.path = source
        self._debug_root = _DEBUG_ROOT
        self._build(bytes(data), debug=False)
        return self

    def _build(self, data: bytes, debug: bool) -> None:
        self.build_id: str | None = None
        self.debug_file: str | None = None
        tables, segments, self.build_id, debuglink = _parse_elf(data, self.path, with_symtab=True)
        self._segments = segments
        if debug and not any(t.name == ".symtab" for t in tables):
            dbg = self._find_debug_file(debuglink)
            if dbg is not None:
                try:
                    ddata = read_file(dbg, MAX_BINARY_BYTES, "debug file")
                    dtables, _, dbid, _ = _parse_elf(ddata, dbg, with_symtab=True)
                except (OSError, ParseError):
                    dtables, dbid = [], None
                dtables = [t for t in dtables if t.name == ".symtab"]
                if dtables and (self.build_id is None or dbid is None or dbid == self.build_id):
                    self.debug_file = dbg
                    tables += [_Table("debug", t.raw, t.entsize, t.strtab, t.is64, t.end, None, {}, t.source)
                               for t in dtables]  # fmt: skip
        self._tables = tables
        # rows are read lazily, per name prefix (see _ensure); ElfSymbol objects on demand
        self._rows: list[_RawSym] = []
        self._order: list[tuple[int, int]] = []  # (table rank, entry index) of each row
        self._by_name_rows: dict[str, list[int]] = {}
        self._scanned: list[bytes] = []
        self._row_sym: dict[int, ElfSymbol | None] = {}
        self._all: tuple[ElfSymbol, ...] | None = None

    def _ensure(self, prefix: str) -> None:
        """Read every function symbol whose name starts with ``prefix``
        (``""``: all), deduplicated on ``(name, version, address)``.

        :raises ParseError: a symbol table is corrupt.
        """
        pb = prefix.encode("utf-8", "surrogateescape")
        if any(pb.startswith(done) for done in self._scanned):
            return
        known = set(self._by_name_rows)
        seen: set[tuple[str, str | None, int]] = set()
        versioned_at: set[tuple[str, int]] = set()
        try:
            found = [(rank, i, row) for rank, t in enumerate(self._tables) for i, row in _read_symbols(t, pb)]
        except (struct.error, IndexError, ValueError) as e:
            raise ParseError(f"corrupt symbol table ({e})", None, self.path) from e
        for rank, i, row in found:
            name, version, _default, addr = row[0], row[1], row[2], row[3]
            if name in known:
                continue  # read by an earlier, shorter prefix
            key = (name, version, addr)
            if key in seen:
                continue
            # a versioned .dynsym entry makes an unversioned copy of it (from .symtab) redundant
            if version is None and (name, addr) in versioned_at:
                continue
            seen.add(key)
            if version is not None:
                versioned_at.add((name, addr))
            self._by_name_rows.setdefault(name, []).append(len(self._rows))
            self._rows.append(row)
            self._order.append((rank, i))
        self._scanned = [d for d in self._scanned if not d.startswith(pb)] + [pb]

    def _sym_at(self, i: int) -> ElfSymbol | None:
        """The symbol of row ``i`` (``None``: its address is in no loadable segment)."""
        try:
            return self._row_sym[i]
        except KeyError:
            pass
        name, version, default, addr, size, bind, table, kind = self._rows[i]
        off = _vaddr_to_offset(self._segments, addr)
        sym = ElfSymbol(name, addr, size, off, version, default, bind, kind, table) if off is not None else None
        self._row_sym[i] = sym
        return sym

    def _syms(self, name: str) -> list[ElfSymbol]:
        """The symbols called ``name``, in table order."""
        self._ensure(name)
        return [s for i in self._by_name_rows.get(name, ()) if (s := self._sym_at(i)) is not None]

    @property
    def symbols(self) -> tuple[ElfSymbol, ...]:
        """Every defined function symbol, deduplicated on ``(name, version,
        address)``, in table order, ``.dynsym`` entries first (built on first use).

        :raises ParseError: a symbol table is corrupt.
        """
        if self._all is None:
            self._ensure("")
            rows = sorted(range(len(self._rows)), key=self._order.__getitem__)
            self._all = tuple(s for i in rows if (s := self._sym_at(i)) is not None)
        return self._all

    def _find_debug_file(self, debuglink: str | None) -> str | None:
        cands = []
        if self.build_id and len(self.build_id) > 2:
            cands.append(os.path.join(self._debug_root, ".build-id", self.build_id[:2], self.build_id[2:] + ".debug"))
        if debuglink:
            d = os.path.dirname(os.path.realpath(self.path))
            cands += [
                os.path.join(d, debuglink),
                os.path.join(d, ".debug", debuglink),
                os.path.join(self._debug_root + d, debuglink),
            ]
        for c in cands:
            if os.path.isfile(c) and os.path.realpath(c) != os.path.realpath(self.path):
                return c
        return None

    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self._syms(name))

    def names(self) -> list[str]:
        """Distinct symbol names, in table order."""
        return list(dict.fromkeys(s.name for s in self.symbols))

    def lookup(self, name: str) -> ElfSymbol:
        """The symbol named ``name``; ``name@@VER``/``name@VER`` pick a version.

        Without a version the default version (``@@``) wins, then a global
        ``.dynsym`` entry, then the first one found.

        :raises NotFoundError: no such function symbol.
        """
        base, version, default = _split_version(name)
        cands = self._syms(base)
        if version is not None:
            cands = [s for s in cands if s.version == version and (default is None or s.default == default)]
        if not cands:
            raise NotFoundError(
                "function symbol", name, f"it is not in {self.path}; list them with ElfSymbols({self.path!r}).names()"
            )

        def rank(s: ElfSymbol) -> tuple[int, int, int]:
            return (0 if s.default else 1, 0 if s.table == ".dynsym" else 1, 0 if s.binding != "local" else 1)

        return min(cands, key=rank)

    def offset(self, name: str) -> int:
        """File offset of ``name`` (see :meth:`lookup`).

        :raises NotFoundError: no such function symbol.
        """
        return self.lookup(name).offset

    def match(self, pattern: str) -> list[ElfSymbol]:
        """Function symbols matching a glob, one per ``(name, address)``.

        A pattern with ``@`` matches :attr:`ElfSymbol.versioned_name`; otherwise
        the plain name is matched, and each name keeps its preferred version
        (see :meth:`lookup`) plus any other address it is defined at.

        :raises ParseError: empty pattern.
        """
        if "@" in pattern:
            by_v: dict[str, ElfSymbol] = {}
            for s in self.symbols:
                by_v.setdefault(s.versioned_name, s)
            return [by_v[n] for n in match(pattern, by_v)]
        literal = pattern
        for i, c in enumerate(pattern):
            if c in "*?[":
                literal = pattern[:i]
                break
        self._ensure(literal)
        out: list[ElfSymbol] = []
        cands = sorted((n for n in self._by_name_rows if n.startswith(literal)),
                       key=lambda n: self._order[self._by_name_rows[n][0]])  # fmt: skip
        for n in match(pattern, cands):
            if not self._syms(n):
                continue
            best = self.lookup(n)
            out.append(best)
            seen = {best.address}
            for s in self._syms(n):
                if s.address not in seen:
                    seen.add(s.address)
                    out.append(s)
        return out

    def offset_of(self, address: int) -> int:
        """File offset of a virtual address of this binary.

        :raises NotFoundError: no loadable segment holds ``address``.
        """
        off = _vaddr_to_offset(self._segments, address)
        if off is None:
            raise NotFoundError("address", hex(address), f"no PT_LOAD segment of {self.path} covers it")
        return off


@lru_cache(maxsize=2)
@lru_cache(maxsize=32)
def _cached_elf(path: str, size: int, mtime_ns: int) -> ElfSymbols:
    return ElfSymbols(path)


def _split_version(name: str) -> tuple[str, str | None, bool | None]:
    if "@@" in name:
        b, v = name.split("@@", 1)
        return b, v, True
    if "@" in name:
        b, v = name.split("@", 1)
        return b, v, None
    return name, None, None


def _vaddr_to_offset(segments: Sequence[tuple[int, int, int, int]], addr: int) -> int | None:
    """``segments``: (p_vaddr, p_offset, p_filesz, p_flags) of PT_LOAD entries."""
    best = None
    for vaddr, offset, filesz, flags in segments:
        if vaddr <= addr < vaddr + filesz:
            if flags & 1:  # PF_X: executable segment wins
                return addr - vaddr + offset
            if best is None:
                best = addr - vaddr + offset
    return best


# (name, version, default, address, size, binding, table, kind)
_RawSym = tuple[str, "str | None", bool, int, int, str, str, str]

_SHDR64 = struct.Struct("<IIQQQQIIQQ")
_SHDR32 = struct.Struct("<IIIIIIIIII")
_NOTE = struct.Struct("<III")
_VERDEF = struct.Struct("<HHHHIII")
_VERDAUX = struct.Struct("<II")
_SHT_SYMTAB, _SHT_NOTE, _SHT_NOBITS, _SHT_DYNSYM = 2, 7, 8, 11
_PT_LOAD = 1
_SHT_GNU_VERDEF, _SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFF
_NT_GNU_BUILD_ID = 3


class _Table(Frozen):
    """One symbol table of an image, kept raw until names are asked for."""

    __slots__ = ("name", "raw", "entsize", "strtab", "is64", "end", "versym", "verdefs", "source")

    name: str  # ".dynsym" / ".symtab"
    raw: bytes
    entsize: int
    strtab: bytes
    is64: bool
    end: str
    versym: list[int] | None
    verdefs: dict[int, str]
    source: str

    def __init__(
        self,
        name: str,
        raw: bytes,
        entsize: int,
        strtab: bytes,
        is64: bool,
        end: str,
        versym: list[int] | None,
        verdefs: dict[int, str],
        source: str,
    ) -> None:
        _set(self, "name", name)
        _set(self, "raw", raw)
        _set(self, "entsize", entsize)
        _set(self, "strtab", strtab)
        _set(self, "is64", is64)
        _set(self, "end", end)
        _set(self, "versym", versym)
        _set(self, "verdefs", verdefs)
        _set(self, "source", source)


def _parse_elf(
    data: bytes, source: str, with_symtab: bool = True
) -> tuple[list[_Table], list[tuple[int, int, int, int]], str | None, str | None]:
    """Symbol tables (raw), PT_LOAD segments, build id and debuglink of an ELF image.

    The ELF header, program headers, section header table, notes, version
    tables and symbol entries are unpacked directly with precompiled
    ``struct`` formats (much faster on a debug file's large ``.symtab``, and
    no pyelftools import: it costs a tool's start-up ~0.25 s), with every
    offset checked against the image.

    :raises ParseError: malformed ELF.
    """
    if len(data) < 52 or data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise ParseError("not a well-formed ELF file (bad ELF identification)", None, source)
    is64 = data[4] == 2
    little = data[5] == 1
    ehdr = struct.Struct(("<" if little else ">") + ("16xHHIQQQIHHHHHH" if is64 else "16xHHIIIIIHHHHHH"))
    if len(data) < ehdr.size:
        raise ParseError("not a well-formed ELF file (truncated ELF header)", None, source)
    _ty, _mach, _ver, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum, shentsize, shnum, shstrndx = \
        ehdr.unpack_from(data, 0)
    end = "<" if little else ">"
    phdr = struct.Struct(end + ("IIQQQQQQ" if is64 else "IIIIIIII"))
    if phnum and phentsize < phdr.size:
        raise ParseError(f"program header size {phentsize} is smaller than {phdr.size}", phoff, source)
    if phoff + phnum * phentsize > len(data):
        raise ParseError("program header table runs past the end of the file", phoff, source)
    segments = []
    for i in range(phnum):
        f = phdr.unpack_from(data, phoff + i * phentsize)
        if f[0] != _PT_LOAD:
            continue
        if is64:
            _t, flags, off, vaddr, _paddr, filesz, _memsz, _align = f
        else:
            _t, off, vaddr, _paddr, filesz, _memsz, flags, _align = f
        segments.append((vaddr, off, filesz, flags))
    shdr = struct.Struct(end + (_SHDR64 if is64 else _SHDR32).format[1:])
    if shnum and shentsize < shdr.size:
        raise ParseError(f"section header size {shentsize} is smaller than {shdr.size}", shoff, source)
    if shoff + shnum * shentsize > len(data):
        raise ParseError("section header table runs past the end of the file", shoff, source)
    # (name_off, type, offset, size, link, info, entsize)
    secs = []
    for i in range(shnum):
        f = shdr.unpack_from(data, shoff + i * shentsize)
        if is64:
            name, typ, _flags, _addr, off, size, link, info, _align, entsize = f
        else:
            name, typ, _flags, _addr, off, size, link, info, _align, entsize = f
        secs.append((name, typ, off, size, link, info, entsize))

    def body(i: int) -> bytes:
        _n, typ, off, size, *_ = secs[i]
        if typ == _SHT_NOBITS:
            return b""
        if off + size > len(data):
            raise ParseError(f"section {i} runs past the end of the file", off, source)
        return data[off : off + size]

    shstr = body(shstrndx) if 0 < shstrndx < len(secs) else b""

    def sec_name(i: int) -> str:
        n = secs[i][0]
        if n >= len(shstr):
            return ""
        e = shstr.find(b"\0", n)
        return shstr[n : e if e >= 0 else len(shstr)].decode("utf-8", "replace")

    build_id = debuglink = None
    versym: list[int] | None = None
    verdefs: dict[int, str] = {}
    tables = []
    for i, (_n, typ, off, _size, link, info, _entsize) in enumerate(secs):
        if typ == _SHT_NOTE and build_id is None:
            build_id = _build_id(body(i), end)
        elif typ == _SHT_GNU_VERSYM:
            raw = body(i)
            versym = [v[0] for v in struct.iter_unpack(end + "H", raw[: len(raw) // 2 * 2])]
        elif typ == _SHT_GNU_VERDEF:
            if link >= len(secs):
                raise ParseError(f"version definitions link to missing section {link}", off, source)
            verdefs = _verdefs(body(i), body(link), info, end, source)
        elif typ == _SHT_DYNSYM or (typ == _SHT_SYMTAB and with_symtab):
            tables.append((".dynsym" if typ == _SHT_DYNSYM else ".symtab", i))
        elif typ != _SHT_NOBITS and sec_name(i) == ".gnu_debuglink":
            raw = body(i)
            nul = raw.find(b"\0")
            debuglink = raw[: nul if nul >= 0 else len(raw)].decode("utf-8", "replace") or None
    out: list[_Table] = []
    symsize = (_SYM64 if is64 else _SYM32).size
    for table, i in sorted(tables, key=lambda t: t[0] != ".dynsym"):
        _n, _t, off, size, link, _info, entsize = secs[i]
        if link >= len(secs):
            raise ParseError(f"{table} links to missing string table {link}", off, source)
        if secs[i][1] == _SHT_NOBITS or secs[link][1] == _SHT_NOBITS:
            continue
        if entsize < symsize:
            raise ParseError(f"{table} entry size {entsize} is smaller than {symsize}", off, source)
        out.append(_Table(table, body(i), entsize, body(link), is64, end,
                          versym if table == ".dynsym" else None, verdefs, source))  # fmt: skip
    return out, segments, build_id, debuglink


def _build_id(notes: bytes, end: str) -> str | None:
    hdr = struct.Struct(end + "III")
    pos = 0
    while pos + hdr.size <= len(notes):
        namesz, descsz, ntype = hdr.unpack_from(notes, pos)
        name_end = pos + hdr.size + ((namesz + 3) & ~3)
        desc_end = name_end + ((descsz + 3) & ~3)
        if desc_end > len(notes) or namesz > len(notes) or descsz > len(notes):
            return None
        if ntype == _NT_GNU_BUILD_ID and notes[pos + hdr.size : pos + hdr.size + namesz].rstrip(b"\0") == b"GNU":
            return notes[name_end : name_end + descsz].hex() or None
        pos = desc_end
    return None


def _verdefs(raw: bytes, strtab: bytes, count: int, end: str, source: str) -> dict[int, str]:
    vd = struct.Struct(end + "HHHHIII")
    va = struct.Struct(end + "II")
    out: dict[int, str] = {}
    pos = 0
    for _ in range(min(count, len(raw) // vd.size + 1)):
        if pos + vd.size > len(raw):
            raise ParseError("version definition runs past its section", pos, source)
        _ver, _flags, ndx, cnt, _hash, aux, nxt = vd.unpack_from(raw, pos)
        if cnt and pos + aux + va.size <= len(raw):
            name_off, _ = va.unpack_from(raw, pos + aux)
            if name_off < len(strtab):
                e = strtab.find(b"\0", name_off)
                out[ndx] = strtab[name_off : e if e >= 0 else len(strtab)].decode("utf-8", "replace")
        if not nxt:
            break
        pos += nxt
    return out


def _read_symbols(t: _Table, prefix: bytes = b"") -> list[tuple[int, _RawSym]]:
    """``(entry index, row)`` of the defined function symbols of table ``t``
    whose name starts with ``prefix``.

    Only entries whose ``st_info`` (a strided slice) says function, and whose
    name (``st_name``, the first field of both symbol layouts) has the prefix,
    are unpacked and decoded.
    """
    raw, entsize, strtab, is64 = t.raw, t.entsize, t.strtab, t.is64
    fmt = struct.Struct(t.end + (_SYM64 if is64 else _SYM32).format[1:])
    out: list[tuple[int, _RawSym]] = []
    n = len(raw) // entsize
    info_at = 4 if is64 else 12
    infos = raw[info_at : n * entsize : entsize]
    wanted = [i for i, b in enumerate(infos) if (b & 0xF) == _STT_FUNC or (b & 0xF) == _STT_GNU_IFUNC]
    if prefix:
        name_col = struct.Struct(t.end + "I" + f"{entsize - 4}x")
        names = [x[0] for x in name_col.iter_unpack(raw[: n * entsize])]
        starts = strtab.startswith
        wanted = [i for i in wanted if starts(prefix, names[i])]
    versym, verdefs, table = t.versym, t.verdefs, t.name
    unpack = fmt.unpack_from
    find = strtab.find
    nstr = len(strtab)
    for i in wanted:
        if is64:
            st_name, st_info, _other, st_shndx, st_value, st_size = unpack(raw, i * entsize)
        else:
            st_name, st_value, st_size, st_info, _other, st_shndx = unpack(raw, i * entsize)
        typ = st_info & 0xF
        if not st_value or i == 0:
            continue
        if st_shndx == _SHN_UNDEF or (st_shndx >= _SHN_LORESERVE and st_shndx != 0xFFF1):
            continue
        if st_name >= nstr:
            continue
        e = find(b"\0", st_name)
        name = strtab[st_name : e if e >= 0 else nstr].decode("utf-8", "replace")
        if not name:
            continue
        version: str | None = None
        default = True
        if versym is not None and i < len(versym):
            v = versym[i]
            idx = v & 0x7FFF
            if idx >= 2 and idx in verdefs:
                version = verdefs[idx]
                default = not (v & 0x8000)
        elif "@" in name:
            name, version, d = _split_version(name)
            default = bool(d)
        bind = _STB.get(st_info >> 4, "global")
        kind = "ifunc" if typ == _STT_GNU_IFUNC else "func"
        out.append((i, (name, version, default, st_value, st_size, bind, table, kind)))
    return out


