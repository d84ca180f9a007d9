"""A small reader for ``.BTF.ext`` (func_info, line_info, CO-RE relocations).

Private to :mod:`bpfmux.obj`: it only splits the section into per-ELF-section
record lists with byte offsets, which is what the linker needs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..errors import ParseError

_HDR = struct.Struct("<HBBIIIIII")
_U32 = struct.Struct("<I")
_MAGIC = 0xEB9F


@dataclass(slots=True)
class BtfExt:
    """Records per ELF section name; every record starts with its byte offset.

    :ivar func_info: section → ``[(insn_off, type_id)]``
    :ivar line_info: section → ``[(insn_off, file_name_off, line_off, line_col)]``
    :ivar core_relos: section → ``[(insn_off, type_id, access_str_off, kind)]``
    """

    func_info: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    line_info: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    core_relos: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)


def parse_btf_ext(data: bytes, string, source: str | None = None) -> BtfExt:
    """Parse ``.BTF.ext``; ``string(off)`` reads the object's BTF string table.

    :raises ParseError: bad magic, version or bounds.
    """
    if len(data) < 24:
        raise ParseError(f".BTF.ext is {len(data)} bytes, shorter than its header", 0, source)
    magic, version, _flags, hdr_len = struct.unpack_from("<HBBI", data, 0)
    if magic != _MAGIC:
        raise ParseError(f".BTF.ext has bad magic {magic:#x} (expected 0xeb9f)", 0, source)
    if version != 1:
        raise ParseError(f".BTF.ext version {version} is not supported (expected 1)", 2, source)
    if hdr_len < 24 or hdr_len > len(data):
        raise ParseError(f".BTF.ext header length {hdr_len} is invalid", 4, source)
    words = struct.unpack_from("<4I", data, 8)
    core = struct.unpack_from("<2I", data, 24) if hdr_len >= 32 else (0, 0)
    out = BtfExt()
    parts = ((words[0], words[1], 8, out.func_info, "func_info"),
             (words[2], words[3], 16, out.line_info, "line_info"),
             (core[0], core[1], 16, out.core_relos, "CO-RE relocation"))
    for off, length, min_rec, dest, what in parts:
        if not length:
            continue
        start = hdr_len + off
        end = start + length
        if off % 4 or end > len(data) or length < 4:
            raise ParseError(f".BTF.ext {what} subsection out of bounds", start, source)
        _parse_info(data, start, end, min_rec, dest, what, string, source)
    return out


def _parse_info(data: bytes, pos: int, end: int, min_rec: int, dest: dict, what: str, string, source) -> None:
    (rec_size,) = _U32.unpack_from(data, pos)
    if rec_size < min_rec or rec_size % 4:
        raise ParseError(f".BTF.ext {what} record size {rec_size} is invalid (at least {min_rec})", pos, source)
    pos += 4
    n_words = min_rec // 4
    fmt = struct.Struct(f"<{n_words}I")
    while pos < end:
        if pos + 8 > end:
            raise ParseError(f".BTF.ext {what}: truncated section header", pos, source)
        sec_off, count = struct.unpack_from("<II", data, pos)
        pos += 8
        if count == 0 or pos + count * rec_size > end:
            raise ParseError(f".BTF.ext {what}: {count} records of {rec_size} bytes overrun the subsection", pos, source)
        name = string(sec_off)
        recs = dest.setdefault(name, [])
        for _ in range(count):
            recs.append(fmt.unpack_from(data, pos))
            pos += rec_size
