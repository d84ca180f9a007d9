"""Kernel symbols (kallsyms) and library path resolution (ld.so.cache)."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpfmux.errors import NotFoundError, ParseError
from bpfmux.host.kallsyms import KernelSymbols, parse_kallsyms
from bpfmux.host.ldcache import parse_ld_cache, resolve_binary

KALLSYMS = """\
ffffffff81000000 T _stext
ffffffff81001000 t do_one_initcall
ffffffff81002000 T bpf_fentry_test1
ffffffff81002040 T bpf_fentry_test2
ffffffff82000000 D jiffies
ffffffff81002080 W weak_fn
ffffffffc0001000 t helper_fn\t[e1000]
ffffffffc0002000 T bpf_fentry_test1\t[bpf_testmod]
"""


def test_parse_kallsyms_fields_and_modules():
    syms = parse_kallsyms(KALLSYMS)
    assert len(syms) == 8
    assert syms[0].name == "_stext" and syms[0].address == 0xFFFFFFFF81000000 and syms[0].type == "T"
    assert syms[6].module == "e1000" and syms[6].name == "helper_fn"
    assert syms[4].is_function is False and syms[5].is_function is True


def test_lookup_prefers_core_kernel_and_match_globs():
    ks = KernelSymbols(parse_kallsyms(KALLSYMS))
    assert ks.lookup("bpf_fentry_test1").module is None
    assert ks.lookup("bpf_fentry_test1", module="bpf_testmod").address == 0xFFFFFFFFC0002000
    assert [s.name for s in ks.match("bpf_fentry_test*")] == ["bpf_fentry_test1", "bpf_fentry_test2"]
    assert ks.match("jiff*") == []  # data, not a function
    assert [s.name for s in ks.match("jiff*", functions_only=False)] == ["jiffies"]
    assert ks.names_at(0xFFFFFFFF81002040) == ["bpf_fentry_test2"]
    assert ks.addresses_visible
    with pytest.raises(NotFoundError, match="no kernel symbol named 'nope'"):
        ks.lookup("nope")
    assert not KernelSymbols(parse_kallsyms("0000000000000000 T a\n")).addresses_visible


@pytest.mark.parametrize(
    "bad",
    ["ffff T", "zzzz T name", "ffff TT name", "ffff T name [", "ffff T name\t[]", "ffff T a b c"],
)
def test_parse_kallsyms_rejects_garbage(bad):
    with pytest.raises(ParseError) as ei:
        parse_kallsyms("ffffffff81000000 T ok\n" + bad + "\n")
    assert ei.value.offset == 2  # the line number


@given(st.text(max_size=300))
def test_fuzz_kallsyms(text):
    try:
        syms = parse_kallsyms(text)
    except ParseError:
        return
    for s in syms:
        assert s.address >= 0 and s.name


def test_real_kallsyms_has_the_syscall_dispatcher():
    if not os.access("/proc/kallsyms", os.R_OK):
        pytest.skip("/proc/kallsyms is not readable here")
    ks = KernelSymbols.load()
    assert len(ks) > 1000
    assert ks.lookup("schedule").is_function


# --------------------------------------------------------------------------
# ld.so.cache


def build_ld_cache(entries: list[tuple[str, str, int]]) -> bytes:
    hdr_size, ent_size = 48, 24
    strings = b""
    offs = []
    base = hdr_size + ent_size * len(entries)
    for key, value, _ in entries:
        k = base + len(strings)
        strings += key.encode() + b"\0"
        v = base + len(strings)
        strings += value.encode() + b"\0"
        offs.append((k, v))
    out = b"glibc-ld.so.cache1.1" + struct.pack("<IIB3xI12x", len(entries), len(strings), 2, 0)
    for (k, v), (_, _, flags) in zip(offs, entries, strict=True):
        out += struct.pack("<iIIIQ", flags, k, v, 0, 0)
    return out + strings


def test_parse_ld_cache_roundtrip():
    entries = [("libfoo.so.1", "/opt/lib/libfoo.so.1", 0x0303), ("libbar.so", "/opt/lib32/libbar.so", 0x0003)]
    assert parse_ld_cache(build_ld_cache(entries)) == entries


@pytest.mark.parametrize("cut", [0, 10, 47, 60])
def test_parse_ld_cache_truncated(cut):
    data = build_ld_cache([("libfoo.so.1", "/x/libfoo.so.1", 0x0303)])
    with pytest.raises(ParseError):
        parse_ld_cache(data[:cut])


@given(st.binary(max_size=200), st.integers(0, 400))
def test_fuzz_ld_cache(blob, cut):
    data = bytearray(build_ld_cache([("libfoo.so.1", "/x/libfoo.so.1", 0x0303)]) + blob)
    if cut < len(data):
        data[cut] ^= 0xFF
    try:
        parse_ld_cache(bytes(data))
    except ParseError:
        pass


def test_resolve_through_a_given_cache(tmp_path):
    lib = tmp_path / "libzz.so.3"
    lib.write_bytes(b"\x7fELF")
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(build_ld_cache([("libzz.so.3", str(lib), 0x0303), ("libgone.so.1", "/no/such/file", 0x0303)]))
    assert resolve_binary("libzz.so.3", cache_path=str(cache)) == str(lib)
    assert resolve_binary("zz", cache_path=str(cache)) == str(lib)
    assert resolve_binary("libzz", cache_path=str(cache)) == str(lib)
    with pytest.raises(NotFoundError, match="libgone"):
        resolve_binary("libgone.so.1", cache_path=str(cache))


def test_resolve_real_names():
    libc = resolve_binary("libc.so.6")
    assert os.path.isfile(libc) and os.path.basename(os.path.realpath(libc)).startswith("libc")
    assert resolve_binary("c") == libc
    assert os.access(resolve_binary("sh"), os.X_OK)
    with pytest.raises(NotFoundError, match="does not exist"):
        resolve_binary("/no/such/binary")
    with pytest.raises(NotFoundError):
        resolve_binary("")
