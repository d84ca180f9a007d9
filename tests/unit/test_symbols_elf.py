"""ELF symbol tables for uprobes: versions, file offsets, globbing, fuzzing."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpfmux.errors import NotFoundError, ParseError
from bpfmux.host.elfsyms import ElfSymbols
from bpfmux.host.globs import match
from bpfmux.host.ldcache import resolve_binary

# --------------------------------------------------------------------------
# a synthetic shared object, written here byte by byte

TEXT_OFF = 0x1000
TEXT_VADDR = 0x401000  # differs from the file offset: translation must go through PT_LOAD


def _strtab(names: list[str]) -> tuple[bytes, dict[str, int]]:
    data = b"\0"
    offs = {"": 0}
    for n in names:
        if n not in offs:
            offs[n] = len(data)
            data += n.encode() + b"\0"
    return data, offs


def _sym(name_off: int, bind: int, typ: int, shndx: int, value: int, size: int = 16) -> bytes:
    return struct.pack("<IBBHQQ", name_off, (bind << 4) | typ, 0, shndx, value, size)


def build_so() -> bytes:
    """A little ET_DYN with .dynsym (+ GNU versions), .symtab and two PT_LOADs."""
    dyn_names = ["foo", "bar", "ext", "obj", "libtest.so.1", "LIB_1.0", "LIB_2.0"]
    dynstr, d = _strtab(dyn_names)
    text_shndx = 1
    dynsym = _sym(0, 0, 0, 0, 0, 0)
    dynsym += _sym(d["foo"], 1, 2, text_shndx, TEXT_VADDR + 0x10)  # foo@LIB_1.0 (hidden)
    dynsym += _sym(d["foo"], 1, 2, text_shndx, TEXT_VADDR + 0x20)  # foo@@LIB_2.0
    dynsym += _sym(d["bar"], 2, 10, text_shndx, TEXT_VADDR + 0x30)  # bar: weak IFUNC, unversioned
    dynsym += _sym(d["ext"], 1, 2, 0, 0)  # undefined: skipped
    dynsym += _sym(d["obj"], 1, 1, text_shndx, TEXT_VADDR + 0x80)  # object: skipped
    versym = struct.pack("<6H", 0, 0x8002, 3, 1, 0, 1)

    def verdef(ndx: int, flags: int, name_off: int, last: bool) -> bytes:
        return struct.pack("<HHHHIII", 1, flags, ndx, 1, 0, 20, 0 if last else 28) + struct.pack("<II", name_off, 0)

    verdefs = verdef(1, 1, d["libtest.so.1"], False) + verdef(2, 0, d["LIB_1.0"], False) + verdef(3, 0, d["LIB_2.0"], True)

    st_names = ["helper", "foo", "str_a", "str_b"]
    strtab, s = _strtab(st_names)
    symtab = _sym(0, 0, 0, 0, 0, 0)
    symtab += _sym(s["helper"], 0, 2, text_shndx, TEXT_VADDR + 0x40)
    symtab += _sym(s["foo"], 1, 2, text_shndx, TEXT_VADDR + 0x20)  # duplicate of foo@@LIB_2.0
    symtab += _sym(s["str_a"], 1, 2, text_shndx, TEXT_VADDR + 0x50)
    symtab += _sym(s["str_b"], 1, 2, text_shndx, TEXT_VADDR + 0x60)
    symtab += _sym(s["str_b"], 0, 2, text_shndx, TEXT_VADDR + 0x70)  # a second, local definition

    sec_names = [".text", ".dynsym", ".dynstr", ".gnu.version", ".gnu.version_d", ".symtab", ".strtab", ".shstrtab"]
    shstrtab, sh = _strtab(sec_names)

    text = bytes(range(256))  # distinct bytes, so offsets can be checked by content
    blobs = [dynsym, dynstr, versym, verdefs, symtab, strtab, shstrtab]
    layout = []
    pos = TEXT_OFF + len(text)
    for b in blobs:
        pos = (pos + 7) & ~7
        layout.append(pos)
        pos += len(b)
    shoff = (pos + 7) & ~7
    nsec = 1 + len(sec_names)

    ehdr = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    ehdr += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, TEXT_VADDR, 64, shoff, 0, 64, 56, 2, 64, nsec, nsec - 1)
    ph = struct.pack("<IIQQQQQQ", 1, 4, 0, 0, 0, TEXT_OFF, TEXT_OFF, 0x1000)  # R, headers
    ph += struct.pack("<IIQQQQQQ", 1, 5, TEXT_OFF, TEXT_VADDR, TEXT_VADDR, len(text), len(text), 0x1000)  # R+X

    out = bytearray(shoff + 64 * nsec)
    out[: len(ehdr)] = ehdr
    out[64 : 64 + len(ph)] = ph
    out[TEXT_OFF : TEXT_OFF + len(text)] = text
    for off, b in zip(layout, blobs, strict=True):
        out[off : off + len(b)] = b

    def shdr(name: str, typ: int, off: int, size: int, link: int = 0, info: int = 0, entsize: int = 0,
             addr: int = 0, flags: int = 0) -> bytes:  # fmt: skip
        return struct.pack("<IIQQQQIIQQ", sh[name], typ, flags, addr, off, size, link, info, 8, entsize)

    shdrs = bytes(64)
    shdrs += shdr(".text", 1, TEXT_OFF, len(text), addr=TEXT_VADDR, flags=6)
    shdrs += shdr(".dynsym", 11, layout[0], len(dynsym), link=3, info=1, entsize=24)
    shdrs += shdr(".dynstr", 3, layout[1], len(dynstr))
    shdrs += shdr(".gnu.version", 0x6FFFFFFF, layout[2], len(versym), link=2, entsize=2)
    shdrs += shdr(".gnu.version_d", 0x6FFFFFFD, layout[3], len(verdefs), link=3, info=3)
    shdrs += shdr(".symtab", 2, layout[4], len(symtab), link=7, info=2, entsize=24)
    shdrs += shdr(".strtab", 3, layout[5], len(strtab))
    shdrs += shdr(".shstrtab", 3, layout[6], len(shstrtab))
    out[shoff:] = shdrs
    return bytes(out)


SO = build_so()


def test_versions_and_default_lookup():
    syms = ElfSymbols.from_bytes(SO, "libtest.so.1")
    foo = syms.lookup("foo")
    assert (foo.version, foo.default, foo.versioned_name) == ("LIB_2.0", True, "foo@@LIB_2.0")
    old = syms.lookup("foo@LIB_1.0")
    assert (old.address, old.default, old.versioned_name) == (TEXT_VADDR + 0x10, False, "foo@LIB_1.0")
    assert syms.lookup("foo@@LIB_2.0") == foo
    with pytest.raises(NotFoundError, match="foo@@LIB_9"):
        syms.lookup("foo@@LIB_9")


def test_offsets_go_through_program_headers():
    syms = ElfSymbols.from_bytes(SO)
    for s in syms.symbols:
        assert s.offset == s.address - TEXT_VADDR + TEXT_OFF
        # the byte at the file offset is the one the synthetic .text put there
        assert SO[s.offset] == s.address - TEXT_VADDR
    assert syms.offset_of(TEXT_VADDR + 0x99) == TEXT_OFF + 0x99
    with pytest.raises(NotFoundError):
        syms.offset_of(0x500000)


def test_kinds_bindings_tables_and_skips():
    syms = ElfSymbols.from_bytes(SO)
    bar = syms.lookup("bar")
    assert (bar.kind, bar.binding, bar.version, bar.table) == ("ifunc", "weak", None, ".dynsym")
    assert syms.lookup("helper").table == ".symtab" and syms.lookup("helper").binding == "local"
    assert "ext" not in syms and "obj" not in syms  # undefined and non-function symbols
    # the unversioned .symtab copy of foo@@LIB_2.0 is not listed twice
    assert [s.versioned_name for s in syms.symbols if s.name == "foo"] == ["foo@LIB_1.0", "foo@@LIB_2.0"]


def test_glob_matching():
    syms = ElfSymbols.from_bytes(SO)
    got = [(s.name, s.address - TEXT_VADDR) for s in syms.match("str_*")]
    assert got == [("str_a", 0x50), ("str_b", 0x60), ("str_b", 0x70)]  # both definitions of str_b
    assert [s.versioned_name for s in syms.match("foo")] == ["foo@@LIB_2.0", "foo@LIB_1.0"]
    assert [s.versioned_name for s in syms.match("*@LIB_1.*")] == ["foo@LIB_1.0"]
    assert syms.match("nothing*") == []
    assert match("b?r", ["bar", "bor", "barr"]) == ["bar", "bor"]
    with pytest.raises(ParseError):
        match("", ["x"])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_fuzz_corrupt_elf_raises_only_parse_error(data):
    buf = bytearray(SO)
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    try:
        syms = ElfSymbols.from_bytes(bytes(buf[:cut] if data.draw(st.booleans()) else buf))
    except ParseError:
        return
    for s in syms.symbols:  # whatever survived is self-consistent
        assert s.offset >= 0 and s.name


@given(st.binary(max_size=512))
def test_fuzz_random_bytes(blob):
    try:
        ElfSymbols.from_bytes(blob)
    except ParseError:
        pass


# --------------------------------------------------------------------------
# the real libc: the offset must hold the bytes the loaded function starts with


def _mapping_base(path: str) -> int:
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.realpath(parts[5]) == real and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise AssertionError(f"{path} is not mapped")


@pytest.mark.parametrize("func", ["getpid", "strtol", "strdup", "qsort"])
def test_libc_offsets_match_loaded_code(func):
    path = resolve_binary("libc.so.6")
    syms = ElfSymbols(path)
    sym = syms.lookup(func)
    assert sym.kind == "func"
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    addr = ctypes.cast(getattr(libc, func), ctypes.c_void_p).value
    base = _mapping_base(path)
    assert addr - base == sym.address  # ET_DYN: link-time vaddr = load offset
    with open(path, "rb") as f:
        f.seek(sym.offset)
        on_disk = f.read(16)
    assert ctypes.string_at(addr, 16) == on_disk


def test_libc_versioned_names():
    syms = ElfSymbols("libc.so.6")
    getpid = syms.lookup("getpid")
    assert getpid.versioned_name.startswith("getpid@@GLIBC_")
    assert syms.lookup(getpid.versioned_name) == getpid
    assert getpid in syms.match("getpid@@GLIBC_*")
