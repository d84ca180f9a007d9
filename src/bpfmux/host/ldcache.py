"""Library names to paths: the dynamic linker's cache (``/etc/ld.so.cache``),
then common library directories, then ``$PATH`` (for executables)."""

from __future__ import annotations

import os
import struct
from functools import lru_cache

from ..errors import NotFoundError, ParseError
from .files import MiB, read_file

__all__ = ["ld_cache", "parse_ld_cache", "resolve_binary"]


_LD_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_LD_CACHE_HDR = struct.Struct("<20sIIB3xI12x")
_LD_CACHE_ENTRY = struct.Struct("<iIIIQ")
_FLAG_ELF_LIBC6 = 0x0003
_FLAG_X8664_LIB64 = 0x0300
_OLD_MAGIC = b"ld.so-1.7.0"

_COMMON_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
)


def parse_ld_cache(data: bytes, source: str = "/etc/ld.so.cache") -> list[tuple[str, str, int]]:
    """Entries ``(soname, path, flags)`` of a glibc ``ld.so.cache`` (format 1.1).

    An old-format (``ld.so-1.7.0``) prefix is skipped.

    :raises ParseError: not a cache file, or a truncated/corrupt one.
    """
    start = 0
    if data.startswith(_OLD_MAGIC):
        if len(data) < 16:
            raise ParseError("truncated old-format ld.so.cache header", 0, source)
        (nold,) = struct.unpack_from("<I", data, 12)
        start = 16 + nold * 12
        start = (start + 7) & ~7
        # the new table follows, aligned to 8 bytes (search a few positions to be lenient)
        pos = data.find(_LD_CACHE_MAGIC, start if start <= len(data) else len(data))
        if pos < 0:
            raise ParseError("old-format ld.so.cache without a new-format table", start, source)
        start = pos
    if data[start : start + len(_LD_CACHE_MAGIC)] != _LD_CACHE_MAGIC:
        raise ParseError("not a glibc ld.so.cache (bad magic)", start, source)
    if len(data) < start + _LD_CACHE_HDR.size:
        raise ParseError("truncated ld.so.cache header", start, source)
    _magic, nlibs, len_strings, _flags, _ext = _LD_CACHE_HDR.unpack_from(data, start)
    table = start + _LD_CACHE_HDR.size
    if table + nlibs * _LD_CACHE_ENTRY.size > len(data):
        raise ParseError(f"ld.so.cache claims {nlibs} entries but is only {len(data)} bytes", table, source)
    base = start  # string offsets are relative to the new-format header

    def string(off: int, where: int) -> str:
        p = base + off
        if not 0 <= p < len(data):
            raise ParseError(f"string offset {off} out of range", where, source)
        end = data.find(b"\0", p)
        if end < 0:
            raise ParseError(f"unterminated string at {off}", where, source)
        return data[p:end].decode("utf-8", "replace")

    out = []
    for i in range(nlibs):
        pos = table + i * _LD_CACHE_ENTRY.size
        flags, key, value, _osv, _hwcap = _LD_CACHE_ENTRY.unpack_from(data, pos)
        out.append((string(key, pos), string(value, pos), flags))
    return out


@lru_cache(maxsize=4)
def _ld_cache_cached(path: str, mtime_ns: int) -> tuple[tuple[str, str, int], ...]:
    return tuple(parse_ld_cache(read_file(path, 64 * MiB, "dynamic linker cache"), path))


def ld_cache(path: str = "/etc/ld.so.cache") -> list[tuple[str, str, int]]:
    """Entries of the dynamic linker cache (empty when there is none).

    :raises ParseError: the cache file is corrupt.
    """
    try:
        st = os.stat(path)
    except OSError:
        return []
    return list(_ld_cache_cached(path, st.st_mtime_ns))


def resolve_binary(name: str, *, cache_path: str = "/etc/ld.so.cache") -> str:
    """Path of a binary or library named ``name``.

    A name with a ``/`` is a path and must exist. Otherwise: an exact soname in
    the linker cache (``libc.so.6``), then ``lib<name>.so*``/``<name>.so*``
    (``c``, ``libc``), then the common library directories, then ``$PATH``.
    64-bit x86 entries of the cache are preferred.

    :raises NotFoundError: nothing of that name is found.
    """
    if not name:
        raise NotFoundError("binary", name, "give a path or a library name such as 'libc.so.6'")
    if "/" in name:
        if os.path.exists(name):
            return os.path.abspath(name)
        raise NotFoundError("binary", name, "the file does not exist; check the path")
    try:
        entries = ld_cache(cache_path)
    except ParseError:
        entries = []

    def pick(cands: list[tuple[str, str, int]]) -> str | None:
        good = [c for c in cands if os.path.exists(c[1])]
        if not good:
            return None
        native = [c for c in good if c[2] & 0xFF00 == _FLAG_X8664_LIB64 and c[2] & 0xFF == _FLAG_ELF_LIBC6]
        return (native or good)[0][1]

    exact = pick([e for e in entries if e[0] == name])
    if exact:
        return exact
    stems = [name] if name.startswith("lib") else [f"lib{name}", name]
    for stem in stems:
        found = pick([e for e in entries if e[0].startswith(stem + ".so")])
        if found:
            return found
    for d in _COMMON_DIRS:
        for cand in [name] + [f"{s}.so" for s in stems]:
            p = os.path.join(d, cand)
            if os.path.isfile(p):
                return p
        try:
            listing = sorted(os.listdir(d))
        except OSError:
            continue
        for stem in stems:
            for f in listing:
                if f.startswith(stem + ".so"):
                    return os.path.join(d, f)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if d and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise NotFoundError(
        "binary", name, "not in the linker cache, the common library directories or $PATH; give its full path"
    )
