"""``.BTF.ext``: per-section func_info, line_info and CO-RE relocation records.

Offsets in an object file's ``.BTF.ext`` are *byte* offsets into the program
section (``insn_off``); :attr:`insn_idx` gives the 8-byte slot index. The
kernel's ``BPF_PROG_LOAD`` wants slot indexes: :func:`pack_func_info` and
:func:`pack_line_info` produce those arrays.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ParseError
from ..uapi import CoreReloKind

if TYPE_CHECKING:
    from .model import Btf

__all__ = [
    "BtfExt",
    "CoreRelo",
    "CoreReloKind",
    "FuncInfo",
    "LineInfo",
    "pack_func_info",
    "pack_line_info",
]

_MAGIC = 0xEB9F
_HDR = struct.Struct("<HBBIIIII")
_CORE = struct.Struct("<II")
_U32 = struct.Struct("<I")
_U32x2 = struct.Struct("<II")
_U32x4 = struct.Struct("<IIII")


@dataclass(slots=True)
class FuncInfo:
    """A function's start: ``insn_off`` (bytes into the section) and its ``FUNC`` type id."""

    insn_off: int
    type_id: int

    @property
    def insn_idx(self) -> int:
        """Instruction slot index (``insn_off // 8``)."""
        return self.insn_off // 8


@dataclass(slots=True)
class LineInfo:
    """A source line for the instruction at ``insn_off`` (bytes into the section).

    :ivar file_name: source file name.
    :ivar line: the source line's text (as clang recorded it).
    :ivar line_num: 1-based line number.
    :ivar col: column.
    :ivar file_name_off: offset of ``file_name`` in the BTF strings.
    :ivar line_off: offset of ``line`` in the BTF strings.
    """

    insn_off: int
    file_name: str
    line: str
    line_num: int
    col: int
    file_name_off: int = 0
    line_off: int = 0

    @property
    def insn_idx(self) -> int:
        """Instruction slot index (``insn_off // 8``)."""
        return self.insn_off // 8


@dataclass(slots=True)
class CoreRelo:
    """One CO-RE relocation record.

    :ivar insn_off: byte offset of the instruction to patch in its section.
    :ivar type_id: the local (object BTF) root type.
    :ivar access_str: the access spec (``"0:1:3"``).
    :ivar kind: what to compute.
    :ivar access_str_off: offset of ``access_str`` in the BTF strings.
    """

    insn_off: int
    type_id: int
    access_str: str
    kind: CoreReloKind
    access_str_off: int = 0

    @property
    def insn_idx(self) -> int:
        """Instruction slot index (``insn_off // 8``)."""
        return self.insn_off // 8


@dataclass
class BtfExt:
    """Parsed ``.BTF.ext``: records grouped by ELF section name.

    :ivar func_info: section name → function records.
    :ivar line_info: section name → line records.
    :ivar core_relos: section name → CO-RE relocation records.
    :ivar func_info_rec_size: record size the object used (8 today).
    :ivar line_info_rec_size: record size the object used (16 today).
    :ivar core_relo_rec_size: record size the object used (16 today).
    """

    func_info: dict[str, list[FuncInfo]] = field(default_factory=dict)
    line_info: dict[str, list[LineInfo]] = field(default_factory=dict)
    core_relos: dict[str, list[CoreRelo]] = field(default_factory=dict)
    func_info_rec_size: int = 8
    line_info_rec_size: int = 16
    core_relo_rec_size: int = 16

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview, btf: Btf, source: str | None = None) -> BtfExt:
        """Parse ``.BTF.ext`` ``data``; names and lines are read from ``btf``'s strings.

        :raises ParseError: malformed or truncated data, or a string offset outside ``btf``.
        """
        data = bytes(data)
        if len(data) < 8:
            raise ParseError(f".BTF.ext is {len(data)} bytes, too short for its header", 0, source)
        magic, version, _flags, hdr_len = struct.unpack_from("<HBBI", data)
        if magic != _MAGIC:
            raise ParseError(f"bad .BTF.ext magic {magic:#06x} (expected 0xeb9f; big-endian objects are not supported)", 0, source)
        if version != 1:
            raise ParseError(f"unsupported .BTF.ext version {version}", 2, source)
        if hdr_len < _HDR.size or hdr_len > len(data):
            raise ParseError(f".BTF.ext header length {hdr_len} is out of range", 4, source)
        _, _, _, _, fi_off, fi_len, li_off, li_len = _HDR.unpack_from(data)
        cr_off = cr_len = 0
        if hdr_len >= _HDR.size + _CORE.size:
            cr_off, cr_len = _CORE.unpack_from(data, _HDR.size)
        self = cls()

        def string(off: int, what: str, pos: int) -> str:
            try:
                return btf.string(off)
            except ParseError:
                raise ParseError(f"{what} string offset {off} is outside the BTF string section", pos, source) from None

        def sections(off: int, length: int, min_rec: int, what: str):
            if not length:
                return 0, []
            start = hdr_len + off
            end = start + length
            if off % 4 or start + 4 > end or end > len(data):
                raise ParseError(f".BTF.ext {what} section (offset {off}, length {length}) is out of bounds", 8, source)
            (rec,) = _U32.unpack_from(data, start)
            if rec < min_rec or rec % 4:
                raise ParseError(f".BTF.ext {what} record size {rec} is invalid (at least {min_rec}, a multiple of 4)", start, source)
            pos = start + 4
            out = []
            while pos < end:
                if pos + 8 > end:
                    raise ParseError(f".BTF.ext {what}: truncated section header", pos, source)
                name_off, num = _U32x2.unpack_from(data, pos)
                if num == 0:
                    raise ParseError(f".BTF.ext {what}: a section with zero records", pos, source)
                name = string(name_off, "section name", pos)
                pos += 8
                if pos + num * rec > end:
                    raise ParseError(f".BTF.ext {what} for {name!r}: {num} records run past the section", pos, source)
                out.append((name, [(pos + i * rec) for i in range(num)]))
                pos += num * rec
            return rec, out

        rec, secs = sections(fi_off, fi_len, 8, "func_info")
        if rec:
            self.func_info_rec_size = rec
        for name, positions in secs:
            self.func_info.setdefault(name, []).extend(FuncInfo(*_U32x2.unpack_from(data, p)) for p in positions)
        rec, secs = sections(li_off, li_len, 16, "line_info")
        if rec:
            self.line_info_rec_size = rec
        for name, positions in secs:
            lst = self.line_info.setdefault(name, [])
            for p in positions:
                insn_off, file_off, line_off, line_col = _U32x4.unpack_from(data, p)
                lst.append(
                    LineInfo(
                        insn_off,
                        string(file_off, "file name", p),
                        string(line_off, "line", p) if line_off else "",
                        line_col >> 10,
                        line_col & 0x3FF,
                        file_off,
                        line_off,
                    )
                )
        rec, secs = sections(cr_off, cr_len, 16, "CO-RE relocation")
        if rec:
            self.core_relo_rec_size = rec
        for name, positions in secs:
            lst2 = self.core_relos.setdefault(name, [])
            for p in positions:
                insn_off, type_id, acc_off, kind = _U32x4.unpack_from(data, p)
                if kind > max(CoreReloKind):
                    raise ParseError(f"CO-RE relocation kind {kind} is unknown (newer than this bpfmux?)", p + 12, source)
                if type_id >= len(btf):
                    raise ParseError(f"CO-RE relocation refers to unknown type [{type_id}]", p + 4, source)
                lst2.append(CoreRelo(insn_off, type_id, string(acc_off, "access", p), CoreReloKind(kind), acc_off))
        return self

    def sections(self) -> list[str]:
        """Every section name that has records, in first-seen order."""
        seen: dict[str, None] = {}
        for d in (self.func_info, self.line_info, self.core_relos):
            for k in d:
                seen.setdefault(k, None)
        return list(seen)


def pack_func_info(records: list[FuncInfo], base_insn: int = 0) -> bytes:
    """``bpf_func_info`` array for ``BPF_PROG_LOAD`` (``insn_off`` in slots, shifted by ``base_insn``).

    :raises ParseError: a record's offset is not a multiple of 8 bytes (a ``ValueError``).
    """
    out = bytearray()
    for r in records:
        if r.insn_off % 8:
            raise ParseError(f"func_info offset {r.insn_off} is not instruction-aligned; offsets are in bytes, "
                             "a multiple of 8")
        out += _U32x2.pack(r.insn_off // 8 + base_insn, r.type_id)
    return bytes(out)


def pack_line_info(records: list[LineInfo], base_insn: int = 0) -> bytes:
    """``bpf_line_info`` array for ``BPF_PROG_LOAD`` (``insn_off`` in slots, shifted by ``base_insn``).

    :raises ParseError: a record's offset is not a multiple of 8 bytes (a ``ValueError``).
    """
    out = bytearray()
    for r in records:
        if r.insn_off % 8:
            raise ParseError(f"line_info offset {r.insn_off} is not instruction-aligned; offsets are in bytes, "
                             "a multiple of 8")
        out += _U32x4.pack(r.insn_off // 8 + base_insn, r.file_name_off, r.line_off, (r.line_num << 10) | (r.col & 0x3FF))
    return bytes(out)
